//! RBAC meets real credentials: a ServiceAccount token and a client
//! certificate, each from the kubeconfig the sandbox mints for it, are
//! judged by RBAC with the name, uid and groups authentication gave them.
//! Each is refused (403, upstream's words) what no binding grants, allowed
//! what a RoleBinding grants, refused impersonation without the
//! `impersonate` verb, and `kubectl auth can-i --list` answers its rules.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use kube::Client;
use kube::api::{Api, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use common::{Cluster, raw};

const HOUR: Duration = Duration::from_secs(3600);
const NS: &str = "team";

/// One identity under test: its client, its kubeconfig on disk, the user
/// name RBAC sees, and the RBAC subject that names it.
struct Caller {
    client: Client,
    kubeconfig: PathBuf,
    user: String,
    subject: Value,
}

fn object<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a valid object")
}

async fn from_yaml(cluster: &Cluster, file: &str, yaml: &str) -> (Client, PathBuf) {
    let path = cluster.dir.path().join(file);
    std::fs::write(&path, yaml).expect("kubeconfig written");
    (common::client_from(&path).await, path)
}

/// The ServiceAccount `team/bot`, by the token kubeconfig the sandbox mints.
async fn service_account(cluster: &Cluster) -> Caller {
    cluster
        .sandbox
        .create_service_account(NS, "bot")
        .expect("service account");
    let yaml = cluster
        .sandbox
        .kubeconfig_for_service_account(NS, "bot", HOUR)
        .expect("kubeconfig");
    let (client, kubeconfig) = from_yaml(cluster, "bot.kubeconfig", &yaml).await;
    Caller {
        client,
        kubeconfig,
        user: format!("system:serviceaccount:{NS}:bot"),
        subject: json!({"kind": "ServiceAccount", "name": "bot", "namespace": NS}),
    }
}

/// The user `carol` in group `qa`, by a client-certificate kubeconfig.
async fn certificate_user(cluster: &Cluster) -> Caller {
    let yaml = cluster
        .sandbox
        .kubeconfig_for_user("carol", &["qa"])
        .expect("kubeconfig");
    let (client, kubeconfig) = from_yaml(cluster, "carol.kubeconfig", &yaml).await;
    Caller {
        client,
        kubeconfig,
        user: "carol".to_owned(),
        subject: json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "carol"}),
    }
}

async fn start() -> Cluster {
    let cluster = common::start("rbac-credentials").await;
    // The namespace exists whichever identity the test starts with.
    cluster
        .sandbox
        .create_service_account(NS, "placeholder")
        .expect("namespace");
    cluster
}

/// A Role in `team` granting `verbs` on configmaps, bound to `subject`.
async fn grant_config_maps(cluster: &Cluster, name: &str, verbs: &[&str], subject: &Value) {
    let roles: Api<Role> = Api::namespaced(cluster.client.clone(), NS);
    let role = json!({"metadata": {"name": name}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]});
    roles
        .create(&PostParams::default(), &object(role))
        .await
        .expect("role");
    let bindings: Api<RoleBinding> = Api::namespaced(cluster.client.clone(), NS);
    let binding = json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": [subject]});
    bindings
        .create(&PostParams::default(), &object(binding))
        .await
        .expect("binding");
}

fn forbidden(user: &str, verb: &str, resource: &str, name: &str, namespace: &str) -> String {
    let what = if name.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource} \"{name}\"")
    };
    format!(
        "{what} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"\" in the namespace \"{namespace}\""
    )
}

async fn create_config_map(client: &Client, namespace: &str, name: &str) -> (u16, Value) {
    let path = format!("/api/v1/namespaces/{namespace}/configmaps");
    raw(
        client,
        "POST",
        &path,
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})),
    )
    .await
}

/// A GET of `path` as `client` with extra (impersonation) headers.
async fn get_with(client: &Client, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = http::Request::builder()
        .uri(path)
        .header("accept", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .send(request.body(kube::client::Body::empty()).expect("request"))
        .await
        .expect("answered");
    let code = response.status().as_u16();
    let body = response.into_body().collect_bytes().await.expect("body");
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The checks every credential must pass, whatever its kind.
async fn refused_then_granted(cluster: &Cluster, caller: &Caller) {
    let user = caller.user.as_str();
    // Nothing is bound: the create is refused with upstream's full Status.
    let (code, body) = create_config_map(&caller.client, NS, "a").await;
    assert_eq!(
        (code, body),
        (
            403,
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": forbidden(user, "create", "configmaps", "", NS),
                "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403
            })
        )
    );
    let (code, body) = raw(
        &caller.client,
        "GET",
        "/api/v1/namespaces/team/configmaps",
        None,
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            403,
            Some(forbidden(user, "list", "configmaps", "", NS).as_str())
        )
    );

    // A RoleBinding grants create and get in `team`, and only those.
    grant_config_maps(cluster, "writer", &["create", "get"], &caller.subject).await;
    let (code, body) = create_config_map(&caller.client, NS, "a").await;
    assert_eq!(code, 201, "{body}");
    let mine: Api<ConfigMap> = Api::namespaced(caller.client.clone(), NS);
    mine.get("a").await.expect("get is granted");
    let (code, body) = raw(
        &caller.client,
        "DELETE",
        "/api/v1/namespaces/team/configmaps/a",
        None,
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            403,
            Some(forbidden(user, "delete", "configmaps", "a", NS).as_str())
        )
    );
    assert_eq!(body["details"], json!({"name": "a", "kind": "configmaps"}));
    // The binding is in `team`: elsewhere the user has nothing.
    let (code, body) = create_config_map(&caller.client, "default", "b").await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            403,
            Some(forbidden(user, "create", "configmaps", "", "default").as_str())
        )
    );
    // Secrets were never granted.
    let (code, _) = raw(
        &caller.client,
        "GET",
        "/api/v1/namespaces/team/secrets",
        None,
    )
    .await;
    assert_eq!(code, 403);
}

/// Impersonation is refused without the `impersonate` verb, for users,
/// groups (`system:masters` above all) and ServiceAccounts, and what the
/// request would have done does not happen.
async fn cannot_impersonate(caller: &Caller) {
    let user = caller.user.as_str();
    let cases = [
        (
            vec![("Impersonate-User", "sandbox-admin")],
            format!(
                "users \"sandbox-admin\" is forbidden: User \"{user}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
            ),
        ),
        (
            vec![
                ("Impersonate-User", "anyone"),
                ("Impersonate-Group", "system:masters"),
            ],
            format!(
                "users \"anyone\" is forbidden: User \"{user}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
            ),
        ),
        (
            vec![(
                "Impersonate-User",
                "system:serviceaccount:kube-system:default",
            )],
            format!(
                "serviceaccounts \"default\" is forbidden: User \"{user}\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"kube-system\""
            ),
        ),
    ];
    for (headers, message) in cases {
        let (code, body) =
            get_with(&caller.client, "/api/v1/namespaces/team/secrets", &headers).await;
        assert_eq!(
            (code, body["message"].as_str(), body["reason"].as_str()),
            (403, Some(message.as_str()), Some("Forbidden")),
            "{headers:?}"
        );
    }
}

async fn whoami(client: &Client) -> (String, String, Vec<String>) {
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("every authenticated user may ask who it is");
    let info = review.status.and_then(|s| s.user_info).unwrap_or_default();
    (
        info.username.unwrap_or_default(),
        info.uid.unwrap_or_default(),
        info.groups.unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_service_account_token_gets_only_what_its_bindings_grant() {
    let cluster = start().await;
    let bot = service_account(&cluster).await;
    refused_then_granted(&cluster, &bot).await;
    cannot_impersonate(&bot).await;

    // The token's uid and groups reach RBAC and the reviews: a binding to
    // the namespace's ServiceAccount group grants the token's user too.
    let account = Api::<ServiceAccount>::namespaced(cluster.client.clone(), NS)
        .get("bot")
        .await
        .expect("service account");
    let uid = account.metadata.uid.expect("uid");
    assert_eq!(
        whoami(&bot.client).await,
        (
            bot.user.clone(),
            uid,
            vec![
                "system:serviceaccounts".to_owned(),
                "system:serviceaccounts:team".to_owned(),
                "system:authenticated".to_owned(),
            ]
        )
    );
    let group = json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccounts:team"});
    grant_config_maps(&cluster, "team-accounts", &["delete"], &group).await;
    let (code, body) = raw(
        &bot.client,
        "DELETE",
        "/api/v1/namespaces/team/configmaps/a",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    cluster.stop().await;
}

#[tokio::test]
async fn a_client_certificate_gets_only_what_its_bindings_grant() {
    let cluster = start().await;
    let carol = certificate_user(&cluster).await;
    refused_then_granted(&cluster, &carol).await;
    cannot_impersonate(&carol).await;

    // The certificate's organisation is a group RBAC binds.
    assert_eq!(
        whoami(&carol.client).await,
        (
            "carol".to_owned(),
            String::new(),
            vec!["qa".to_owned(), "system:authenticated".to_owned()]
        )
    );
    let qa = json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "qa"});
    grant_config_maps(&cluster, "qa", &["delete"], &qa).await;
    let (code, body) = raw(
        &carol.client,
        "DELETE",
        "/api/v1/namespaces/team/configmaps/a",
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    cluster.stop().await;
}

#[tokio::test]
async fn a_granted_impersonation_reaches_only_the_names_it_lists() {
    let cluster = start().await;
    let bot = service_account(&cluster).await;
    let carol = certificate_user(&cluster).await;
    // bot may impersonate carol, and nobody else.
    let roles = json!({"metadata": {"name": "as-carol"}, "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["carol"]}]});
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(cluster.client.clone())
        .create(&PostParams::default(), &object(roles))
        .await
        .expect("cluster role");
    let binding = json!({"metadata": {"name": "bot-as-carol"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "as-carol"}, "subjects": [bot.subject]});
    Api::<ClusterRoleBinding>::all(cluster.client.clone())
        .create(&PostParams::default(), &object(binding))
        .await
        .expect("binding");
    grant_config_maps(&cluster, "carol-reads", &["get"], &carol.subject).await;
    Api::<ConfigMap>::namespaced(cluster.client.clone(), NS)
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "c"}})),
        )
        .await
        .expect("config map");

    // As carol, bot has carol's rights, not its own and not more.
    let as_carol = [("Impersonate-User", "carol")];
    let (code, body) = get_with(
        &bot.client,
        "/api/v1/namespaces/team/configmaps/c",
        &as_carol,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = get_with(&bot.client, "/api/v1/namespaces/team/secrets", &as_carol).await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            403,
            Some(
                "secrets is forbidden: User \"carol\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\""
            )
        )
    );
    // Groups were not granted: carol's group cannot be claimed through bot.
    let (code, body) = get_with(
        &bot.client,
        "/api/v1/namespaces/team/configmaps/c",
        &[("Impersonate-User", "carol"), ("Impersonate-Group", "qa")],
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            403,
            Some(
                "groups \"qa\" is forbidden: User \"system:serviceaccount:team:bot\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
            )
        )
    );
    cluster.stop().await;
}

/// kubectl's stdout and stderr, and whether it succeeded.
fn kubectl(kubeconfig: &Path, args: &[&str]) -> (String, String, bool) {
    let kubectl = common::kubectl();
    let output = Command::new(&kubectl)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} ({e})", kubectl.display()));
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.success(),
    )
}

/// The verbs `kubectl auth can-i --list` shows for `resource`, if listed.
fn listed_verbs(table: &str, resource: &str) -> Option<String> {
    table.lines().find_map(|line| {
        let mut columns = line.split_whitespace();
        (columns.next() == Some(resource)).then(|| {
            // The verbs are the last column.
            let start = line.rfind('[').unwrap_or(0);
            line[start..].trim().to_owned()
        })
    })
}

// kubectl blocks its thread; the sandbox serves from another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_answers_each_credentials_rules() {
    let cluster = start().await;
    let bot = service_account(&cluster).await;
    let carol = certificate_user(&cluster).await;
    grant_config_maps(
        &cluster,
        "bot-writes",
        &["create", "get", "list"],
        &bot.subject,
    )
    .await;
    grant_config_maps(&cluster, "carol-reads", &["get"], &carol.subject).await;

    let (bot_kubeconfig, carol_kubeconfig) = (bot.kubeconfig.clone(), carol.kubeconfig.clone());
    tokio::task::spawn_blocking(move || {
        for (kubeconfig, configmaps) in [
            (&bot_kubeconfig, "[create get list]"),
            (&carol_kubeconfig, "[get]"),
        ] {
            let (out, err, ok) = kubectl(kubeconfig, &["auth", "can-i", "--list", "-n", NS]);
            assert!(ok, "{out}{err}");
            assert_eq!(
                listed_verbs(&out, "configmaps").as_deref(),
                Some(configmaps),
                "{out}"
            );
            // What every authenticated user may do is listed too.
            assert_eq!(
                listed_verbs(&out, "selfsubjectaccessreviews.authorization.k8s.io").as_deref(),
                Some("[create]"),
                "{out}"
            );
            assert_eq!(listed_verbs(&out, "secrets"), None, "{out}");
            // Elsewhere, the Role grants nothing.
            let (out, _, _) = kubectl(kubeconfig, &["auth", "can-i", "--list", "-n", "default"]);
            assert_eq!(listed_verbs(&out, "configmaps"), None, "{out}");

            let (out, err, ok) =
                kubectl(kubeconfig, &["auth", "can-i", "get", "configmaps", "-n", NS]);
            assert!(ok && out.trim() == "yes", "{out}{err}");
            let (out, err, ok) =
                kubectl(kubeconfig, &["auth", "can-i", "delete", "configmaps", "-n", NS]);
            assert!(!ok && out.trim() == "no", "{out}{err}");
        }
        // kubectl --as with a credential that may not impersonate.
        let (out, err, ok) = kubectl(
            &carol_kubeconfig,
            &["get", "configmaps", "-n", NS, "--as", "sandbox-admin"],
        );
        assert!(!ok, "{out}");
        assert!(
            err.contains(
                "users \"sandbox-admin\" is forbidden: User \"carol\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
            ),
            "{err}"
        );
        // And kubectl's create, refused by RBAC, shows upstream's words.
        let (out, err, ok) = kubectl(
            &carol_kubeconfig,
            &["create", "configmap", "x", "-n", NS, "--from-literal=k=v"],
        );
        assert!(!ok, "{out}");
        assert!(
            err.contains(
                "configmaps is forbidden: User \"carol\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"team\""
            ),
            "{err}"
        );
    })
    .await
    .expect("kubectl checks");
    cluster.stop().await;
}
