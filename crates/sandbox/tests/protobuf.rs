//! `application/vnd.kubernetes.protobuf` over raw HTTP and through kubectl:
//! every served built-in kind created, read, listed, watched and deleted in
//! protobuf; 415 for unknown media types and for custom resources; 400 for
//! malformed protobuf, never a crash.
//!
//! Request bodies are the bytes kubectl itself sent (tests/data/protobuf/),
//! or are built here field by field with the field numbers of upstream's
//! `generated.proto`, by a few lines of wire encoding that share nothing
//! with the sandbox's schema-driven converter.

mod common;

use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use kube::Client;
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const CLIENT_GO_ACCEPT: &str = "application/vnd.kubernetes.protobuf,application/json";

use common::pb;

struct Answer {
    code: StatusCode,
    content_type: String,
    body: Bytes,
}

impl Answer {
    fn json(&self) -> Value {
        assert!(
            self.content_type.starts_with("application/json"),
            "{}: {}",
            self.content_type,
            String::from_utf8_lossy(&self.body)
        );
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

async fn call(
    client: &Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .send(request.body(body.into()).expect("a request"))
        .await
        .expect("the sandbox answers");
    let code = response.status();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a whole body")
        .to_bytes();
    Answer {
        code,
        content_type,
        body,
    }
}

async fn post_protobuf(client: &Client, path: &str, body: Vec<u8>) -> Answer {
    call(
        client,
        "POST",
        path,
        &[("content-type", PROTOBUF), ("accept", CLIENT_GO_ACCEPT)],
        body,
    )
    .await
}

fn metadata(name: &str) -> Vec<u8> {
    pb::m(1, &[pb::s(1, name)])
}

/// Every served built-in kind: a protobuf body built from upstream's field
/// numbers, where it is created, and what its JSON must then show.
fn kinds() -> Vec<(&'static str, &'static str, &'static str, Vec<u8>, Value)> {
    use pb::{entry, int, m, s};
    let crd_version = m(
        7,
        &[
            s(1, "v1"),
            int(2, 1),
            int(3, 1),
            m(4, &[m(1, &[s(5, "object")])]),
        ],
    );
    vec![
        (
            "/api/v1/namespaces",
            "v1",
            "Namespace",
            pb::envelope("v1", "Namespace", &[metadata("pb-ns")]),
            json!({"metadata": {"name": "pb-ns"}}),
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            "v1",
            "ConfigMap",
            pb::envelope(
                "v1",
                "ConfigMap",
                &[metadata("pb-cm"), entry(2, "a", "b"), entry(2, "empty", "")],
            ),
            json!({"data": {"a": "b", "empty": ""}}),
        ),
        (
            "/api/v1/namespaces/default/secrets",
            "v1",
            "Secret",
            pb::envelope(
                "v1",
                "Secret",
                &[metadata("pb-secret"), entry(2, "k", "v1"), s(3, "Opaque")],
            ),
            json!({"data": {"k": "djE="}, "type": "Opaque"}),
        ),
        (
            "/api/v1/namespaces/default/services",
            "v1",
            "Service",
            pb::envelope(
                "v1",
                "Service",
                &[
                    metadata("pb-svc"),
                    m(
                        2,
                        &[
                            m(
                                1,
                                &[s(2, "TCP"), int(3, 80), m(4, &[int(1, 1), s(3, "http")])],
                            ),
                            entry(2, "app", "web"),
                        ],
                    ),
                ],
            ),
            json!({"spec": {"ports": [{"protocol": "TCP", "port": 80, "targetPort": "http"}], "selector": {"app": "web"}}}),
        ),
        (
            "/api/v1/namespaces/default/events",
            "v1",
            "Event",
            pb::envelope(
                "v1",
                "Event",
                &[
                    metadata("pb-event"),
                    m(2, &[s(1, "Pod"), s(3, "p")]),
                    s(3, "Started"),
                    int(8, 2),
                ],
            ),
            json!({"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started", "count": 2}),
        ),
        (
            "/apis/events.k8s.io/v1/namespaces/default/events",
            "events.k8s.io/v1",
            "Event",
            pb::envelope(
                "events.k8s.io/v1",
                "Event",
                &[
                    metadata("pb-event2"),
                    // 2024-01-02T03:04:05.123456Z
                    m(2, &[int(1, 1_704_164_645), int(2, 123_456_000)]),
                    s(4, "ctl"),
                    s(5, "ctl-1"),
                    s(6, "Act"),
                    s(7, "Why"),
                ],
            ),
            json!({"eventTime": "2024-01-02T03:04:05.123456Z", "reportingController": "ctl", "reportingInstance": "ctl-1", "action": "Act", "reason": "Why"}),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            "apps/v1",
            "Deployment",
            pb::envelope(
                "apps/v1",
                "Deployment",
                &[
                    metadata("pb-deploy"),
                    m(
                        2,
                        &[
                            int(1, 0),
                            m(2, &[entry(1, "app", "w")]),
                            m(
                                3,
                                &[
                                    m(1, &[entry(11, "app", "w")]),
                                    m(2, &[m(2, &[s(1, "c"), s(2, "nginx")])]),
                                ],
                            ),
                        ],
                    ),
                ],
            ),
            json!({"spec": {"replicas": 0, "selector": {"matchLabels": {"app": "w"}}, "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            "coordination.k8s.io/v1",
            "Lease",
            pb::envelope(
                "coordination.k8s.io/v1",
                "Lease",
                &[
                    metadata("pb-lease"),
                    m(2, &[s(1, "me"), int(2, 15), m(4, &[int(1, 1_704_164_645)])]),
                ],
            ),
            json!({"spec": {"holderIdentity": "me", "leaseDurationSeconds": 15, "renewTime": "2024-01-02T03:04:05.000000Z"}}),
        ),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            pb::envelope(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                &[
                    metadata("widgets.pb.ferry.dev"),
                    m(
                        2,
                        &[
                            s(1, "pb.ferry.dev"),
                            m(3, &[s(1, "widgets"), s(2, "widget"), s(4, "Widget")]),
                            s(4, "Namespaced"),
                            crd_version,
                        ],
                    ),
                ],
            ),
            json!({"spec": {"group": "pb.ferry.dev", "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced", "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}}),
        ),
    ]
}

/// Whether `want` is contained in `got` (objects by key, the rest equal).
fn contains(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| contains(gv, v))),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(g, w)| contains(g, w))
        }
        _ => got == want,
    }
}

#[tokio::test]
async fn every_served_builtin_kind_round_trips_in_protobuf() {
    let cluster = common::start("protobuf-kinds").await;
    let client = &cluster.client;
    for (collection, api_version, kind, body, want) in kinds() {
        let created = post_protobuf(client, collection, body).await;
        assert_eq!(
            created.code,
            StatusCode::CREATED,
            "{kind}: {}",
            String::from_utf8_lossy(&created.body)
        );
        assert_eq!(created.content_type, PROTOBUF, "{kind}");
        let (sent_version, sent_kind, raw) = pb::open(&created.body);
        assert_eq!(
            (sent_version.as_str(), sent_kind.as_str()),
            (api_version, kind)
        );
        // ObjectMeta (field 1) now carries the uid (field 5) the server set.
        let uid = pb::field(&pb::field(&raw, 1), 5);
        assert!(!uid.is_empty(), "{kind}: the answer is the stored object");
        let name = String::from_utf8(pb::field(&pb::field(&raw, 1), 1)).unwrap();

        // The same object read back as JSON shows what the protobuf said.
        let object_path = format!("{collection}/{name}");
        let as_json = call(
            client,
            "GET",
            &object_path,
            &[("accept", "application/json")],
            vec![],
        )
        .await;
        assert_eq!(as_json.code, StatusCode::OK, "{kind}");
        let object = as_json.json();
        assert!(
            contains(&object, &want),
            "{kind}: {object:#}\nwant {want:#}"
        );
        assert_eq!(
            object["metadata"]["uid"].as_str().map(str::as_bytes),
            Some(&uid[..])
        );

        // Read in protobuf, one and all.
        let one = call(
            client,
            "GET",
            &object_path,
            &[("accept", CLIENT_GO_ACCEPT)],
            vec![],
        )
        .await;
        assert_eq!(
            (one.code, one.content_type.as_str()),
            (StatusCode::OK, PROTOBUF),
            "{kind}"
        );
        assert_eq!(pb::open(&one.body).1, kind);
        let all = call(
            client,
            "GET",
            collection,
            &[("accept", CLIENT_GO_ACCEPT)],
            vec![],
        )
        .await;
        let (_, list_kind, list) = pb::open(&all.body);
        assert_eq!(list_kind, format!("{kind}List"));
        let items = pb::fields(&list).into_iter().filter(|f| f.0 == 2).count();
        assert!(items >= 1, "{kind}: a list with the new item");

        // Deleted with protobuf DeleteOptions (propagationPolicy = 4).
        let options = pb::envelope(api_version, "DeleteOptions", &[pb::s(4, "Background")]);
        let deleted = call(
            client,
            "DELETE",
            &object_path,
            &[("content-type", PROTOBUF), ("accept", CLIENT_GO_ACCEPT)],
            options,
        )
        .await;
        assert_eq!(deleted.code, StatusCode::OK, "{kind}: {:?}", deleted.body);
    }
    cluster.stop().await;
}

#[tokio::test]
async fn bodies_kubectl_sent_create_their_objects() {
    let cluster = common::start("protobuf-kubectl-bytes").await;
    let client = &cluster.client;
    let fixture = |name: &str| {
        std::fs::read(format!(
            "{}/tests/data/protobuf/kubectl-1.32-{name}.pb",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("fixture")
    };
    let cases = [
        (
            "namespace",
            "/api/v1/namespaces",
            "/api/v1/namespaces/n1",
            json!({"metadata": {"name": "n1"}}),
        ),
        (
            "configmap",
            "/api/v1/namespaces/default/configmaps",
            "/api/v1/namespaces/default/configmaps/cm1",
            json!({"data": {"a": "b"}}),
        ),
        (
            "secret",
            "/api/v1/namespaces/default/secrets",
            "/api/v1/namespaces/default/secrets/s1",
            json!({"data": {"a": "Yg=="}}),
        ),
        (
            "service",
            "/api/v1/namespaces/default/services",
            "/api/v1/namespaces/default/services/svc1",
            json!({"spec": {"ports": [{"name": "80-8080", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}}),
        ),
        (
            "deployment",
            "/apis/apps/v1/namespaces/default/deployments",
            "/apis/apps/v1/namespaces/default/deployments/d1",
            json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}}),
        ),
    ];
    for (name, collection, path, want) in cases {
        let created = post_protobuf(client, collection, fixture(name)).await;
        assert_eq!(
            created.code,
            StatusCode::CREATED,
            "{name}: {:?}",
            created.body
        );
        let object = call(client, "GET", path, &[], vec![]).await.json();
        assert!(contains(&object, &want), "{name}: {object:#}");
    }
    cluster.stop().await;
}

/// The reviews kubectl posts in protobuf (`kubectl auth can-i`, `kubectl
/// auth whoami`) are read through the protobuf body reader and answered in
/// protobuf when the client prefers it.
#[tokio::test]
async fn reviews_are_read_and_answered_in_protobuf() {
    let cluster = common::start("protobuf-reviews").await;
    let client = &cluster.client;
    let fixture = std::fs::read(format!(
        "{}/tests/data/protobuf/kubectl-1.32-selfsubjectaccessreview.pb",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture");
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let answer = post_protobuf(client, path, fixture.clone()).await;
    assert_eq!(
        (answer.code, answer.content_type.as_str()),
        (StatusCode::CREATED, PROTOBUF),
        "{:?}",
        answer.body
    );
    let (api_version, kind, raw) = pb::open(&answer.body);
    assert_eq!(
        (api_version.as_str(), kind.as_str()),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview")
    );
    // status (3) allowed (1): the admin, in system:masters, may get pods.
    let allowed = pb::fields(&pb::field(&raw, 3))
        .into_iter()
        .find(|f| f.0 == 1)
        .map(|f| f.1);
    assert_eq!(allowed, Some(1));
    // The same body, answered in JSON, shows the spec kubectl sent.
    let answer = call(
        client,
        "POST",
        path,
        &[("content-type", PROTOBUF), ("accept", "application/json")],
        fixture,
    )
    .await;
    let review = answer.json();
    assert_eq!(
        review["spec"]["resourceAttributes"],
        json!({"namespace": "default", "verb": "get", "resource": "pods"})
    );
    assert_eq!(review["status"]["allowed"], true);

    // An empty SelfSubjectReview, as `kubectl auth whoami` sends it.
    let body = pb::envelope("authentication.k8s.io/v1", "SelfSubjectReview", &[]);
    let answer = post_protobuf(
        client,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body,
    )
    .await;
    assert_eq!(
        (answer.code, answer.content_type.as_str()),
        (StatusCode::CREATED, PROTOBUF)
    );
    let (_, kind, raw) = pb::open(&answer.body);
    assert_eq!(kind, "SelfSubjectReview");
    // status (2) userInfo (1) username (1).
    let user = pb::field(&pb::field(&pb::field(&raw, 2), 1), 1);
    assert_eq!(String::from_utf8(user).unwrap(), "sandbox-admin");
    // A body that is not protobuf at all is a 400, as for any create.
    let answer = post_protobuf(
        client,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        b"k8s\0\x0a".to_vec(),
    )
    .await;
    assert_eq!(answer.code, StatusCode::BAD_REQUEST);
    cluster.stop().await;
}

/// autoscaling/v1 Scale in protobuf; a Scale to zero replicas carries no
/// replicas field at all (Go's omitempty), and still means zero.
#[tokio::test]
async fn the_scale_subresource_reads_and_writes_protobuf() {
    let cluster = common::start("protobuf-scale").await;
    let client = &cluster.client;
    let (collection, _, _, body, _) = kinds().into_iter().find(|k| k.2 == "Deployment").unwrap();
    assert_eq!(
        post_protobuf(client, collection, body).await.code,
        StatusCode::CREATED
    );
    let scale_path = format!("{collection}/pb-deploy/scale");
    let scale = pb::m(2, &[pb::int(1, 3)]);
    let put = call(
        client,
        "PUT",
        &scale_path,
        &[("content-type", PROTOBUF), ("accept", CLIENT_GO_ACCEPT)],
        pb::envelope("autoscaling/v1", "Scale", &[metadata("pb-deploy"), scale]),
    )
    .await;
    assert_eq!(put.code, StatusCode::OK, "{:?}", put.body);
    let (version, kind, raw) = pb::open(&put.body);
    assert_eq!(
        (version.as_str(), kind.as_str()),
        ("autoscaling/v1", "Scale")
    );
    assert_eq!(pb::fields(&pb::field(&raw, 2)), vec![(1, 3, Vec::new())]);
    let to_zero = pb::envelope(
        "autoscaling/v1",
        "Scale",
        &[metadata("pb-deploy"), pb::m(2, &[])],
    );
    let put = call(
        client,
        "PUT",
        &scale_path,
        &[("content-type", PROTOBUF)],
        to_zero,
    )
    .await;
    assert_eq!(put.code, StatusCode::OK, "{:?}", put.body);
    let deployment = call(
        client,
        "GET",
        &format!("{collection}/pb-deploy"),
        &[],
        vec![],
    )
    .await
    .json();
    assert_eq!(deployment["spec"]["replicas"], 0);
    cluster.stop().await;
}

#[tokio::test]
async fn unknown_media_types_and_protobuf_custom_resources_get_415() {
    let cluster = common::start("protobuf-415").await;
    let client = &cluster.client;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let plain = call(
        client,
        "POST",
        configmaps,
        &[("content-type", "text/plain")],
        br#"{"metadata":{"name":"x"}}"#.to_vec(),
    )
    .await;
    assert_eq!(plain.code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let status = plain.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "UnsupportedMediaType");
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );

    let patched = call(
        client,
        "PATCH",
        &format!("{configmaps}/x"),
        &[("content-type", PROTOBUF)],
        vec![],
    )
    .await;
    assert_eq!(patched.code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        patched.json()["message"]
            .as_str()
            .unwrap()
            .ends_with("application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml")
    );

    // A custom resource: JSON only, as from kube-apiserver.
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.pb.ferry.dev"},
        "spec": {"group": "pb.ferry.dev", "scope": "Namespaced", "names": {"plural": "gizmos", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    let created = call(
        client,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &[("content-type", "application/json")],
        crd.to_string().into_bytes(),
    )
    .await;
    assert_eq!(created.code, StatusCode::CREATED);
    let gizmos = "/apis/pb.ferry.dev/v1/namespaces/default/gizmos";
    let body = pb::envelope("pb.ferry.dev/v1", "Gizmo", &[metadata("g")]);
    let refused = post_protobuf(client, gizmos, body).await;
    assert_eq!(refused.code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        refused.json()["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );
    // Asked for protobuf or JSON, a custom resource answers JSON; asked for
    // protobuf alone, it cannot answer.
    let listed = call(
        client,
        "GET",
        gizmos,
        &[("accept", CLIENT_GO_ACCEPT)],
        vec![],
    )
    .await;
    assert_eq!(listed.json()["kind"], "GizmoList");
    let only = call(client, "GET", gizmos, &[("accept", PROTOBUF)], vec![]).await;
    assert_eq!(only.code, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(only.json()["reason"], "NotAcceptable");
    cluster.stop().await;
}

#[tokio::test]
async fn malformed_protobuf_gets_400_and_errors_answer_in_protobuf() {
    let cluster = common::start("protobuf-400").await;
    let client = &cluster.client;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let good = pb::envelope("v1", "ConfigMap", &[metadata("cm"), pb::entry(2, "a", "b")]);
    for (what, body) in [
        ("truncated", good[..good.len() - 5].to_vec()),
        ("garbage", b"\x00\xffnot protobuf at all".to_vec()),
        ("JSON", br#"{"metadata":{"name":"x"}}"#.to_vec()),
        ("magic alone", b"k8s\0".to_vec()),
    ] {
        let answer = call(
            client,
            "POST",
            configmaps,
            &[("content-type", PROTOBUF)],
            body,
        )
        .await;
        assert_eq!(answer.code, StatusCode::BAD_REQUEST, "{what}");
        let status = answer.json();
        assert_eq!(status["reason"], "BadRequest", "{what}");
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .starts_with("the object provided is unrecognized (must be of type ConfigMap)")
                || status["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap"),
            "{what}: {status}"
        );
    }
    // A client that prefers protobuf gets its errors as a protobuf Status.
    let missing = call(
        client,
        "GET",
        &format!("{configmaps}/absent"),
        &[("accept", CLIENT_GO_ACCEPT)],
        vec![],
    )
    .await;
    assert_eq!(
        (missing.code, missing.content_type.as_str()),
        (StatusCode::NOT_FOUND, PROTOBUF)
    );
    let (version, kind, raw) = pb::open(&missing.body);
    assert_eq!((version.as_str(), kind.as_str()), ("v1", "Status"));
    assert_eq!(pb::field(&raw, 4), b"NotFound");
    cluster.stop().await;
}

/// Random bytes, and valid bodies with bytes flipped, cut and inserted:
/// every answer is a Status or a created object, and the server goes on.
#[tokio::test]
async fn random_protobuf_bodies_never_break_the_server() {
    let cluster = common::start("protobuf-fuzz").await;
    let client = &cluster.client;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let seeds: Vec<Vec<u8>> = kinds().into_iter().map(|k| k.3).collect();
    let paths: Vec<&str> = kinds().into_iter().map(|k| k.0).collect();
    for round in 0..300 {
        let which = round % seeds.len();
        let mut body = seeds[which].clone();
        if round % 4 == 0 {
            body.truncate(4);
            body.extend((0..next() % 48).map(|_| next() as u8));
        } else {
            for _ in 0..1 + next() % 3 {
                let at = (next() as usize) % body.len();
                match next() % 3 {
                    0 => body[at] = next() as u8,
                    1 => body.truncate(at.max(1)),
                    _ => body.insert(at, next() as u8),
                }
            }
        }
        let answer = post_protobuf(client, paths[which], body.clone()).await;
        let code = answer.code.as_u16();
        assert!(
            matches!(code, 201 | 400 | 404 | 409 | 422),
            "round {round}: {code} for {body:?}"
        );
        if code != 201 {
            let status = if answer.content_type == PROTOBUF {
                pb::open(&answer.body).1
            } else {
                answer.json()["kind"].as_str().unwrap_or("").to_string()
            };
            assert_eq!(status, "Status", "round {round}");
        }
    }
    let alive = call(client, "GET", "/api/v1/namespaces", &[], vec![]).await;
    assert_eq!(alive.code, StatusCode::OK);
    cluster.stop().await;
}

#[tokio::test]
async fn a_protobuf_watch_streams_length_prefixed_watch_events() {
    let cluster = common::start("protobuf-watch").await;
    let client = cluster.client.clone();
    let request = Request::builder()
        .uri("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0")
        .header("accept", CLIENT_GO_ACCEPT)
        .body(Vec::new().into())
        .unwrap();
    let response = client.send(request).await.expect("a watch");
    assert_eq!(
        response.headers()["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let body = pb::envelope(
        "v1",
        "ConfigMap",
        &[metadata("watched"), pb::entry(2, "a", "b")],
    );
    let created = post_protobuf(
        &cluster.client,
        "/api/v1/namespaces/default/configmaps",
        body,
    )
    .await;
    assert_eq!(created.code, StatusCode::CREATED);

    let mut stream = response.into_body();
    let mut buffer = Vec::new();
    let event = tokio::time::timeout(common::WAIT, async {
        loop {
            if buffer.len() >= 4 {
                let len = u32::from_be_bytes(buffer[..4].try_into().unwrap()) as usize;
                if buffer.len() >= 4 + len {
                    let event = buffer[4..4 + len].to_vec();
                    buffer.drain(..4 + len);
                    return event;
                }
            }
            let frame = stream
                .frame()
                .await
                .expect("the stream goes on")
                .expect("a frame");
            if let Ok(data) = frame.into_data() {
                buffer.extend_from_slice(&data);
            }
        }
    })
    .await
    .expect("an event before the deadline");
    // WatchEvent{type = 1, object = 2: RawExtension{raw = 1: enveloped object}}
    assert_eq!(pb::field(&event, 1), b"ADDED");
    let raw = pb::field(&pb::field(&event, 2), 1);
    let (version, kind, object) = pb::open(&raw);
    assert_eq!((version.as_str(), kind.as_str()), ("v1", "ConfigMap"));
    assert_eq!(pb::field(&pb::field(&object, 1), 1), b"watched");
    cluster.stop().await;
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let binary = std::env::var("FERRY_KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let output = Command::new(&binary)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {binary} ({e}); set FERRY_KUBECTL or put kubectl on PATH")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// kubectl's `create` commands send protobuf and read protobuf answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_builtin_kinds_in_protobuf() {
    let cluster = common::start("protobuf-kubectl").await;
    let kubeconfig = cluster.kubeconfig_path();
    let outputs = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| kubectl(&kubeconfig, args);
        vec![
            run(&["create", "namespace", "x"]),
            run(&[
                "create",
                "configmap",
                "settings",
                "--from-literal=a=b",
                "-n",
                "x",
                "-o",
                "json",
            ]),
            run(&[
                "create",
                "deployment",
                "web",
                "--image=nginx:1.27",
                "--replicas=2",
                "-n",
                "x",
            ]),
            run(&[
                "create",
                "secret",
                "generic",
                "creds",
                "--from-literal=user=me",
                "-n",
                "x",
            ]),
            run(&[
                "create",
                "service",
                "clusterip",
                "web",
                "--tcp=80:8080",
                "-n",
                "x",
            ]),
            run(&["scale", "deployment", "web", "--replicas=0", "-n", "x"]),
            run(&["get", "deployment", "web", "-n", "x", "-o", "json"]),
            run(&["delete", "configmap", "settings", "-n", "x"]),
            run(&["create", "namespace", "x"]),
        ]
    })
    .await
    .unwrap();
    let ok = |i: usize, needle: &str| {
        let (success, text) = &outputs[i];
        assert!(*success && text.contains(needle), "step {i}: {text}");
    };
    ok(0, "namespace/x created");
    // `-o json` prints what kubectl decoded from the sandbox's protobuf answer.
    let created: Value = serde_json::from_str(&outputs[1].1).expect("kubectl printed JSON");
    assert_eq!(created["data"], json!({"a": "b"}));
    assert!(
        created["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert!(created["metadata"]["creationTimestamp"].is_string());
    ok(2, "deployment.apps/web created");
    ok(3, "secret/creds created");
    ok(4, "service/web created");
    ok(5, "deployment.apps/web scaled");
    let deployment: Value = serde_json::from_str(&outputs[6].1).expect("JSON");
    assert_eq!(deployment["spec"]["replicas"], 0);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    ok(7, "configmap \"settings\" deleted");
    // The AlreadyExists Status reaches kubectl intact.
    let (success, text) = &outputs[8];
    assert!(
        !success && text.contains("namespaces \"x\" already exists"),
        "{text}"
    );
    cluster.stop().await;
}
