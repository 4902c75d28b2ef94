//! Who may do what: `kubectl explain` (the OpenAPI documents every
//! authenticated user may read), `kubectl auth can-i` and the access review
//! behind it, `kubectl create token` and the token it mints, and 401 for a
//! credential the sandbox does not accept.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::harness::{World, assert_line, json_call, kubectl};
use crate::kinds::{CONFIG_MAP, KINDS, Kind, SERVICE_ACCOUNT};
use crate::upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_and_can_i() {
    let world = World::start("conf-explain").await;
    // Nothing bound: explain needs only what every user may read.
    let nobody = world.cert_user("nobody", &CONFIG_MAP, &[]).await;
    let out = kubectl(&nobody, &["explain", "configmaps.data"])
        .await
        .out("explain");
    // kubectl explain's plaintext template (k8s.io/kubectl/pkg/explain/v2/templates/plaintext.tmpl).
    assert_line(&out, "KIND:       ConfigMap");
    assert_line(&out, "VERSION:    v1");
    assert_line(&out, "FIELD: data <map[string]string>");
    let out = kubectl(&nobody, &["explain", "widgets.spec.k"])
        .await
        .out("explain");
    assert_line(&out, "GROUP:      conf.ferry.dev");
    assert_line(&out, "KIND:       Widget");
    assert_line(&out, "FIELD: k <string>");
    assert!(
        out.contains("The value every row writes and reads back."),
        "{out}"
    );

    for kind in KINDS {
        let row = format!("can-i-{}", kind.resource);
        let reader = world.service_account(&row, kind, &["get"]).await;
        let resource = kind.qualified();
        // `kubectl auth can-i` prints yes or no and exits 0 or 1
        // (k8s.io/kubectl/pkg/cmd/auth/cani.go).
        let yes = kubectl(&reader, &["auth", "can-i", "get", &resource]).await;
        assert_eq!((yes.ok, yes.stdout.trim()), (true, "yes"), "{}", yes.stderr);
        let no = kubectl(&reader, &["auth", "can-i", "delete", &resource]).await;
        assert_eq!((no.ok, no.stdout.trim()), (false, "no"), "{}", no.stderr);

        let review = |verb: &str| {
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": "conf", "verb": verb, "group": kind.group, "resource": kind.resource, "name": "x"}}})
        };
        let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
        let (code, answer) = json_call(&reader.client, "POST", path, Some(review("get"))).await;
        assert_eq!(code, 201, "{answer}");
        // RBAC's reason (k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/rbac.go, `authorizingVisitor`).
        let reason = format!(
            "RBAC: allowed by RoleBinding \"{row}/conf\" of Role \"{row}\" to ServiceAccount \"{row}/conf\""
        );
        assert_eq!(answer["status"], json!({"allowed": true, "reason": reason}));
        let (_, answer) = json_call(&reader.client, "POST", path, Some(review("delete"))).await;
        assert_eq!(answer["status"]["allowed"], false);
        assert_eq!(answer["spec"], review("delete")["spec"]);
    }
    world.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_token_and_unauthorized() {
    let world = World::start("conf-token").await;
    world
        .cluster
        .sandbox
        .create_service_account("conf", "bot")
        .expect("bot");
    let (minter, no) = world
        .pair("token", &SERVICE_ACCOUNT, "create", &["create"])
        .await;
    let out = kubectl(&minter, &["create", "token", "bot", "--duration=1h"])
        .await
        .out("create token");
    let token = out.trim();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    // The minted token is bot's credential.
    let bot = world.bearer("bot-token", token).await;
    let whoami = kubectl(&bot, &["auth", "whoami", "-o", "json"])
        .await
        .out("whoami");
    let review: Value = serde_json::from_str(&whoami).expect("JSON");
    assert_eq!(
        review["status"]["userInfo"]["username"],
        "system:serviceaccount:conf:bot"
    );
    // kubectl create token prefixes the server's message
    // (k8s.io/kubectl/pkg/cmd/create/create_token.go: "failed to create token: %v").
    let err = kubectl(&no, &["create", "token", "bot"])
        .await
        .err("create token");
    let refused = upstream::forbidden(&no.user, "create", &SERVICE_ACCOUNT, "token", "bot");
    let message = |status: &Value| status["message"].as_str().unwrap_or("").to_owned();
    assert_line(
        &err,
        &format!("error: failed to create token: {}", message(&refused)),
    );
    let err = kubectl(&minter, &["create", "token", "ghost"])
        .await
        .err("create token");
    let missing = upstream::not_found(&SERVICE_ACCOUNT, "ghost");
    assert_line(
        &err,
        &format!("error: failed to create token: {}", message(&missing)),
    );
    let path = "/api/v1/namespaces/conf/serviceaccounts/bot/token";
    let request =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let (code, body) = json_call(&no.client, "POST", path, Some(request)).await;
    assert_eq!((code, body), (403, refused));

    // 401: an unknown token, an expired one, one whose ServiceAccount is gone.
    let past = SystemTime::now() - Duration::from_secs(3600);
    let expired = world
        .cluster
        .sandbox
        .service_account_token_expiring_at("conf", "bot", past)
        .expect("token");
    for (name, token) in [
        ("forged", "not-a-token".to_owned()),
        ("expired", expired),
        ("revoked", token.to_owned()),
    ] {
        if name == "revoked" {
            let (code, _) = json_call(
                world.admin(),
                "DELETE",
                "/api/v1/namespaces/conf/serviceaccounts/bot",
                None,
            )
            .await;
            assert_eq!(code, 200);
        }
        let caller = world.bearer(name, &token).await;
        let (code, body) = json_call(&caller.client, "GET", &CONFIG_MAP.collection(), None).await;
        assert_eq!((code, body), (401, upstream::unauthorized()), "{name}");
        let err = kubectl(&caller, &["get", "configmaps"]).await.err(name);
        assert_line(&err, upstream::KUBECTL_UNAUTHORIZED);
    }
    let _: &Kind = &CONFIG_MAP;
    world.stop().await;
}
