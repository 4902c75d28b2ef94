//! The authorization record under `FERRY_SANDBOX_AUTHZ_LOG`: a
//! ServiceAccount's allowed requests land in the sandbox's file as JSON
//! lines; its refused requests and the admin's (a superuser, decided
//! without RBAC) do not. Its own test binary, because the variable is read
//! when a sandbox starts and must be set before any does.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

const NS: &str = "default";

#[tokio::test]
async fn allowed_requests_of_rbac_users_are_recorded_and_refused_ones_are_not() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: the only test of this binary, set before any thread reads the
    // environment.
    unsafe { std::env::set_var("FERRY_SANDBOX_AUTHZ_LOG", dir.path()) };
    let cluster = common::start("recorded").await;
    let admin = cluster.client.clone();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "reader", "namespace": NS},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "reader", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": NS}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    cluster.sandbox.create_service_account(NS, "bot").unwrap();
    let yaml = cluster
        .sandbox
        .kubeconfig_for_service_account(NS, "bot", Duration::from_secs(3600))
        .unwrap();
    let path = cluster.dir.path().join("bot.kubeconfig");
    std::fs::write(&path, yaml).unwrap();
    let bot = common::client_from(&path).await;

    let config_maps = Api::<ConfigMap>::namespaced(bot, NS);
    config_maps.list(&ListParams::default()).await.unwrap();
    config_maps.list(&ListParams::default()).await.unwrap();
    let refused = config_maps.get("x").await;
    assert_eq!(common::status(refused).code, 403);
    cluster.stop().await;

    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "one file for the one sandbox: {files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        lines,
        [json!({
            "user": "system:serviceaccount:default:bot", "verb": "list", "apiGroup": "",
            "resource": "configmaps", "subresource": "", "namespace": NS,
        })]
    );
}
