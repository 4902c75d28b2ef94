//! The RBAC authorizer. Every RoleBinding and ClusterRoleBinding is indexed
//! by the subjects it names, with its role's rules resolved, and the index is
//! rebuilt whenever an RBAC object changes (under the state lock, so that it
//! never lags a committed write). A request's check is then a few hash
//! lookups: it must never scan all bindings, and nothing here writes state.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::aggregate;
use super::attributes::{Attributes, SERVICE_ACCOUNT_PREFIX, UserInfo};
use super::rules::{Rule, parse_rules};
use crate::store::{
    CLUSTER_ROLE_BINDINGS_KEY, CLUSTER_ROLES_KEY, ROLE_BINDINGS_KEY, ROLES_KEY, State,
};

/// The API group of the RBAC kinds.
pub(crate) const GROUP: &str = "rbac.authorization.k8s.io";

/// Decides requests: `system:masters` first, then RBAC; or everything, when
/// the sandbox runs without authorization.
#[derive(Debug)]
pub(crate) struct Authorizer {
    enabled: AtomicBool,
    index: RwLock<Arc<Index>>,
}

impl Default for Authorizer {
    fn default() -> Self {
        Self {
            enabled: AtomicBool::new(true),
            index: RwLock::new(Arc::new(Index::default())),
        }
    }
}

impl Authorizer {
    /// With `false`, every request is allowed (kube-apiserver's
    /// `AlwaysAllow`), impersonation included.
    pub(crate) fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// The current index (cheap: shared).
    pub(crate) fn index(&self) -> Arc<Index> {
        self.index
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// After RBAC objects changed: aggregate ClusterRoles, then re-index.
    /// Called with the state lock held, so readers never see an index older
    /// than a committed write.
    pub(crate) fn refresh(&self, state: &mut State) {
        aggregate::reconcile(state);
        let index = Arc::new(Index::build(state));
        *self
            .index
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = index;
    }

    /// Whether `user` may do `attributes`, and why.
    pub(crate) fn decide(&self, user: &UserInfo, attributes: &Attributes) -> Decision {
        if !self.enabled() || user.is_superuser() {
            return Decision::default_allow();
        }
        let index = self
            .index
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        index.decide(user, attributes)
    }

    pub(crate) fn allows(&self, user: &UserInfo, attributes: &Attributes) -> bool {
        self.decide(user, attributes).allowed
    }
}

/// An authorization decision. Its reason is worded only when asked for, so
/// that allowed requests pay nothing for it.
#[derive(Debug, Default)]
pub(crate) struct Decision {
    pub(crate) allowed: bool,
    /// The binding that allowed the request, described.
    source: Option<Arc<str>>,
    /// Roles that could not be resolved for the user's bindings.
    errors: Vec<Arc<str>>,
}

impl Decision {
    fn default_allow() -> Self {
        Self {
            allowed: true,
            ..Self::default()
        }
    }

    /// Upstream's reason: `RBAC: allowed by ...` for an allowed request, the
    /// resolution errors for a refused one, or nothing.
    pub(crate) fn reason(&self) -> String {
        match (&self.source, self.errors.is_empty()) {
            (Some(source), _) => format!("RBAC: allowed by {source}"),
            (None, false) => format!("RBAC: {}", aggregate_errors(&self.errors)),
            (None, true) => String::new(),
        }
    }
}

/// Errors joined as Go's `utilerrors.NewAggregate` prints them.
pub(crate) fn aggregate_errors(errors: &[Arc<str>]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for error in errors {
        if !seen.contains(&error.as_ref()) {
            seen.push(error);
        }
    }
    match seen.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// One binding's grant to one subject.
#[derive(Debug, Clone)]
struct Grant {
    /// The binding's position (ClusterRoleBindings by name, then
    /// RoleBindings by namespace and name): a binding matched through two
    /// subjects counts once.
    order: usize,
    /// `ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`.
    source: Arc<str>,
    /// The role's rules, or why they could not be resolved.
    rules: Result<Arc<[Rule]>, Arc<str>>,
}

/// Grants by user name (ServiceAccount subjects included, under their user
/// name) and by group.
#[derive(Debug, Default)]
struct Subjects {
    users: HashMap<String, Vec<Grant>>,
    groups: HashMap<String, Vec<Grant>>,
}

impl Subjects {
    fn grants<'a>(&'a self, user: &'a UserInfo) -> impl Iterator<Item = &'a Grant> + 'a {
        let by_name = self.users.get(&user.name).into_iter().flatten();
        let by_group = user
            .groups
            .iter()
            .filter_map(|group| self.groups.get(group))
            .flatten();
        by_name.chain(by_group)
    }
}

/// Every binding, by the subjects it names.
#[derive(Debug, Default)]
pub(crate) struct Index {
    cluster: Subjects,
    namespaced: HashMap<String, Subjects>,
}

impl Index {
    /// Index the RBAC objects of `state`.
    pub(crate) fn build(state: &State) -> Self {
        let mut index = Self::default();
        let mut roles = HashMap::new();
        let mut order = 0;
        for ((_, name), binding) in state.range(CLUSTER_ROLE_BINDINGS_KEY, None, None) {
            let rules = resolve(state, &mut roles, binding, "");
            let describe = |subject: &str| {
                format!(
                    "ClusterRoleBinding {name:?} of {} to {subject}",
                    describe_ref(binding)
                )
            };
            add(&mut index.cluster, binding, "", &rules, order, describe);
            order += 1;
        }
        for ((namespace, name), binding) in state.range(ROLE_BINDINGS_KEY, None, None) {
            let rules = resolve(state, &mut roles, binding, namespace);
            let describe = |subject: &str| {
                format!(
                    "RoleBinding {:?} of {} to {subject}",
                    format!("{name}/{namespace}"),
                    describe_ref(binding)
                )
            };
            let subjects = index.namespaced.entry(namespace.clone()).or_default();
            add(subjects, binding, namespace, &rules, order, describe);
            order += 1;
        }
        index
    }

    /// The grants that apply to `user` in `namespace`: cluster-wide ones,
    /// then those of the namespace.
    fn grants<'a>(
        &'a self,
        user: &'a UserInfo,
        namespace: &str,
    ) -> impl Iterator<Item = &'a Grant> + 'a {
        let local = if namespace.is_empty() {
            None
        } else {
            self.namespaced.get(namespace)
        };
        self.cluster.grants(user).chain(
            local
                .into_iter()
                .flat_map(move |subjects| subjects.grants(user)),
        )
    }

    /// Upstream's RBAC authorizer: allowed by the first rule that matches.
    pub(crate) fn decide(&self, user: &UserInfo, attributes: &Attributes) -> Decision {
        let mut errors = Vec::new();
        for grant in self.grants(user, &attributes.namespace) {
            match &grant.rules {
                Ok(rules) if rules.iter().any(|rule| rule.allows(attributes)) => {
                    return Decision {
                        allowed: true,
                        source: Some(grant.source.clone()),
                        errors: Vec::new(),
                    };
                }
                Ok(_) => {}
                Err(error) => errors.push(error.clone()),
            }
        }
        Decision {
            allowed: false,
            source: None,
            errors,
        }
    }

    /// Every rule that applies to `user` in `namespace` ("" for cluster-wide
    /// only), in binding order, and the errors met resolving them (upstream's
    /// `RulesFor`).
    pub(crate) fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<Rule>, Vec<Arc<str>>) {
        let grants: BTreeMap<usize, &Grant> =
            self.grants(user, namespace).map(|g| (g.order, g)).collect();
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        for grant in grants.values() {
            match &grant.rules {
                Ok(found) => rules.extend(found.iter().cloned()),
                Err(error) => errors.push(error.clone()),
            }
        }
        (rules, errors)
    }
}

type Resolved = Result<Arc<[Rule]>, Arc<str>>;

/// The rules a binding's roleRef names, worded as the informer-backed
/// resolver words a missing role; shared by bindings of the same role.
fn resolve(
    state: &State,
    cache: &mut HashMap<(String, String, String), Resolved>,
    binding: &Value,
    namespace: &str,
) -> Resolved {
    let kind = str_at(binding, "/roleRef/kind");
    let name = str_at(binding, "/roleRef/name");
    let key = (kind.to_owned(), namespace.to_owned(), name.to_owned());
    cache
        .entry(key)
        .or_insert_with(|| {
            role_rules(state, kind, name, namespace)
                .map(Arc::from)
                .map_err(|e| Arc::from(e.listed()))
        })
        .clone()
}

fn add(
    subjects: &mut Subjects,
    binding: &Value,
    namespace: &str,
    rules: &Resolved,
    order: usize,
    describe: impl Fn(&str) -> String,
) {
    let listed = binding.get("subjects").and_then(Value::as_array);
    for subject in listed.into_iter().flatten() {
        let kind = str_at(subject, "/kind");
        let name = str_at(subject, "/name");
        let grant = |who: String| Grant {
            order,
            source: Arc::from(describe(&who)),
            rules: rules.clone(),
        };
        match kind {
            "User" => push(&mut subjects.users, name, grant(format!("User {name:?}"))),
            "Group" => push(&mut subjects.groups, name, grant(format!("Group {name:?}"))),
            "ServiceAccount" => {
                // A RoleBinding's ServiceAccount without a namespace is in the
                // binding's namespace; a ClusterRoleBinding's matches nobody.
                let sa_namespace = match str_at(subject, "/namespace") {
                    "" => namespace,
                    given => given,
                };
                if sa_namespace.is_empty() {
                    continue;
                }
                let user = format!("{SERVICE_ACCOUNT_PREFIX}{sa_namespace}:{name}");
                let who = format!("ServiceAccount {:?}", format!("{name}/{sa_namespace}"));
                push(&mut subjects.users, &user, grant(who));
            }
            _ => {}
        }
    }
}

fn push(map: &mut HashMap<String, Vec<Grant>>, key: &str, grant: Grant) {
    map.entry(key.to_owned()).or_default().push(grant);
}

fn describe_ref(binding: &Value) -> String {
    format!(
        "{} {:?}",
        str_at(binding, "/roleRef/kind"),
        str_at(binding, "/roleRef/name")
    )
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Why a roleRef names no rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RoleRefError {
    /// No such Role (`singular` "role") or ClusterRole.
    NotFound {
        singular: &'static str,
        name: String,
    },
    UnsupportedKind(String),
    /// The role's stored rules do not decode.
    Undecodable(String),
}

impl RoleRefError {
    /// As the authorizer's informer listers word it: `role.rbac... "x" not found`.
    pub(crate) fn listed(&self) -> String {
        match self {
            Self::NotFound { singular, name } => format!("{singular}.{GROUP} {name:?} not found"),
            other => other.stored(),
        }
    }

    /// As the RBAC storage's registry words it: `roles.rbac... "x" not found`.
    pub(crate) fn stored(&self) -> String {
        match self {
            Self::NotFound { singular, name } => format!("{singular}s.{GROUP} {name:?} not found"),
            Self::UnsupportedKind(kind) => format!("unsupported role reference kind: {kind:?}"),
            Self::Undecodable(error) => error.clone(),
        }
    }
}

/// The rules of the role a binding in `namespace` ("" for a
/// ClusterRoleBinding) references (upstream's `GetRoleReferenceRules`).
pub(crate) fn role_rules(
    state: &State,
    kind: &str,
    name: &str,
    namespace: &str,
) -> Result<Vec<Rule>, RoleRefError> {
    let (key, singular, role_namespace) = match kind {
        "Role" => (ROLES_KEY, "role", namespace),
        "ClusterRole" => (CLUSTER_ROLES_KEY, "clusterrole", ""),
        other => return Err(RoleRefError::UnsupportedKind(other.to_owned())),
    };
    let missing = || RoleRefError::NotFound {
        singular,
        name: name.to_owned(),
    };
    if kind == "Role" && namespace.is_empty() {
        return Err(missing());
    }
    let role = state.get(key, role_namespace, name).ok_or_else(missing)?;
    parse_rules(role.get("rules")).map_err(RoleRefError::Undecodable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state_with(objects: &[(&str, Value)]) -> State {
        let mut state = State::new(100);
        for (key, object) in objects {
            state.put(key, object.clone());
        }
        state
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    fn fixture() -> State {
        state_with(&[
            (
                CLUSTER_ROLES_KEY,
                json!({"metadata": {"name": "reader"}, "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]}),
            ),
            (
                ROLES_KEY,
                json!({"metadata": {"name": "writer", "namespace": "a"}, "rules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"]}]}),
            ),
            (
                ROLE_BINDINGS_KEY,
                json!({"metadata": {"name": "read", "namespace": "a"}, "roleRef": {"kind": "ClusterRole", "name": "reader"},
                       "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Group", "name": "team"}]}),
            ),
            (
                ROLE_BINDINGS_KEY,
                json!({"metadata": {"name": "write", "namespace": "a"}, "roleRef": {"kind": "Role", "name": "writer"},
                       "subjects": [{"kind": "User", "name": "bob"}]}),
            ),
            (
                CLUSTER_ROLE_BINDINGS_KEY,
                json!({"metadata": {"name": "ghost"}, "roleRef": {"kind": "ClusterRole", "name": "missing"},
                       "subjects": [{"kind": "User", "name": "bob"}]}),
            ),
        ])
    }

    #[test]
    fn bindings_grant_their_subjects_in_their_namespace_only() {
        let index = Index::build(&fixture());
        let sa = user("system:serviceaccount:a:sa", &["system:serviceaccounts"]);
        let list_a = Attributes::resource("list", "", "configmaps", "a", "");
        let list_b = Attributes::resource("list", "", "configmaps", "b", "");
        let list_all = Attributes::resource("list", "", "configmaps", "", "");
        let decision = index.decide(&sa, &list_a);
        assert!(decision.allowed);
        assert_eq!(
            decision.reason(),
            "RBAC: allowed by RoleBinding \"read/a\" of ClusterRole \"reader\" to ServiceAccount \"sa/a\""
        );
        assert!(!index.decide(&sa, &list_b).allowed);
        assert!(
            !index.decide(&sa, &list_all).allowed,
            "a RoleBinding grants no cluster-wide list"
        );
        assert!(index.decide(&user("carol", &["team"]), &list_a).allowed);
        assert!(
            !index
                .decide(&user("system:serviceaccount:b:sa", &[]), &list_a)
                .allowed
        );
    }

    #[test]
    fn a_missing_role_is_the_reason_of_a_refusal() {
        let index = Index::build(&fixture());
        let bob = user("bob", &[]);
        let create = Attributes::resource("create", "", "configmaps", "a", "");
        assert!(index.decide(&bob, &create).allowed);
        let delete = Attributes::resource("delete", "", "configmaps", "a", "x");
        let refused = index.decide(&bob, &delete);
        assert!(!refused.allowed);
        assert_eq!(
            refused.reason(),
            "RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found"
        );
        let (rules, errors) = index.rules_for(&bob, "a");
        assert_eq!(rules.len(), 1);
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn errors_aggregate_as_go_prints_them() {
        let e = |s: &str| Arc::from(s);
        assert_eq!(aggregate_errors(&[e("a")]), "a");
        assert_eq!(aggregate_errors(&[e("a"), e("b"), e("a")]), "[a, b]");
    }
}
