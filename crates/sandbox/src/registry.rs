//! The kinds of resource a sandbox serves: the built-in ones and those that
//! custom resource definitions add. Pure data, no I/O.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::validation_rules::Rules;

/// One additional printer column of a CRD (see `table::lookup` for the JSONPath it takes).
#[derive(Debug, Clone)]
pub(crate) struct PrinterColumn {
    pub(crate) name: String,
    pub(crate) type_: String,
    pub(crate) format: String,
    pub(crate) description: String,
    pub(crate) priority: i64,
    pub(crate) json_path: String,
}

/// A servable resource at one group/version.
#[derive(Debug, Clone)]
pub(crate) struct ResourceType {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) singular: String,
    pub(crate) kind: String,
    pub(crate) namespaced: bool,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    pub(crate) has_status: bool,
    pub(crate) has_scale: bool,
    /// Where a custom resource's scale subresource reads and writes
    /// (`subresources.scale` of its CRD version); `None` for built-in kinds,
    /// whose Scale is `spec.replicas`, `status.replicas` and `spec.selector`.
    pub(crate) scale_paths: Option<ScalePaths>,
    /// The openAPIV3Schema of a custom resource's version, if any.
    pub(crate) schema: Option<Value>,
    /// The version's compiled `x-kubernetes-validations` rules, compiled
    /// when the CRD is stored (once per resourceVersion), never per request.
    pub(crate) rules: Arc<Rules>,
    pub(crate) printer_columns: Vec<PrinterColumn>,
    /// The verbs discovery lists; [`CREATE_ONLY`] kinds (the reviews) are
    /// answered at create and never stored.
    pub(crate) verbs: &'static [&'static str],
}

/// The JSON paths of a CRD's `subresources.scale`.
#[derive(Debug, Clone)]
pub(crate) struct ScalePaths {
    pub(crate) spec_replicas: String,
    pub(crate) status_replicas: String,
    pub(crate) label_selector: Option<String>,
}

impl ScalePaths {
    fn from_crd(scale: &Value) -> ScalePaths {
        let path = |field: &str| scale.get(field).and_then(Value::as_str).map(str::to_owned);
        ScalePaths {
            spec_replicas: path("specReplicasPath").unwrap_or_else(|| ".spec.replicas".into()),
            status_replicas: path("statusReplicasPath")
                .unwrap_or_else(|| ".status.replicas".into()),
            label_selector: path("labelSelectorPath"),
        }
    }
}

/// The verbs of a stored resource.
pub(crate) const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of a kind that is answered, never stored: the reviews of
/// authentication.k8s.io and authorization.k8s.io.
pub(crate) const CREATE_ONLY: &[&str] = &["create"];

impl ResourceType {
    fn builtin(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
        short: &[&str],
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.into(),
            namespaced,
            short_names: short.iter().map(|s| s.to_string()).collect(),
            categories: Vec::new(),
            has_status: false,
            has_scale: false,
            scale_paths: None,
            schema: None,
            rules: Arc::default(),
            printer_columns: Vec::new(),
            verbs: ALL_VERBS,
        }
    }

    /// Whether objects of this kind are answered at create, never stored.
    pub(crate) fn is_create_only(&self) -> bool {
        self.verbs == CREATE_ONLY
    }

    /// `v1` or `group/version`.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether it has the `token` subresource (`TokenRequest`): only
    /// ServiceAccounts do.
    pub(crate) fn has_token(&self) -> bool {
        self.group.is_empty() && self.plural == "serviceaccounts"
    }

    /// The storage key: objects of one resource share it across versions.
    pub(crate) fn key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }
}

/// Every served resource, by group, version and plural.
#[derive(Debug, Clone, Default)]
pub(crate) struct Registry {
    /// (group, version, plural) -> type.
    types: BTreeMap<(String, String, String), Arc<ResourceType>>,
}

impl Registry {
    /// The built-in resources every sandbox serves.
    pub(crate) fn with_builtins() -> Self {
        let mut registry = Self::default();
        let mut deployments =
            ResourceType::builtin("apps", "v1", "deployments", "Deployment", true, &["deploy"]);
        deployments.has_status = true;
        deployments.has_scale = true;
        deployments.categories = vec!["all".into()];
        let mut namespaces =
            ResourceType::builtin("", "v1", "namespaces", "Namespace", false, &["ns"]);
        namespaces.has_status = true;
        let mut services = ResourceType::builtin("", "v1", "services", "Service", true, &["svc"]);
        services.has_status = true;
        services.categories = vec!["all".into()];
        let mut crds = ResourceType::builtin(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
        );
        crds.has_status = true;
        let mut disruption_budgets = ResourceType::builtin(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
            &["pdb"],
        );
        disruption_budgets.has_status = true;
        let with_status = |mut rt: ResourceType, all: bool| {
            rt.has_status = true;
            if all {
                rt.categories = vec!["all".into()];
            }
            rt
        };
        let mut stateful_sets =
            ResourceType::builtin("apps", "v1", "statefulsets", "StatefulSet", true, &["sts"]);
        stateful_sets.has_scale = true;
        let rbac = "rbac.authorization.k8s.io";
        let review = |group: &str, plural: &str, kind: &str, namespaced: bool| {
            let mut rt = ResourceType::builtin(group, "v1", plural, kind, namespaced, &[]);
            rt.verbs = CREATE_ONLY;
            rt
        };
        let authz = "authorization.k8s.io";
        for rt in [
            namespaces,
            ResourceType::builtin("", "v1", "configmaps", "ConfigMap", true, &["cm"]),
            ResourceType::builtin("", "v1", "secrets", "Secret", true, &[]),
            ResourceType::builtin("", "v1", "serviceaccounts", "ServiceAccount", true, &["sa"]),
            services,
            ResourceType::builtin("", "v1", "events", "Event", true, &["ev"]),
            ResourceType::builtin("events.k8s.io", "v1", "events", "Event", true, &["ev"]),
            deployments,
            with_status(stateful_sets, true),
            with_status(
                ResourceType::builtin("", "v1", "pods", "Pod", true, &["po"]),
                true,
            ),
            with_status(
                ResourceType::builtin(
                    "",
                    "v1",
                    "persistentvolumeclaims",
                    "PersistentVolumeClaim",
                    true,
                    &["pvc"],
                ),
                false,
            ),
            ResourceType::builtin(
                "discovery.k8s.io",
                "v1",
                "endpointslices",
                "EndpointSlice",
                true,
                &[],
            ),
            with_status(
                ResourceType::builtin("batch", "v1", "jobs", "Job", true, &[]),
                true,
            ),
            with_status(
                ResourceType::builtin(
                    "autoscaling",
                    "v2",
                    "horizontalpodautoscalers",
                    "HorizontalPodAutoscaler",
                    true,
                    &["hpa"],
                ),
                true,
            ),
            ResourceType::builtin("coordination.k8s.io", "v1", "leases", "Lease", true, &[]),
            disruption_budgets,
            ResourceType::builtin(
                "networking.k8s.io",
                "v1",
                "networkpolicies",
                "NetworkPolicy",
                true,
                &["netpol"],
            ),
            crds,
            ResourceType::builtin(rbac, "v1", "roles", "Role", true, &[]),
            ResourceType::builtin(rbac, "v1", "rolebindings", "RoleBinding", true, &[]),
            ResourceType::builtin(rbac, "v1", "clusterroles", "ClusterRole", false, &[]),
            ResourceType::builtin(
                rbac,
                "v1",
                "clusterrolebindings",
                "ClusterRoleBinding",
                false,
                &[],
            ),
            review(
                "authentication.k8s.io",
                "selfsubjectreviews",
                "SelfSubjectReview",
                false,
            ),
            review(
                authz,
                "selfsubjectaccessreviews",
                "SelfSubjectAccessReview",
                false,
            ),
            review(
                authz,
                "selfsubjectrulesreviews",
                "SelfSubjectRulesReview",
                false,
            ),
            review(authz, "subjectaccessreviews", "SubjectAccessReview", false),
            review(
                authz,
                "localsubjectaccessreviews",
                "LocalSubjectAccessReview",
                true,
            ),
        ] {
            registry.insert(rt);
        }
        registry
    }

    fn insert(&mut self, rt: ResourceType) {
        let key = (rt.group.clone(), rt.version.clone(), rt.plural.clone());
        self.types.insert(key, Arc::new(rt));
    }

    pub(crate) fn get(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<ResourceType>> {
        self.types
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Every served type, in (group, version, plural) order.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.values()
    }

    /// Groups with their versions, in the order discovery lists them.
    pub(crate) fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (group, version, _) in self.types.keys() {
            let versions = groups.entry(group.clone()).or_default();
            if !versions.contains(version) {
                versions.push(version.clone());
            }
        }
        groups
    }

    /// Serve the versions a CRD object declares (replacing earlier ones).
    pub(crate) fn register_crd(&mut self, crd: &Value) {
        let Some(spec) = crd.get("spec") else { return };
        let group = str_at(spec, "group");
        let names = spec.get("names").cloned().unwrap_or(Value::Null);
        let plural = str_at(&names, "plural");
        if group.is_empty() || plural.is_empty() {
            return;
        }
        // The versions served until now, whose compiled rules may be reused.
        let previous: BTreeMap<String, Arc<ResourceType>> = self
            .types
            .iter()
            .filter(|((g, _, p), _)| *g == group && *p == plural)
            .map(|((_, v, _), rt)| (v.clone(), rt.clone()))
            .collect();
        self.unregister_crd(crd);
        let kind = str_at(&names, "kind");
        let singular = match str_at(&names, "singular") {
            s if s.is_empty() => kind.to_ascii_lowercase(),
            s => s,
        };
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let namespaced = str_at(spec, "scope") != "Cluster";
        for version in spec
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if version.get("served").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            let subresources = version.get("subresources");
            let name = str_at(version, "name");
            let schema = version.pointer("/schema/openAPIV3Schema").cloned();
            let rules = match (previous.get(&name), &schema) {
                // A CRD write that leaves the schema alone (a status or label
                // change) compiles nothing.
                (Some(served), Some(schema)) if served.schema.as_ref() == Some(schema) => {
                    served.rules.clone()
                }
                (_, Some(schema)) => Arc::new(Rules::compile(schema)),
                (_, None) => Arc::default(),
            };
            let printer_columns = version
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .map(|cols| cols.iter().map(printer_column).collect())
                .unwrap_or_default();
            self.insert(ResourceType {
                group: group.clone(),
                version: name,
                plural: plural.clone(),
                singular: singular.clone(),
                kind: kind.clone(),
                namespaced,
                short_names: strings(names.get("shortNames")),
                categories: strings(names.get("categories")),
                has_status: subresources.and_then(|s| s.get("status")).is_some(),
                has_scale: subresources.and_then(|s| s.get("scale")).is_some(),
                scale_paths: subresources
                    .and_then(|s| s.get("scale"))
                    .map(ScalePaths::from_crd),
                schema,
                rules,
                printer_columns,
                verbs: ALL_VERBS,
            });
        }
    }

    /// Stop serving the resources of a CRD object.
    pub(crate) fn unregister_crd(&mut self, crd: &Value) {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let plural = crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.types
            .retain(|(g, _, p), _| !(g == group && p == plural));
    }

    /// Whether a CRD's names clash with something already served.
    pub(crate) fn serves(&self, group: &str, plural: &str) -> bool {
        self.types.keys().any(|(g, _, p)| g == group && p == plural)
    }
}

fn str_at(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn printer_column(col: &Value) -> PrinterColumn {
    PrinterColumn {
        name: str_at(col, "name"),
        type_: str_at(col, "type"),
        format: str_at(col, "format"),
        description: str_at(col, "description"),
        priority: col.get("priority").and_then(Value::as_i64).unwrap_or(0),
        json_path: str_at(col, "jsonPath"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(rule: &str, status: Value) -> Value {
        json!({"metadata": {"name": "gadgets.test.ferry.dev"}, "spec": {"group": "test.ferry.dev",
            "names": {"plural": "gadgets", "kind": "Gadget"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-validations": [{"rule": rule}]}}}]},
            "status": status})
    }

    #[test]
    fn rules_are_compiled_again_only_when_the_schema_changes() {
        let mut registry = Registry::with_builtins();
        registry.register_crd(&crd("true", json!({})));
        let first = registry
            .get("test.ferry.dev", "v1", "gadgets")
            .expect("served");
        assert!(!first.rules.is_empty());
        registry.register_crd(&crd("true", json!({"acceptedNames": {"kind": "Gadget"}})));
        let same = registry
            .get("test.ferry.dev", "v1", "gadgets")
            .expect("served");
        assert!(
            Arc::ptr_eq(&first.rules, &same.rules),
            "a status write compiles nothing"
        );
        registry.register_crd(&crd("1 == 1", json!({})));
        let changed = registry
            .get("test.ferry.dev", "v1", "gadgets")
            .expect("served");
        assert!(
            !Arc::ptr_eq(&first.rules, &changed.rules),
            "a new schema is compiled"
        );
    }
}
