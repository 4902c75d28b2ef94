//! patch, each type (json, merge, strategic, apply), through kubectl and
//! raw HTTP; the stored value afterwards; 403 without `patch`, 409 on a
//! stale resourceVersion, 415 for strategic merge on a custom resource.

use serde_json::{Value, json};

use crate::harness::{
    PROTOBUF, PROTOBUF_OR_JSON, World, assert_kubectl_error, assert_line, kubectl, protobuf_status,
    send,
};
use crate::kinds::{KINDS, Kind};
use crate::{pb, upstream};

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const STRATEGIC_PATCH: &str = "application/strategic-merge-patch+json";
const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// The body of a patch of `content_type` that sets the value to `value`.
fn body(kind: &Kind, content_type: &str, name: &str, value: &str) -> Value {
    match content_type {
        JSON_PATCH => json!([{"op": "replace", "path": kind.value, "value": value}]),
        APPLY_PATCH => kind.object(name, value),
        _ => kind.patch(value),
    }
}

async fn raw_patch(
    caller: &crate::harness::Caller,
    kind: &Kind,
    name: &str,
    content_type: &str,
    body: &Value,
    accept: &str,
) -> crate::harness::Answer {
    let path = format!("{}?fieldManager=conformance", kind.item(name));
    send(
        &caller.client,
        "PATCH",
        &path,
        Some(content_type),
        accept,
        body.to_string().into_bytes(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch() {
    let world = World::start("conf-patch").await;
    for kind in KINDS {
        let row = format!("patch-{}", kind.resource);
        // kubectl patch reads the object first.
        let (ok, no) = world.pair(&row, kind, "patch", &["get", "patch"]).await;
        world.seed(kind, kind.object("target", "seed")).await;
        let refused = upstream::forbidden(&no.user, "patch", kind, "", "target");

        // kubectl patch --type json|merge|strategic.
        for (flag, content_type) in [
            ("json", JSON_PATCH),
            ("merge", MERGE_PATCH),
            ("strategic", STRATEGIC_PATCH),
        ] {
            let value = format!("kubectl-{flag}");
            let patch = body(kind, content_type, "target", &value).to_string();
            let args = [
                "patch",
                &kind.qualified(),
                "target",
                "--type",
                flag,
                "-p",
                &patch,
            ];
            let run = kubectl(&ok, &args).await;
            if flag == "strategic" && !kind.protobuf {
                // Custom resources have no strategic merge patch
                // (k8s.io/apiextensions-apiserver/pkg/apiserver/customresource_handler.go).
                // kubectl names the type and kind before the server's
                // message (k8s.io/kubectl/pkg/cmd/patch/patch.go, on IsUnsupportedMediaType).
                let err = run.err(&row);
                let want =
                    upstream::unsupported_media_type(&[JSON_PATCH, MERGE_PATCH, APPLY_PATCH]);
                let line = format!(
                    "error: {STRATEGIC_PATCH} is not supported by {}, Kind={}: {}",
                    kind.api_version(),
                    kind.kind,
                    want["message"].as_str().unwrap_or("")
                );
                assert_line(&err, &line);
                assert_eq!(
                    world
                        .stored(kind, "target")
                        .await
                        .as_ref()
                        .and_then(|o| kind.value_of(o)),
                    Some("kubectl-merge")
                );
                continue;
            }
            let out = run.out(&row);
            assert_eq!(
                out.trim(),
                format!("{} patched", kind.kubectl_ref("target"))
            );
            let stored = world.stored(kind, "target").await.expect("patched");
            assert_eq!(kind.value_of(&stored), Some(value.as_str()), "{flag}");
            let err = kubectl(&no, &args).await.err(&row);
            assert_kubectl_error(&err, &refused);
        }

        // Raw: every content type, as the granted and the refused caller.
        for content_type in [JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH] {
            let value = format!("raw-{}", content_type.len());
            let patch = body(kind, content_type, "target", &value);
            let answer = raw_patch(
                &ok,
                kind,
                "target",
                content_type,
                &patch,
                "application/json",
            )
            .await;
            if content_type == STRATEGIC_PATCH && !kind.protobuf {
                assert_eq!(answer.code, 415);
                let want =
                    upstream::unsupported_media_type(&[JSON_PATCH, MERGE_PATCH, APPLY_PATCH]);
                assert_eq!(answer.json(), want);
                continue;
            }
            assert_eq!(answer.code, 200, "{content_type}: {:?}", answer.body);
            assert_eq!(
                kind.value_of(&answer.json()),
                Some(value.as_str()),
                "{content_type}"
            );
            let stored = world.stored(kind, "target").await.expect("patched");
            assert_eq!(
                kind.value_of(&stored),
                Some(value.as_str()),
                "{content_type}"
            );
            let answer = raw_patch(
                &no,
                kind,
                "target",
                content_type,
                &patch,
                "application/json",
            )
            .await;
            assert_eq!(
                (answer.code, answer.json()),
                (403, refused.clone()),
                "{content_type}"
            );
        }

        // A merge patch naming a stale resourceVersion is a conflict.
        let mut stale = kind.patch("stale");
        stale["metadata"] = json!({"resourceVersion": "1"});
        let answer = raw_patch(&ok, kind, "target", MERGE_PATCH, &stale, "application/json").await;
        assert_eq!(
            (answer.code, answer.json()),
            (409, upstream::conflict(kind, "target"))
        );

        // A protobuf client: the answer comes in protobuf, a protobuf patch
        // body is refused with every patch type named.
        if kind.protobuf {
            let patch = body(kind, MERGE_PATCH, "target", "protobuf");
            let answer =
                raw_patch(&ok, kind, "target", MERGE_PATCH, &patch, PROTOBUF_OR_JSON).await;
            assert_eq!(answer.code, 200);
            let (_, answered, raw) = pb::open(&answer.body);
            assert_eq!(answered, kind.kind);
            assert_eq!(
                pb::map(&raw, 2),
                vec![("k".to_owned(), "protobuf".to_owned())]
            );
            let answer =
                raw_patch(&no, kind, "target", MERGE_PATCH, &patch, PROTOBUF_OR_JSON).await;
            assert_eq!(protobuf_status(&answer), refused);
            let answer = send(
                &ok.client,
                "PATCH",
                &kind.item("target"),
                Some(PROTOBUF),
                PROTOBUF_OR_JSON,
                Vec::new(),
            )
            .await;
            assert_eq!(answer.code, 415);
            let want = upstream::unsupported_media_type(&[
                JSON_PATCH,
                MERGE_PATCH,
                STRATEGIC_PATCH,
                APPLY_PATCH,
            ]);
            assert_eq!(protobuf_status(&answer), want);
        }
    }
    world.stop().await;
}
