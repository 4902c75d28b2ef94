//! The ClusterRoles and ClusterRoleBindings every cluster starts with,
//! after kube-apiserver's bootstrap policy: `cluster-admin`, the aggregated
//! `admin`, `edit` and `view` with the `system:aggregate-to-*` roles they
//! gather, `system:discovery`, `system:basic-user`,
//! `system:public-info-viewer`, and their bindings. Written once at start;
//! it must never replace an object that already exists.

use serde_json::{Value, json};

use super::rbac::GROUP;
use crate::cluster::Cluster;
use crate::object::{meta_mut, now};
use crate::store::{CLUSTER_ROLE_BINDINGS_KEY, CLUSTER_ROLES_KEY};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// Write the default roles and bindings into a new cluster.
pub(crate) fn seed(cluster: &Cluster) {
    cluster.write(|state| {
        let objects = cluster_roles()
            .into_iter()
            .map(|role| (CLUSTER_ROLES_KEY, role))
            .chain(
                bindings()
                    .into_iter()
                    .map(|b| (CLUSTER_ROLE_BINDINGS_KEY, b)),
            );
        for (key, mut object) in objects {
            let name = crate::object::meta_str(&object, "name").to_owned();
            if state.get(key, "", &name).is_some() {
                continue;
            }
            if let Some(meta) = meta_mut(&mut object) {
                meta.insert("uid".into(), json!(cluster.ids.uid()));
                meta.insert("creationTimestamp".into(), json!(now()));
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                labels["kubernetes.io/bootstrapping"] = json!("rbac-defaults");
                meta.insert(
                    "annotations".into(),
                    json!({"rbac.authorization.kubernetes.io/autoupdate": "true"}),
                );
            }
            state.put(key, object);
        }
    });
}

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources})
}

fn urls(urls: &[&str]) -> Value {
    json!({"verbs": ["get"], "nonResourceURLs": urls})
}

/// A ClusterRole, labelled to be gathered into `aggregate_to` if given.
fn role(name: &str, aggregate_to: Option<&str>, rules: Vec<Value>) -> Value {
    let mut role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    });
    if let Some(target) = aggregate_to {
        role["metadata"]["labels"] =
            json!({format!("rbac.authorization.k8s.io/aggregate-to-{target}"): "true"});
    }
    role
}

/// A role whose rules are those of the roles labelled `aggregate-to-<of>`
/// (filled in by the aggregation controller), itself gathered into `into`
/// (edit into admin, view into edit).
fn aggregated(name: &str, of: &str, into: Option<&str>) -> Value {
    let mut role = role(name, into, Vec::new());
    role["aggregationRule"] = json!({"clusterRoleSelectors": [
        {"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{of}"): "true"}}
    ]});
    role["rules"] = Value::Null;
    role
}

fn cluster_roles() -> Vec<Value> {
    vec![
        role(
            "cluster-admin",
            None,
            vec![
                json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
                json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
            ],
        ),
        role(
            "system:discovery",
            None,
            vec![urls(&[
                "/livez",
                "/readyz",
                "/healthz",
                "/version",
                "/version/",
                "/openapi",
                "/openapi/*",
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
            ])],
        ),
        role(
            "system:basic-user",
            None,
            vec![
                rule(
                    &["create"],
                    "authorization.k8s.io",
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    "authentication.k8s.io",
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        role(
            "system:public-info-viewer",
            None,
            vec![urls(&[
                "/livez",
                "/readyz",
                "/healthz",
                "/version",
                "/version/",
            ])],
        ),
        aggregated("admin", "admin", None),
        aggregated("edit", "edit", Some("admin")),
        aggregated("view", "view", Some("edit")),
        role("system:aggregate-to-admin", Some("admin"), admin_rules()),
        role("system:aggregate-to-edit", Some("edit"), edit_rules()),
        role("system:aggregate-to-view", Some("view"), view_rules()),
    ]
}

/// What an admin adds to edit in a namespace: roles and bindings, and
/// checking others' access.
fn admin_rules() -> Vec<Value> {
    vec![
        rule(
            &["create"],
            "authorization.k8s.io",
            &["localsubjectaccessreviews"],
        ),
        rule(READ_WRITE, GROUP, &["roles", "rolebindings"]),
    ]
}

/// Writing workloads, configuration and Secrets, but not RBAC, quotas or
/// status (upstream's `system:aggregate-to-edit`).
fn edit_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            "",
            &[
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
                "services/proxy",
            ],
        ),
        rule(&["impersonate"], "", &["serviceaccounts"]),
        rule(
            WRITE,
            "",
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        rule(&["create"], "", &["pods/eviction"]),
        rule(
            WRITE,
            "",
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
            ],
        ),
        rule(&["create"], "", &["serviceaccounts/token"]),
        rule(
            WRITE,
            "apps",
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ],
        ),
        rule(WRITE, "autoscaling", &["horizontalpodautoscalers"]),
        rule(WRITE, "batch", &["jobs", "cronjobs"]),
        rule(
            WRITE,
            "extensions",
            &[
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "ingresses",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        rule(WRITE, "policy", &["poddisruptionbudgets"]),
        rule(
            WRITE,
            "networking.k8s.io",
            &["networkpolicies", "ingresses"],
        ),
    ]
}

/// Reading everything in a namespace that does not escalate: no Secrets,
/// no RBAC (upstream's `system:aggregate-to-view`).
fn view_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            "",
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        rule(
            READ,
            "",
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
        ),
        rule(READ, "", &["namespaces"]),
        rule(READ, "discovery.k8s.io", &["endpointslices"]),
        rule(
            READ,
            "apps",
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
                "deployments/scale",
                "replicasets",
                "replicasets/status",
                "replicasets/scale",
            ],
        ),
        rule(
            READ,
            "autoscaling",
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
        ),
        rule(
            READ,
            "batch",
            &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
        ),
        rule(
            READ,
            "extensions",
            &[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale",
                "networkpolicies",
            ],
        ),
        rule(
            READ,
            "policy",
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            "networking.k8s.io",
            &["networkpolicies", "ingresses", "ingresses/status"],
        ),
    ]
}

fn bindings() -> Vec<Value> {
    [
        ("cluster-admin", &["system:masters"][..]),
        ("system:discovery", &["system:authenticated"]),
        ("system:basic-user", &["system:authenticated"]),
        (
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
    .into_iter()
    .map(|(role, groups)| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"kind": "Group", "apiGroup": GROUP, "name": g}))
            .collect();
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
            "subjects": subjects,
        })
    })
    .collect()
}
