//! Authentication as kube-apiserver does it: the admin token, ServiceAccount
//! tokens (minted by the Rust API and by TokenRequest), client certificates
//! from the sandbox's CA, SelfSubjectReview, and 401 with a Status body for
//! every credential that is missing, unknown, forged, expired or revoked.
//! Driven by the real `kube::Client`, raw HTTP through it, and kubectl
//! (`FERRY_KUBECTL`, else `kubectl` on PATH).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ferry_sandbox::{Sandbox, SandboxConfig};
use http_body_util::BodyExt;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::core::ObjectMeta;
use kube::{Client, Config};
use serde_json::{Value, json};

const UNAUTHORIZED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
const HOUR: Duration = Duration::from_secs(3600);

async fn client_from_yaml(yaml: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    Client::try_from(config).expect("client builds")
}

/// A client for `sandbox` whose user entry `edit` rewrites (starting from
/// the admin's token).
async fn client_with(sandbox: &Sandbox, edit: impl FnOnce(&mut AuthInfo)) -> Client {
    let mut kubeconfig = Kubeconfig::from_yaml(&sandbox.kubeconfig_yaml()).expect("parses");
    let user = kubeconfig.auth_infos[0]
        .auth_info
        .as_mut()
        .expect("user entry");
    edit(user);
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("usable");
    Client::try_from(config).expect("client builds")
}

async fn bearer_client(sandbox: &Sandbox, token: &str) -> Client {
    let token = token.to_owned();
    client_with(sandbox, |user| user.token = Some(token.into())).await
}

/// Who the server says the client is.
async fn whoami(client: &Client) -> Result<(String, String, Vec<String>), kube::Error> {
    let reviews: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    let info = review.status.and_then(|s| s.user_info).unwrap_or_default();
    Ok((
        info.username.unwrap_or_default(),
        info.uid.unwrap_or_default(),
        info.groups.unwrap_or_default(),
    ))
}

/// A raw request through `client`: the status code and the body's JSON.
async fn raw(client: &Client, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    raw_with(client, method, path, body, None).await
}

/// [`raw`], with an `Authorization` header of its own.
async fn raw_with(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<Value>,
    authorization: Option<&str>,
) -> (u16, Value) {
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    let request = request
        .body(kube::client::Body::from(bytes))
        .expect("request");
    let response = client.send(request).await.expect("sent");
    let code = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (code, value)
}

async fn assert_unauthorized(client: &Client, what: &str) {
    let (code, body) = raw(client, "GET", "/api/v1/namespaces", None).await;
    let expected: Value = serde_json::from_str(UNAUTHORIZED).expect("json");
    assert_eq!((code, &body), (401, &expected), "{what}");
    let review = common::status(whoami(client).await);
    assert_eq!(
        (review.code, review.reason.as_str(), review.message.as_str()),
        (401, "Unauthorized", "Unauthorized"),
        "{what}"
    );
}

async fn create_service_account(admin: &Client, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    let created = accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("serviceaccount created");
    created.metadata.uid.expect("uid")
}

/// A TokenRequest's answer, as JSON.
async fn token_request(admin: &Client, name: &str, spec: Value) -> Result<Value, kube::Error> {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": spec})).expect("a TokenRequest");
    let answer = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    Ok(serde_json::to_value(answer).expect("json"))
}

fn token_of(answer: &Value) -> String {
    answer
        .pointer("/status/token")
        .and_then(Value::as_str)
        .expect("a token")
        .to_owned()
}

fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".to_string(),
    ]
}

#[tokio::test]
async fn each_credential_names_its_user_in_a_self_subject_review() {
    let cluster = common::start("whoami").await;
    let sandbox = &cluster.sandbox;

    let (name, _, groups) = whoami(&cluster.client).await.expect("admin");
    assert_eq!(name, "sandbox-admin");
    assert_eq!(groups, vec!["system:masters", "system:authenticated"]);

    let alice = client_from_yaml(
        &sandbox
            .kubeconfig_for_user("alice", &["team-a", "system:masters"])
            .expect("minted"),
    )
    .await;
    assert_eq!(
        whoami(&alice).await.expect("alice"),
        (
            "alice".to_string(),
            String::new(),
            vec![
                "team-a".to_string(),
                "system:masters".to_string(),
                "system:authenticated".to_string()
            ]
        )
    );

    let uid = create_service_account(&cluster.client, "bot").await;
    let bot = client_from_yaml(
        &sandbox
            .kubeconfig_for_service_account("default", "bot", HOUR)
            .expect("minted"),
    )
    .await;
    assert_eq!(
        whoami(&bot).await.expect("bot"),
        (
            "system:serviceaccount:default:bot".to_string(),
            uid.clone(),
            service_account_groups("default")
        )
    );

    // TokenRequest, with kube-apiserver's defaults.
    let before = jiff::Timestamp::now().as_second();
    let answer = token_request(&cluster.client, "bot", json!({}))
        .await
        .expect("token issued");
    assert_eq!(
        answer["spec"],
        json!({"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 3600})
    );
    let expires: jiff::Timestamp = answer
        .pointer("/status/expirationTimestamp")
        .and_then(Value::as_str)
        .expect("expiry")
        .parse()
        .expect("a time");
    let expires = expires.as_second();
    assert!(
        (before + 3600..=before + 3700).contains(&expires),
        "{expires}"
    );
    let requested = bearer_client(sandbox, &token_of(&answer)).await;
    assert_eq!(
        whoami(&requested).await.expect("requested token").0,
        "system:serviceaccount:default:bot"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn every_bad_credential_gets_401_with_a_status_body() {
    let cluster = common::start("refusals").await;
    let sandbox = &cluster.sandbox;
    create_service_account(&cluster.client, "bot").await;
    let other = Sandbox::start(SandboxConfig::new("other"))
        .await
        .expect("other");
    other
        .create_service_account("default", "bot")
        .expect("same name there");

    let anonymous = client_with(sandbox, |user| user.token = None).await;
    assert_unauthorized(&anonymous, "no credential").await;

    // The bearer scheme is case-insensitive; other schemes are no credential.
    let token = sandbox.token();
    for (header, code) in [
        (format!("bearer {token}"), 200),
        (format!("BEARER {token}"), 200),
        (format!("Basic {token}"), 401),
        ("Bearer ".to_string(), 401),
        (format!("Bearer {token}x"), 401),
    ] {
        let (got, _) = raw_with(&anonymous, "GET", "/api/v1/namespaces", None, Some(&header)).await;
        assert_eq!(got, code, "{header}");
    }

    let unknown = bearer_client(sandbox, "not-a-token").await;
    assert_unauthorized(&unknown, "unknown token").await;

    let foreign = other
        .service_account_token("default", "bot", HOUR)
        .expect("minted elsewhere");
    assert_unauthorized(
        &bearer_client(sandbox, &foreign).await,
        "token signed by another sandbox",
    )
    .await;

    let expired = sandbox
        .service_account_token_expiring_at("default", "bot", SystemTime::now() - HOUR)
        .expect("minted");
    assert_unauthorized(&bearer_client(sandbox, &expired).await, "expired token").await;
    let fresh = sandbox
        .service_account_token_expiring_at("default", "bot", SystemTime::now() + HOUR)
        .expect("minted");
    whoami(&bearer_client(sandbox, &fresh).await)
        .await
        .expect("the same path with a future expiry works");

    // A token for an audience the API does not accept.
    let vault = token_request(&cluster.client, "bot", json!({"audiences": ["vault"]}))
        .await
        .expect("issued for vault");
    let vault = token_of(&vault);
    assert_unauthorized(&bearer_client(sandbox, &vault).await, "other audience").await;

    // Forgeries of a valid token: another subject under the old signature,
    // and the unsigned "none" algorithm.
    let valid = sandbox
        .service_account_token("default", "bot", HOUR)
        .expect("minted");
    let parts: Vec<&str> = valid.split('.').collect();
    let mut claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).expect("b64")).expect("json");
    claims["sub"] = json!("system:serviceaccount:kube-system:admin");
    claims["kubernetes.io"]["namespace"] = json!("kube-system");
    claims["kubernetes.io"]["serviceaccount"]["name"] = json!("admin");
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    let swapped = format!("{}.{payload}.{}", parts[0], parts[2]);
    assert_unauthorized(&bearer_client(sandbox, &swapped).await, "payload swapped").await;
    let none = URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#);
    let unsigned = format!("{none}.{}.", parts[1]);
    assert_unauthorized(&bearer_client(sandbox, &unsigned).await, "alg none").await;

    // A certificate another sandbox's CA signed, even for system:masters.
    let theirs = Kubeconfig::from_yaml(
        &other
            .kubeconfig_for_user("mallory", &["system:masters"])
            .expect("minted"),
    )
    .expect("parses");
    let their_user = theirs.auth_infos[0].auth_info.clone().expect("user");
    let foreign_cert = client_with(sandbox, |user| {
        user.token = None;
        user.client_certificate_data = their_user.client_certificate_data.clone();
        user.client_key_data = their_user.client_key_data.clone();
    })
    .await;
    assert_unauthorized(&foreign_cert, "certificate from another CA").await;
    // The connection itself is fine: a valid token beside it still works.
    let token = sandbox.token().to_owned();
    let cert_and_token = client_with(sandbox, |user| {
        user.token = Some(token.into());
        user.client_certificate_data = their_user.client_certificate_data.clone();
        user.client_key_data = their_user.client_key_data.clone();
    })
    .await;
    assert_eq!(
        whoami(&cert_and_token).await.expect("token").0,
        "sandbox-admin"
    );
    other.shutdown().await;
    cluster.stop().await;
}

#[tokio::test]
async fn a_token_stops_working_when_its_service_account_is_deleted_or_recreated() {
    let cluster = common::start("revoke").await;
    let sandbox = &cluster.sandbox;
    create_service_account(&cluster.client, "bot").await;
    let old = bearer_client(
        sandbox,
        &sandbox
            .service_account_token("default", "bot", HOUR)
            .expect("minted"),
    )
    .await;
    whoami(&old)
        .await
        .expect("valid while the ServiceAccount exists");

    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), "default");
    accounts
        .delete("bot", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_unauthorized(&old, "ServiceAccount deleted").await;
    assert!(
        sandbox
            .service_account_token("default", "bot", HOUR)
            .is_err(),
        "no token for a missing ServiceAccount"
    );

    let uid = create_service_account(&cluster.client, "bot").await;
    assert_unauthorized(&old, "ServiceAccount re-created with a new uid").await;
    let new = bearer_client(
        sandbox,
        &sandbox
            .service_account_token("default", "bot", HOUR)
            .expect("minted"),
    )
    .await;
    assert_eq!(whoami(&new).await.expect("new token").1, uid);
    cluster.stop().await;
}

#[tokio::test]
async fn token_requests_follow_kube_apiservers_rules() {
    let cluster = common::start("tokenrequest").await;
    let admin = &cluster.client;
    create_service_account(admin, "bot").await;

    let short = common::status(token_request(admin, "bot", json!({"expirationSeconds": 60})).await);
    assert_eq!((short.code, short.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        short.message,
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
    );
    let long = common::status(
        token_request(admin, "bot", json!({"expirationSeconds": (1i64 << 32) + 1})).await,
    );
    assert!(
        long.message
            .contains("may not specify a duration larger than 2^32 seconds"),
        "{}",
        long.message
    );
    let shortest = token_request(admin, "bot", json!({"expirationSeconds": 600}))
        .await
        .expect("ten minutes is allowed");
    assert_eq!(shortest["spec"]["expirationSeconds"], 600);

    let missing = common::status(token_request(admin, "ghost", json!({})).await);
    assert_eq!(missing.code, 404);
    assert_eq!(missing.message, "serviceaccounts \"ghost\" not found");

    // The body's name must match the URL's.
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let renamed = TokenRequest {
        metadata: ObjectMeta {
            name: Some("other".into()),
            ..ObjectMeta::default()
        },
        spec: Some(TokenRequestSpec::default()),
        status: None,
    };
    let mismatch = common::status(
        accounts
            .create_token_request("bot", &PostParams::default(), &renamed)
            .await,
    );
    assert_eq!(mismatch.code, 422);
    assert!(
        mismatch.message.contains(
            "metadata.name: Invalid value: \"other\": must match the service account name if specified"
        ),
        "{}",
        mismatch.message
    );

    // Bound to a Secret: the token dies with it.
    let bound = json!({"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "key"}});
    let absent = common::status(token_request(admin, "bot", bound.clone()).await);
    assert_eq!(
        (absent.code, absent.message.as_str()),
        (404, "secrets \"key\" not found")
    );
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "default");
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("key".into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");
    let token = token_of(
        &token_request(admin, "bot", bound)
            .await
            .expect("bound token"),
    );
    let holder = bearer_client(&cluster.sandbox, &token).await;
    whoami(&holder)
        .await
        .expect("valid while the secret exists");
    secrets
        .delete("key", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_unauthorized(&holder, "bound secret deleted").await;
    let configmap =
        json!({"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1", "name": "x"}});
    let wrong_kind = common::status(token_request(admin, "bot", configmap).await);
    assert_eq!(
        (wrong_kind.code, wrong_kind.message.as_str()),
        (
            400,
            "cannot bind token to object of type /v1, Kind=ConfigMap"
        )
    );

    // The subresource only creates.
    let (code, body) = raw(
        admin,
        "GET",
        "/api/v1/namespaces/default/serviceaccounts/bot/token",
        None,
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    cluster.stop().await;
}

#[tokio::test]
async fn discovery_lists_serviceaccounts_their_token_and_self_subject_reviews() {
    let cluster = common::start("authn-discovery").await;
    let (_, core) = raw(&cluster.client, "GET", "/api/v1", None).await;
    let resources = core["resources"].as_array().expect("resources");
    let find = |name: &str| {
        resources
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {resources:?}"))
    };
    assert_eq!(find("serviceaccounts")["shortNames"], json!(["sa"]));
    let token = find("serviceaccounts/token");
    assert_eq!(
        (&token["group"], &token["kind"], &token["verbs"]),
        (
            &json!("authentication.k8s.io"),
            &json!("TokenRequest"),
            &json!(["create"])
        )
    );
    let (_, group) = raw(
        &cluster.client,
        "GET",
        "/apis/authentication.k8s.io/v1",
        None,
    )
    .await;
    assert_eq!(
        group["resources"],
        json!([{"name": "selfsubjectreviews", "singularName": "selfsubjectreview", "namespaced": false,
                "kind": "SelfSubjectReview", "verbs": ["create"]}])
    );
    let (code, _) = raw(
        &cluster.client,
        "GET",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        None,
    )
    .await;
    assert_eq!(code, 405, "reviews are only created");
    cluster.stop().await;
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let binary = std::env::var("FERRY_KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let output = Command::new(&binary)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .output()
        .unwrap_or_else(|e| {
            panic!("{binary} does not run ({e}); set FERRY_KUBECTL or put kubectl on PATH")
        });
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

// kubectl runs as a blocking child process: the server needs other threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_tokens_and_names_each_credentials_user() {
    let cluster = common::start("authn-kubectl").await;
    let sandbox = &cluster.sandbox;
    create_service_account(&cluster.client, "bot").await;
    let admin = cluster.kubeconfig_path();
    let username = [
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ];

    let token = kubectl(&admin, &["create", "token", "bot", "--duration", "15m"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let as_bot = [&["--token", token][..], &username[..]].concat();
    assert_eq!(
        kubectl(&admin, &as_bot),
        "system:serviceaccount:default:bot"
    );

    let alice = cluster.dir.path().join("alice.kubeconfig");
    sandbox
        .write_kubeconfig_for(
            &alice,
            &ferry_sandbox::Identity::parse_user("alice:team-a").expect("flag"),
            HOUR,
        )
        .expect("written");
    assert_eq!(kubectl(&alice, &username), "alice");
    assert_eq!(kubectl(&admin, &username), "sandbox-admin");
    cluster.stop().await;
}
