//! RBAC as kube-apiserver enforces it, driven by the real `kube::Client`,
//! raw HTTP and kubectl. Other users are reached by impersonation from the
//! admin (who is in `system:masters`), as `kubectl --as` does.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use common::{Cluster, raw};

// ---- helpers -------------------------------------------------------------

/// A client that acts as `user` (with `groups`, or just
/// `system:authenticated` when none are given) through impersonation.
async fn client_as(cluster: &Cluster, user: &str, groups: &[&str]) -> Client {
    let mut kubeconfig = Kubeconfig::read_from(cluster.kubeconfig_path()).unwrap();
    for named in &mut kubeconfig.auth_infos {
        if let Some(info) = named.auth_info.as_mut() {
            info.impersonate = Some(user.to_owned());
            if !groups.is_empty() {
                info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
            }
        }
    }
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn object<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

async fn namespace(cluster: &Cluster, name: &str) {
    let api: Api<Namespace> = Api::all(cluster.client.clone());
    api.create(
        &PostParams::default(),
        &object(json!({"metadata": {"name": name}})),
    )
    .await
    .unwrap();
}

async fn role(cluster: &Cluster, ns: &str, name: &str, rules: Value) {
    let api: Api<Role> = Api::namespaced(cluster.client.clone(), ns);
    api.create(
        &PostParams::default(),
        &object(json!({"metadata": {"name": name}, "rules": rules})),
    )
    .await
    .unwrap();
}

async fn cluster_role(cluster: &Cluster, name: &str, labels: Value, rules: Value) {
    let api: Api<ClusterRole> = Api::all(cluster.client.clone());
    api.create(
        &PostParams::default(),
        &object(json!({"metadata": {"name": name, "labels": labels}, "rules": rules})),
    )
    .await
    .unwrap();
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name})
}

/// Bind `role` ("Role/x" or "ClusterRole/x") to `subjects` in `ns`.
async fn bind(cluster: &Cluster, ns: &str, name: &str, role: &str, subjects: Value) {
    let (kind, role_name) = role.split_once('/').unwrap();
    let api: Api<RoleBinding> = Api::namespaced(cluster.client.clone(), ns);
    let binding = json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name}, "subjects": subjects});
    api.create(&PostParams::default(), &object(binding))
        .await
        .unwrap();
}

async fn cluster_bind(cluster: &Cluster, name: &str, role: &str, subjects: Value) {
    let api: Api<ClusterRoleBinding> = Api::all(cluster.client.clone());
    let binding = json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}, "subjects": subjects});
    api.create(&PostParams::default(), &object(binding))
        .await
        .unwrap();
}

fn config_map(name: &str) -> ConfigMap {
    object(json!({"metadata": {"name": name}, "data": {"k": "v"}}))
}

async fn seed_config_maps(cluster: &Cluster, ns: &str, names: &[&str]) {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), ns);
    for name in names {
        api.create(&PostParams::default(), &config_map(name))
            .await
            .unwrap();
    }
}

fn forbidden_message<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> String {
    let status = common::status(result);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (403, "Forbidden"),
        "{status:?}"
    );
    status.message
}

/// kubectl's stdout (with its stderr after it, for failure messages) and
/// whether it succeeded.
fn kubectl(kubeconfig: &Path, args: &[&str]) -> (String, String, bool) {
    let kubectl = common::kubectl();
    let output = Command::new(&kubectl)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} ({e})", kubectl.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (stdout, stderr, output.status.success())
}

// ---- evaluation ----------------------------------------------------------

#[tokio::test]
async fn a_user_may_use_only_the_verbs_a_role_grants() {
    let cluster = common::start("rbac-verbs").await;
    namespace(&cluster, "team").await;
    seed_config_maps(&cluster, "team", &["settings"]).await;
    role(
        &cluster,
        "team",
        "reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "read",
        "Role/reader",
        json!([user("bob")]),
    )
    .await;

    let bob: Api<ConfigMap> = Api::namespaced(client_as(&cluster, "bob", &[]).await, "team");
    assert_eq!(bob.get("settings").await.unwrap().data.unwrap()["k"], "v");
    assert_eq!(
        bob.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    assert_eq!(
        forbidden_message(bob.create(&PostParams::default(), &config_map("new")).await),
        "configmaps is forbidden: User \"bob\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    assert_eq!(
        forbidden_message(bob.delete("settings", &Default::default()).await),
        "configmaps \"settings\" is forbidden: User \"bob\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    let patch = Patch::Merge(json!({"data": {"k": "w"}}));
    forbidden_message(bob.patch("settings", &PatchParams::default(), &patch).await);

    // A user the binding does not name gets nothing; a group it names does.
    let carol: Api<ConfigMap> =
        Api::namespaced(client_as(&cluster, "carol", &["readers"]).await, "team");
    forbidden_message(carol.get("settings").await);
    bind(
        &cluster,
        "team",
        "read-group",
        "Role/reader",
        json!([{"kind": "Group", "name": "readers"}]),
    )
    .await;
    assert!(carol.get("settings").await.is_ok());

    // Revoking takes effect on the next request.
    let bindings: Api<RoleBinding> = Api::namespaced(cluster.client.clone(), "team");
    bindings.delete("read", &Default::default()).await.unwrap();
    forbidden_message(bob.get("settings").await);
    cluster.stop().await;
}

#[tokio::test]
async fn a_refusal_is_the_403_status_kube_apiserver_answers() {
    let cluster = common::start("rbac-403").await;
    namespace(&cluster, "ns").await;
    let sa = client_as(&cluster, "system:serviceaccount:ns:sa", &[]).await;
    let (code, body) = raw(
        &sa,
        "POST",
        "/api/v1/namespaces/ns/configmaps",
        Some(json!({"metadata": {"name": "x"}})),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps is forbidden: User \"system:serviceaccount:ns:sa\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"ns\"",
            "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403
        })
    );
    let (code, body) = raw(
        &sa,
        "GET",
        "/apis/apps/v1/namespaces/ns/deployments/web/scale",
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot get resource \"deployments/scale\" in API group \"apps\" in the namespace \"ns\""
    );
    assert_eq!(
        body["details"],
        json!({"name": "web", "group": "apps", "kind": "deployments"})
    );
    let (_, body) = raw(
        &sa,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        None,
    )
    .await;
    assert_eq!(
        body["message"],
        "clusterroles.rbac.authorization.k8s.io is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
    );
    // A Namespace lies in itself.
    let (_, body) = raw(&sa, "GET", "/api/v1/namespaces/ns", None).await;
    assert_eq!(
        body["message"],
        "namespaces \"ns\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"ns\""
    );
    // Non-resource URLs: discovery is for authenticated users only.
    let stranger = client_as(&cluster, "bob", &["system:unauthenticated"]).await;
    let (code, body) = raw(&stranger, "GET", "/apis", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "forbidden: User \"bob\" cannot get path \"/apis\""
    );
    assert_eq!(body["details"], json!({}));
    let (code, _) = raw(&sa, "GET", "/apis", None).await;
    assert_eq!(
        code, 200,
        "system:discovery is bound to system:authenticated"
    );
    let (code, body) = raw(&sa, "GET", "/metrics", None).await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            403,
            Some("forbidden: User \"system:serviceaccount:ns:sa\" cannot get path \"/metrics\"")
        )
    );
    // A binding to a missing role is the reason.
    bind(
        &cluster,
        "ns",
        "dangling",
        "ClusterRole/nowhere",
        json!([{"kind": "ServiceAccount", "name": "sa"}]),
    )
    .await;
    let (_, body) = raw(&sa, "GET", "/api/v1/namespaces/ns/secrets", None).await;
    assert_eq!(
        body["message"],
        "secrets is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"secrets\" in API group \"\" in the namespace \"ns\": RBAC: clusterrole.rbac.authorization.k8s.io \"nowhere\" not found"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn resource_names_limit_a_rule_to_the_named_objects() {
    let cluster = common::start("rbac-names").await;
    namespace(&cluster, "team").await;
    seed_config_maps(&cluster, "team", &["allowed", "other"]).await;
    role(&cluster, "team", "one", json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["allowed"], "verbs": ["get", "list", "watch", "update", "patch"]}])).await;
    bind(&cluster, "team", "one", "Role/one", json!([user("bob")])).await;
    let bob: Api<ConfigMap> = Api::namespaced(client_as(&cluster, "bob", &[]).await, "team");
    assert!(bob.get("allowed").await.is_ok());
    let patch = Patch::Merge(json!({"data": {"k": "w"}}));
    assert!(
        bob.patch("allowed", &PatchParams::default(), &patch)
            .await
            .is_ok()
    );
    assert_eq!(
        forbidden_message(bob.get("other").await),
        "configmaps \"other\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    // A plain list names no object, so resourceNames do not allow it...
    forbidden_message(bob.list(&ListParams::default()).await);
    // ...but a list or watch of exactly one name is authorized as that name.
    let one = bob
        .list(&ListParams::default().fields("metadata.name=allowed"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    forbidden_message(
        bob.list(&ListParams::default().fields("metadata.name=other"))
            .await,
    );
    let mut events = bob
        .watch(
            &WatchParams::default()
                .fields("metadata.name=allowed")
                .timeout(5),
            "0",
        )
        .await
        .unwrap()
        .boxed();
    match events.next().await {
        Some(Ok(WatchEvent::Added(cm))) => assert_eq!(cm.metadata.name.as_deref(), Some("allowed")),
        other => panic!("expected the named object, got {other:?}"),
    }
    cluster.stop().await;
}

#[tokio::test]
async fn subresources_need_rules_of_their_own() {
    let cluster = common::start("rbac-sub").await;
    namespace(&cluster, "team").await;
    let deployments: Api<Deployment> = Api::namespaced(cluster.client.clone(), "team");
    let web = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    deployments
        .create(&PostParams::default(), &object(web))
        .await
        .unwrap();
    role(
        &cluster,
        "team",
        "deploy",
        json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "update"]}]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "deploy",
        "Role/deploy",
        json!([user("bob")]),
    )
    .await;
    let bob: Api<Deployment> = Api::namespaced(client_as(&cluster, "bob", &[]).await, "team");
    assert!(bob.get("web").await.is_ok());
    assert_eq!(
        forbidden_message(bob.get_scale("web").await),
        "deployments.apps \"web\" is forbidden: User \"bob\" cannot get resource \"deployments/scale\" in API group \"apps\" in the namespace \"team\""
    );
    forbidden_message(bob.get_status("web").await);
    role(
        &cluster,
        "team",
        "scaler",
        json!([
            {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "patch"]},
            {"apiGroups": ["apps"], "resources": ["*/status"], "verbs": ["get"]}
        ]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "scaler",
        "Role/scaler",
        json!([user("bob")]),
    )
    .await;
    assert_eq!(
        bob.get_scale("web").await.unwrap().spec.unwrap().replicas,
        Some(1)
    );
    let scale = Patch::Merge(json!({"spec": {"replicas": 3}}));
    assert!(
        bob.patch_scale("web", &PatchParams::default(), &scale)
            .await
            .is_ok()
    );
    assert!(
        bob.get_status("web").await.is_ok(),
        "*/status matches every status subresource"
    );
    forbidden_message(
        bob.patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {}})),
        )
        .await,
    );
    cluster.stop().await;
}

#[tokio::test]
async fn a_role_binding_to_a_cluster_role_grants_only_in_its_namespace() {
    let cluster = common::start("rbac-scope").await;
    for ns in ["a", "b"] {
        namespace(&cluster, ns).await;
        seed_config_maps(&cluster, ns, &["settings"]).await;
    }
    cluster_role(&cluster, "cm-reader", json!({}), json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}])).await;
    bind(
        &cluster,
        "a",
        "read",
        "ClusterRole/cm-reader",
        json!([user("bob")]),
    )
    .await;
    let bob = client_as(&cluster, "bob", &[]).await;
    let in_a: Api<ConfigMap> = Api::namespaced(bob.clone(), "a");
    let in_b: Api<ConfigMap> = Api::namespaced(bob.clone(), "b");
    let everywhere: Api<ConfigMap> = Api::all(bob.clone());
    assert!(in_a.get("settings").await.is_ok());
    forbidden_message(in_b.get("settings").await);
    assert_eq!(
        forbidden_message(everywhere.list(&ListParams::default()).await),
        "configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope"
    );
    cluster_bind(&cluster, "read-all", "cm-reader", json!([user("bob")])).await;
    assert_eq!(
        everywhere
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    assert!(in_b.get("settings").await.is_ok());
    cluster.stop().await;
}

#[tokio::test]
async fn lists_and_watches_need_their_verbs_where_they_look() {
    let cluster = common::start("rbac-watch").await;
    namespace(&cluster, "team").await;
    seed_config_maps(&cluster, "team", &["settings"]).await;
    role(
        &cluster,
        "team",
        "getter",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "getter",
        "Role/getter",
        json!([user("bob")]),
    )
    .await;
    let bob = client_as(&cluster, "bob", &[]).await;
    let api: Api<ConfigMap> = Api::namespaced(bob.clone(), "team");
    forbidden_message(api.list(&ListParams::default()).await);
    let (code, body) = raw(
        &bob,
        "GET",
        "/api/v1/namespaces/team/configmaps?watch=1&timeoutSeconds=1",
        None,
    )
    .await;
    assert_eq!(code, 403, "a watch is refused before it streams");
    assert_eq!(
        body["message"],
        "configmaps is forbidden: User \"bob\" cannot watch resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );
    let (code, _) = raw(
        &bob,
        "GET",
        "/api/v1/watch/namespaces/team/configmaps?timeoutSeconds=1",
        None,
    )
    .await;
    assert_eq!(code, 403, "the /watch/ path is the same verb");

    role(
        &cluster,
        "team",
        "lister",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "lister",
        "Role/lister",
        json!([user("bob")]),
    )
    .await;
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let mut events = api
        .watch(&WatchParams::default().timeout(5), "0")
        .await
        .unwrap()
        .boxed();
    assert!(matches!(
        events.next().await,
        Some(Ok(WatchEvent::Added(_)))
    ));
    // The namespace grant gives no cluster-wide watch.
    let (code, body) = raw(
        &bob,
        "GET",
        "/api/v1/configmaps?watch=1&timeoutSeconds=1",
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .ends_with("at the cluster scope"),
        "{body}"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn a_server_side_apply_that_creates_needs_create_too() {
    let cluster = common::start("rbac-apply").await;
    namespace(&cluster, "team").await;
    seed_config_maps(&cluster, "team", &["exists"]).await;
    role(
        &cluster,
        "team",
        "patcher",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]}]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "patcher",
        "Role/patcher",
        json!([user("bob")]),
    )
    .await;
    let bob: Api<ConfigMap> = Api::namespaced(client_as(&cluster, "bob", &[]).await, "team");
    let apply = |name: &str| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "applied"}}),
        )
    };
    let params = PatchParams::apply("bob").force();
    assert!(bob.patch("exists", &params, &apply("exists")).await.is_ok());
    assert_eq!(
        forbidden_message(bob.patch("fresh", &params, &apply("fresh")).await),
        "configmaps \"fresh\" is forbidden: "
    );
    cluster.stop().await;
}

// ---- roles, aggregation and defaults --------------------------------------

#[tokio::test]
async fn the_default_roles_grant_what_upstreams_do() {
    let cluster = common::start("rbac-defaults").await;
    namespace(&cluster, "team").await;
    seed_config_maps(&cluster, "team", &["settings"]).await;
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), "team");
    secrets
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "token"}, "stringData": {"k": "v"}})),
        )
        .await
        .unwrap();
    bind(
        &cluster,
        "team",
        "viewers",
        "ClusterRole/view",
        json!([user("viewer")]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "editors",
        "ClusterRole/edit",
        json!([user("editor")]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "admins",
        "ClusterRole/admin",
        json!([user("owner")]),
    )
    .await;

    let viewer = client_as(&cluster, "viewer", &[]).await;
    assert!(
        Api::<ConfigMap>::namespaced(viewer.clone(), "team")
            .get("settings")
            .await
            .is_ok()
    );
    assert_eq!(
        forbidden_message(
            Api::<Secret>::namespaced(viewer.clone(), "team")
                .get("token")
                .await
        ),
        "secrets \"token\" is forbidden: User \"viewer\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team\""
    );
    forbidden_message(
        Api::<ConfigMap>::namespaced(viewer.clone(), "team")
            .create(&PostParams::default(), &config_map("x"))
            .await,
    );

    let editor = client_as(&cluster, "editor", &[]).await;
    let deployment = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    Api::<Deployment>::namespaced(editor.clone(), "team")
        .create(&PostParams::default(), &object(deployment))
        .await
        .unwrap();
    assert!(
        Api::<Secret>::namespaced(editor.clone(), "team")
            .get("token")
            .await
            .is_ok()
    );
    let reader_role = json!({"metadata": {"name": "reader"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
    forbidden_message(
        Api::<Role>::namespaced(editor.clone(), "team")
            .create(&PostParams::default(), &object(reader_role.clone()))
            .await,
    );

    let owner = client_as(&cluster, "owner", &[]).await;
    Api::<Role>::namespaced(owner.clone(), "team")
        .create(&PostParams::default(), &object(reader_role))
        .await
        .unwrap();
    forbidden_message(
        Api::<ConfigMap>::all(owner)
            .list(&ListParams::default())
            .await,
    );

    // The defaults are stored objects, aggregated and labelled as upstream's.
    let roles: Api<ClusterRole> = Api::all(cluster.client.clone());
    let view = roles.get("view").await.unwrap();
    let view_rules = serde_json::to_value(view.rules.unwrap()).unwrap();
    assert!(view_rules.as_array().unwrap().iter().any(|r| {
        r["resources"]
            .as_array()
            .unwrap()
            .contains(&json!("configmaps"))
    }));
    assert!(!view_rules.to_string().contains("\"secrets\""));
    let names: Vec<String> = roles
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    for expected in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(cluster.client.clone());
    let admin = bindings.get("cluster-admin").await.unwrap();
    assert_eq!(admin.subjects.unwrap()[0].name, "system:masters");
    cluster.stop().await;
}

#[tokio::test]
async fn a_labelled_cluster_role_extends_the_aggregated_view() {
    let cluster = common::start("rbac-aggregate").await;
    namespace(&cluster, "team").await;
    bind(
        &cluster,
        "team",
        "viewers",
        "ClusterRole/view",
        json!([user("viewer")]),
    )
    .await;
    let viewer = client_as(&cluster, "viewer", &[]).await;
    let leases = "/apis/coordination.k8s.io/v1/namespaces/team/leases";
    assert_eq!(raw(&viewer, "GET", leases, None).await.0, 403);

    cluster_role(
        &cluster,
        "lease-viewer",
        json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"}),
        json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]}]),
    )
    .await;
    assert_eq!(
        raw(&viewer, "GET", leases, None).await.0,
        200,
        "view gathered the new rule at once"
    );
    let roles: Api<ClusterRole> = Api::all(cluster.client.clone());
    for aggregated in ["view", "edit", "admin"] {
        let rules = serde_json::to_string(&roles.get(aggregated).await.unwrap().rules).unwrap();
        assert!(
            rules.contains("leases"),
            "{aggregated} includes view's new rule: {rules}"
        );
    }
    // Taking the label away takes the rule away.
    roles
        .patch(
            "lease-viewer",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": null}})),
        )
        .await
        .unwrap();
    assert_eq!(raw(&viewer, "GET", leases, None).await.0, 403);
    assert!(
        !serde_json::to_string(&roles.get("view").await.unwrap().rules)
            .unwrap()
            .contains("leases")
    );
    cluster.stop().await;
}

#[tokio::test]
async fn rbac_objects_are_validated_as_upstream_validates_them() {
    let cluster = common::start("rbac-validate").await;
    namespace(&cluster, "team").await;
    let roles: Api<Role> = Api::namespaced(cluster.client.clone(), "team");
    let bad = json!({"metadata": {"name": "bad"}, "rules": [{"verbs": [], "apiGroups": [""], "resources": ["pods"]}]});
    let status = common::status(roles.create(&PostParams::default(), &object(bad)).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "Role.rbac.authorization.k8s.io \"bad\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"
    );
    // Names are path segments: a colon is fine.
    role(
        &cluster,
        "team",
        "ferry:operator",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "ops",
        "Role/ferry:operator",
        json!([user("bob")]),
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(cluster.client.clone(), "team");
    let stored = bindings.get("ops").await.unwrap();
    let mut changed = stored.clone();
    changed.role_ref.name = "other".into();
    let status = common::status(
        bindings
            .replace("ops", &PostParams::default(), &changed)
            .await,
    );
    assert_eq!(status.code, 422);
    assert!(
        status.message.ends_with("cannot change roleRef"),
        "{}",
        status.message
    );
    cluster.stop().await;
}

// ---- escalation ------------------------------------------------------------

#[tokio::test]
async fn granting_more_than_one_holds_needs_escalate_or_bind() {
    let cluster = common::start("rbac-escalate").await;
    namespace(&cluster, "team").await;
    // bob administers the namespace: he may write roles and bindings there.
    bind(
        &cluster,
        "team",
        "owner",
        "ClusterRole/admin",
        json!([user("bob")]),
    )
    .await;
    let bob = client_as(&cluster, "bob", &[]).await;
    let roles: Api<Role> = Api::namespaced(bob.clone(), "team");
    let bindings: Api<RoleBinding> = Api::namespaced(bob.clone(), "team");

    let within = json!({"metadata": {"name": "cm"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]});
    roles
        .create(&PostParams::default(), &object(within))
        .await
        .unwrap();
    let beyond = json!({"metadata": {"name": "nodes"}, "rules": [{"apiGroups": [""], "resources": ["nodes", "configmaps"], "verbs": ["get", "list"]}]});
    assert_eq!(
        forbidden_message(
            roles
                .create(&PostParams::default(), &object(beyond.clone()))
                .await
        ),
        "roles.rbac.authorization.k8s.io \"nodes\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\" \"list\"]}"
    );
    let to_admin = |name: &str| {
        object::<RoleBinding>(
            json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}, "subjects": [user("carol")]}),
        )
    };
    let refused = forbidden_message(
        bindings
            .create(&PostParams::default(), &to_admin("root"))
            .await,
    );
    assert!(
        refused.starts_with("rolebindings.rbac.authorization.k8s.io \"root\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n"),
        "{refused}"
    );
    // Binding a role bob holds entirely is fine; so is binding view.
    let to_view = json!({"metadata": {"name": "viewers"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}, "subjects": [user("carol")]});
    bindings
        .create(&PostParams::default(), &object(to_view))
        .await
        .unwrap();
    // Editing a role to grant more is refused too.
    let widen = Patch::Merge(
        json!({"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}),
    );
    forbidden_message(roles.patch("cm", &PatchParams::default(), &widen).await);

    // With `escalate` on roles, and `bind` on cluster-admin, both pass.
    cluster_role(&cluster, "escalator", json!({}), json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"]}
    ])).await;
    bind(
        &cluster,
        "team",
        "escalator",
        "ClusterRole/escalator",
        json!([user("bob")]),
    )
    .await;
    roles
        .create(&PostParams::default(), &object(beyond))
        .await
        .unwrap();
    bindings
        .create(&PostParams::default(), &to_admin("root"))
        .await
        .unwrap();
    // `bind` names cluster-admin only: another role bob does not hold stays refused.
    cluster_role(
        &cluster,
        "node-reader",
        json!({}),
        json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]),
    )
    .await;
    let other = json!({"metadata": {"name": "nodes"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "node-reader"}, "subjects": [user("carol")]});
    forbidden_message(
        bindings
            .create(&PostParams::default(), &object(other))
            .await,
    );
    cluster.stop().await;
}

#[tokio::test]
async fn an_aggregation_rule_needs_every_permission() {
    let cluster = common::start("rbac-agg-escalate").await;
    cluster_role(&cluster, "rbac-writer", json!({}), json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create"]}])).await;
    cluster_bind(&cluster, "rbac-writer", "rbac-writer", json!([user("bob")])).await;
    let bob: Api<ClusterRole> = Api::all(client_as(&cluster, "bob", &[]).await);
    let aggregating = json!({"metadata": {"name": "sneaky"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});
    assert_eq!(
        forbidden_message(
            bob.create(&PostParams::default(), &object(aggregating))
                .await
        ),
        "clusterroles.rbac.authorization.k8s.io \"sneaky\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );
    cluster.stop().await;
}

// ---- reviews and kubectl ------------------------------------------------------

#[tokio::test]
async fn access_reviews_answer_can_i() {
    let cluster = common::start("rbac-review").await;
    namespace(&cluster, "team").await;
    role(
        &cluster,
        "team",
        "reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
    )
    .await;
    bind(
        &cluster,
        "team",
        "read",
        "Role/reader",
        json!([user("bob")]),
    )
    .await;
    let bob = client_as(&cluster, "bob", &[]).await;
    let ask = |verb: &str| {
        object::<SelfSubjectAccessReview>(
            json!({"spec": {"resourceAttributes": {"namespace": "team", "verb": verb, "resource": "configmaps"}}}),
        )
    };
    let reviews: Api<SelfSubjectAccessReview> = Api::all(bob.clone());
    let yes = reviews
        .create(&PostParams::default(), &ask("list"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(yes.allowed);
    assert_eq!(
        yes.reason.as_deref(),
        Some("RBAC: allowed by RoleBinding \"read/team\" of Role \"reader\" to User \"bob\"")
    );
    let no = reviews
        .create(&PostParams::default(), &ask("delete"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(!no.allowed);
    assert_eq!(no.reason, None);

    // A non-resource question.
    let discovery = object::<SelfSubjectAccessReview>(
        json!({"spec": {"nonResourceAttributes": {"path": "/apis", "verb": "get"}}}),
    );
    assert!(
        reviews
            .create(&PostParams::default(), &discovery)
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    );
    // Neither or both attributes: 422.
    let status = common::status(
        reviews
            .create(&PostParams::default(), &object(json!({"spec": {}})))
            .await,
    );
    assert_eq!(status.code, 422);
    assert!(
        status.message.ends_with(
            "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        ),
        "{}",
        status.message
    );

    // About someone else: bob may not ask; the admin may.
    let about_bob = json!({"spec": {"user": "bob", "resourceAttributes": {"namespace": "team", "verb": "get", "resource": "configmaps"}}});
    forbidden_message(
        Api::<SubjectAccessReview>::all(bob.clone())
            .create(&PostParams::default(), &object(about_bob.clone()))
            .await,
    );
    let answer = Api::<SubjectAccessReview>::all(cluster.client.clone())
        .create(&PostParams::default(), &object(about_bob.clone()))
        .await
        .unwrap();
    assert!(answer.status.unwrap().allowed);
    let local = Api::<LocalSubjectAccessReview>::namespaced(cluster.client.clone(), "team");
    assert!(
        local
            .create(&PostParams::default(), &object(about_bob))
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    );
    let elsewhere = json!({"spec": {"user": "bob", "resourceAttributes": {"namespace": "other", "verb": "get", "resource": "configmaps"}}});
    assert_eq!(
        common::status(
            local
                .create(&PostParams::default(), &object(elsewhere))
                .await
        )
        .code,
        422
    );

    // Reviews are answered, never stored.
    let (code, _) = raw(
        &cluster.client,
        "GET",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        None,
    )
    .await;
    assert_eq!(code, 405);
    cluster.stop().await;
}

#[tokio::test]
async fn a_rules_review_lists_what_a_user_may_do_in_a_namespace() {
    let cluster = common::start("rbac-rules").await;
    namespace(&cluster, "team").await;
    role(&cluster, "team", "reader", json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["get"]}])).await;
    bind(
        &cluster,
        "team",
        "read",
        "Role/reader",
        json!([user("bob")]),
    )
    .await;
    let reviews: Api<SelfSubjectRulesReview> = Api::all(client_as(&cluster, "bob", &[]).await);
    let review = reviews
        .create(
            &PostParams::default(),
            &object(json!({"spec": {"namespace": "team"}})),
        )
        .await
        .unwrap();
    let status = serde_json::to_value(review.status.unwrap()).unwrap();
    let resource_rules = status["resourceRules"].as_array().unwrap();
    assert!(resource_rules.contains(&json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"]})), "{status}");
    assert!(resource_rules.contains(&json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})));
    assert!(
        status["nonResourceRules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["nonResourceURLs"]
                .as_array()
                .unwrap()
                .contains(&json!("/apis/*")))
    );
    assert_eq!(status["incomplete"], false);
    let elsewhere = reviews
        .create(
            &PostParams::default(),
            &object(json!({"spec": {"namespace": "other"}})),
        )
        .await
        .unwrap();
    assert!(
        !serde_json::to_string(&elsewhere.status)
            .unwrap()
            .contains("configmaps")
    );
    let status = common::status(
        reviews
            .create(&PostParams::default(), &object(json!({"spec": {}})))
            .await,
    );
    assert_eq!(
        (status.code, status.message.as_str()),
        (400, "no namespace on request")
    );
    cluster.stop().await;
}

// kubectl blocks its thread; the sandbox serves from another. kubectl sends
// the reviews as protobuf.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_answers_for_impersonated_users() {
    let cluster = common::start("rbac-kubectl").await;
    namespace(&cluster, "team").await;
    cluster_role(&cluster, "deployer", json!({}), json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "get", "list"]}])).await;
    bind(
        &cluster,
        "team",
        "deploy",
        "ClusterRole/deployer",
        json!([user("bob")]),
    )
    .await;
    let kubeconfig = cluster.kubeconfig_path();
    let can_i = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        kubectl(&kubeconfig, &all)
    };
    let (out, err, ok) = can_i(&["create", "deployments", "-n", "team", "--as", "bob"]);
    assert!(ok && out.trim() == "yes", "{out}{err}");
    let (out, err, ok) = can_i(&["delete", "deployments", "-n", "team", "--as", "bob"]);
    assert!(!ok && out.trim() == "no", "{out}{err}");
    let (out, err, ok) = can_i(&["create", "deployments", "-n", "default", "--as", "bob"]);
    assert!(!ok && out.trim() == "no", "{out}{err}");
    let (out, err, ok) = can_i(&[
        "get",
        "secrets",
        "-n",
        "team",
        "--as",
        "bob",
        "--as-group",
        "system:masters",
    ]);
    assert!(ok && out.trim() == "yes", "{out}{err}");
    let (out, err, ok) = can_i(&["--list", "-n", "team", "--as", "bob"]);
    assert!(ok, "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("deployments.apps"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("[create get list]"), "{line}");
    cluster.stop().await;
}

// ---- impersonation and switching RBAC off ------------------------------------------

#[tokio::test]
async fn impersonation_switches_the_user_and_its_groups() {
    let cluster = common::start("rbac-impersonate").await;
    namespace(&cluster, "ns").await;
    bind(
        &cluster,
        "ns",
        "sa-view",
        "ClusterRole/view",
        json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]),
    )
    .await;
    bind(
        &cluster,
        "ns",
        "group-edit",
        "ClusterRole/edit",
        json!([{"kind": "Group", "name": "system:serviceaccounts:ns"}]),
    )
    .await;
    let sa = client_as(&cluster, "system:serviceaccount:ns:sa", &[]).await;
    let rules: Api<SelfSubjectRulesReview> = Api::all(sa.clone());
    let review = rules
        .create(
            &PostParams::default(),
            &object(json!({"spec": {"namespace": "ns"}})),
        )
        .await
        .unwrap();
    let text = serde_json::to_string(&review.status).unwrap();
    assert!(
        text.contains("\"secrets\""),
        "the ServiceAccount's namespace group brings edit: {text}"
    );
    assert!(
        Api::<Secret>::namespaced(sa, "ns")
            .list(&ListParams::default())
            .await
            .is_ok()
    );
    // Given groups replace the ServiceAccount's own.
    let narrowed = client_as(&cluster, "system:serviceaccount:ns:sa", &["team"]).await;
    forbidden_message(
        Api::<Secret>::namespaced(narrowed, "ns")
            .list(&ListParams::default())
            .await,
    );
    // A group without a user is a server error, as upstream answers it.
    let (code, body) = raw_with(
        &cluster.client,
        "/api/v1/namespaces",
        &[("Impersonate-Group", "x")],
    )
    .await;
    assert_eq!(code, 500);
    assert_eq!(
        body["message"],
        "Internal error occurred: requested [{Group  x    }] without impersonating a user"
    );
    cluster.stop().await;
}

async fn raw_with(client: &Client, uri: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = http::Request::builder().method("GET").uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .send(request.body(kube::client::Body::empty()).unwrap())
        .await
        .unwrap();
    let code = response.status().as_u16();
    let body = response.into_body().collect_bytes().await.unwrap();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn with_rbac_off_every_user_may_do_anything() {
    let cluster = common::start_with(ferry_sandbox::SandboxConfig {
        rbac: false,
        kubelet_delay: Duration::from_millis(20),
        ..ferry_sandbox::SandboxConfig::new("rbac-off")
    })
    .await;
    let nobody: Api<ConfigMap> =
        Api::namespaced(client_as(&cluster, "nobody", &[]).await, "default");
    nobody
        .create(&PostParams::default(), &config_map("free"))
        .await
        .unwrap();
    let beyond = json!({"metadata": {"name": "all"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    Api::<ClusterRole>::all(client_as(&cluster, "nobody", &[]).await)
        .create(&PostParams::default(), &object(beyond))
        .await
        .unwrap();
    cluster.stop().await;
}

#[tokio::test]
async fn discovery_lists_the_rbac_kinds_and_the_create_only_reviews() {
    let cluster = common::start("rbac-discovery").await;
    let bob = client_as(&cluster, "bob", &[]).await;
    let (code, rbac) = raw(&bob, "GET", "/apis/rbac.authorization.k8s.io/v1", None).await;
    assert_eq!(code, 200);
    let listed: Vec<(&str, bool)> = rbac["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["namespaced"].as_bool().unwrap(),
            )
        })
        .collect();
    for expected in [
        ("roles", true),
        ("rolebindings", true),
        ("clusterroles", false),
        ("clusterrolebindings", false),
    ] {
        assert!(listed.contains(&expected), "{expected:?} in {listed:?}");
    }
    let (_, reviews) = raw(&bob, "GET", "/apis/authorization.k8s.io/v1", None).await;
    let reviews = reviews["resources"].as_array().unwrap();
    assert_eq!(reviews.len(), 4, "{reviews:?}");
    for review in reviews {
        assert_eq!(review["verbs"], json!(["create"]), "{review}");
    }
    let local = reviews
        .iter()
        .find(|r| r["name"] == "localsubjectaccessreviews")
        .unwrap();
    assert_eq!(local["namespaced"], true);
    let (_, groups) = raw(&bob, "GET", "/apis", None).await;
    let names = groups["groups"].to_string();
    assert!(names.contains("rbac.authorization.k8s.io") && names.contains("authorization.k8s.io"));
    cluster.stop().await;
}
