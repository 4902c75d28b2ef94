//! Privilege-escalation prevention, as kube-apiserver's RBAC storage does
//! it: a user may write a Role or ClusterRole only with rules they hold
//! (or with `escalate` on it), and a binding only to a role whose rules they
//! hold (or with `bind` on it); setting an `aggregationRule` needs every
//! permission. It runs inside the write, under the state lock, after
//! decoding and before validation; it must never write state itself.

use serde_json::Value;

use super::attributes::{Attributes, UserInfo};
use super::rbac::{Authorizer, GROUP, aggregate_errors, role_rules};
use super::rules::{Rule, describe_missing, go_quoted_list, parse_rules, uncovered};
use crate::error::{ApiError, ApiResult};
use crate::object::{meta_mut, meta_str};
use crate::store::State;

/// The request a write of an RBAC object comes from.
pub(crate) struct Write<'a> {
    pub(crate) authorizer: &'a Authorizer,
    pub(crate) user: &'a UserInfo,
    /// `roles`, `clusterroles`, `rolebindings` or `clusterrolebindings`.
    pub(crate) resource: &'a str,
    /// The request's namespace ("" for the cluster-scoped kinds).
    pub(crate) namespace: &'a str,
    /// The request's name ("" for a create).
    pub(crate) name: &'a str,
}

/// Refuse the write of `new` (replacing `old`) if it would grant `user`
/// more than they hold.
pub(crate) fn check(
    write: &Write<'_>,
    state: &State,
    old: Option<&Value>,
    new: &Value,
) -> ApiResult<()> {
    // system:masters may grant anything; so may anyone when authorization is
    // off (upstream's AlwaysAllow allows `escalate` and `bind`).
    if !write.authorizer.enabled() || write.user.is_superuser() {
        return Ok(());
    }
    let name = meta_str(new, "name");
    let refuse = |why: &str| ApiError::forbidden(GROUP, write.resource, name, why);
    match write.resource {
        "roles" | "clusterroles" => {
            if write.allowed("escalate", write.resource, write.name) || only_gc_fields(old, new) {
                return Ok(());
            }
            let rules = parse_rules(new.get("rules")).map_err(|e| refuse(&e))?;
            write.confirm(&rules).map_err(|why| refuse(&why))?;
            let aggregates = |role: &Value| {
                role.pointer("/aggregationRule/clusterRoleSelectors")
                    .and_then(Value::as_array)
                    .is_some_and(|s| !s.is_empty())
            };
            // An aggregation rule can gather anything (and removing one can
            // stop a role from being tightened), so it needs every right.
            if write.resource == "clusterroles" && (aggregates(new) || old.is_some_and(aggregates))
            {
                write.confirm(&full_authority()).map_err(|_| {
                    refuse("must have cluster-admin privileges to use the aggregationRule")
                })?;
            }
            Ok(())
        }
        "rolebindings" | "clusterrolebindings" => {
            if only_gc_fields(old, new) {
                return Ok(());
            }
            let at = |field: &str| {
                new.pointer(&format!("/roleRef/{field}"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
            };
            let (kind, role) = (at("kind"), at("name"));
            let bind_resource = match kind {
                "Role" => Some("roles"),
                "ClusterRole" => Some("clusterroles"),
                _ => None,
            };
            let bindable = bind_resource.is_some_and(|resource| {
                let bind =
                    Attributes::resource("bind", at("apiGroup"), resource, write.namespace, role);
                write.authorizer.allows(write.user, &bind)
            });
            if bindable {
                return Ok(());
            }
            let rules =
                role_rules(state, kind, role, write.namespace).map_err(|e| refuse(&e.stored()))?;
            write.confirm(&rules).map_err(|why| refuse(&why))
        }
        _ => Ok(()),
    }
}

impl Write<'_> {
    fn allowed(&self, verb: &str, resource: &str, name: &str) -> bool {
        let attributes = Attributes::resource(verb, GROUP, resource, self.namespace, name);
        self.authorizer.allows(self.user, &attributes)
    }

    /// Upstream's `ConfirmNoEscalation`: the user's own rules in the
    /// request's namespace must cover `rules`.
    fn confirm(&self, rules: &[Rule]) -> Result<(), String> {
        let (owned, errors) = self.authorizer.index().rules_for(self.user, self.namespace);
        let missing = uncovered(&owned, rules);
        if missing.is_empty() {
            return Ok(());
        }
        let mut message = format!(
            "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
            self.user.name,
            go_quoted_list(&self.user.groups),
            describe_missing(missing)
        );
        if !errors.is_empty() {
            message.push_str(&format!(
                "; resolution errors: [{}]",
                aggregate_errors(&errors)
            ));
        }
        Err(message)
    }
}

/// Everything: `*` on `*.*` and on every non-resource URL.
fn full_authority() -> [Rule; 2] {
    let all = || vec!["*".to_owned()];
    [
        Rule {
            verbs: all(),
            api_groups: all(),
            resources: all(),
            ..Rule::default()
        },
        Rule {
            verbs: all(),
            non_resource_urls: all(),
            ..Rule::default()
        },
    ]
}

/// Upstream's `IsOnlyMutatingGCFields`: an update that changes nothing but
/// owner references, finalizers or managed fields grants nothing new.
fn only_gc_fields(old: Option<&Value>, new: &Value) -> bool {
    let Some(old) = old else {
        return false;
    };
    let mut copied = new.clone();
    if let Some(meta) = meta_mut(&mut copied) {
        for field in [
            "ownerReferences",
            "finalizers",
            "managedFields",
            "resourceVersion",
        ] {
            match old.pointer(&format!("/metadata/{field}")) {
                Some(value) => meta.insert(field.into(), value.clone()),
                None => meta.remove(field),
            };
        }
    }
    copied == *old
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{CLUSTER_ROLE_BINDINGS_KEY, CLUSTER_ROLES_KEY};
    use serde_json::json;

    fn setup() -> (Authorizer, State) {
        let mut state = State::new(100);
        state.put(
            CLUSTER_ROLES_KEY,
            json!({"metadata": {"name": "cm"}, "rules": [
                {"verbs": ["get", "create"], "apiGroups": [""], "resources": ["configmaps"]},
                {"verbs": ["create"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"]}]}),
        );
        state.put(
            CLUSTER_ROLE_BINDINGS_KEY,
            json!({"metadata": {"name": "bob"}, "roleRef": {"kind": "ClusterRole", "name": "cm"}, "subjects": [{"kind": "User", "name": "bob"}]}),
        );
        let authorizer = Authorizer::default();
        authorizer.refresh(&mut state);
        (authorizer, state)
    }

    #[test]
    fn a_role_may_grant_only_what_its_writer_holds() {
        let (authorizer, state) = setup();
        let bob = UserInfo {
            name: "bob".into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        };
        let write = Write {
            authorizer: &authorizer,
            user: &bob,
            resource: "roles",
            namespace: "ns",
            name: "",
        };
        let role = |verbs: Value| json!({"metadata": {"name": "r"}, "rules": [{"verbs": verbs, "apiGroups": [""], "resources": ["configmaps"]}]});
        assert!(check(&write, &state, None, &role(json!(["get"]))).is_ok());
        let refused = check(
            &write,
            &state,
            None,
            &role(json!(["get", "delete", "list"])),
        )
        .unwrap_err();
        assert_eq!(refused.code, 403);
        assert_eq!(
            refused.message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\" \"list\"]}"
        );
        let old = role(json!(["get", "delete"]));
        let mut relabelled = old.clone();
        relabelled["metadata"]["finalizers"] = json!(["x"]);
        assert!(
            check(&write, &state, Some(&old), &relabelled).is_ok(),
            "finalizers alone are not checked"
        );
    }
}
