//! create and delete: kubectl, raw JSON and raw protobuf; the stored object
//! afterwards; 403 for a caller without the verb, 409, 415 and 422 in
//! upstream's words.

use serde_json::{Value, json};

use crate::harness::{
    self, JSON, PROTOBUF, PROTOBUF_OR_JSON, World, assert_kubectl_error, assert_kubectl_file_error,
    json_call, kubectl, protobuf_status, send,
};
use crate::kinds::KINDS;
use crate::{pb, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create() {
    let world = World::start("conf-create").await;
    for kind in KINDS {
        let row = format!("create-{}", kind.resource);
        let (ok, no) = world.pair(&row, kind, "create", &["create"]).await;
        let refused = upstream::forbidden(&no.user, "create", kind, "", "");

        // kubectl create -f
        let file = world.file(
            &format!("{row}.json"),
            &kind.object("by-kubectl", "a").to_string(),
        );
        let out = kubectl(&ok, &["create", "-f", &file]).await.out(&row);
        assert_eq!(
            out.trim(),
            format!("{} created", kind.kubectl_ref("by-kubectl"))
        );
        let stored = world.stored(kind, "by-kubectl").await.expect("created");
        assert_eq!(kind.value_of(&stored), Some("a"));
        let again = kubectl(&ok, &["create", "-f", &file]).await.err(&row);
        assert_kubectl_file_error(
            &again,
            &upstream::already_exists(kind, "by-kubectl"),
            "creating",
            &file,
        );
        let file = world.file(
            &format!("{row}-no.json"),
            &kind.object("refused", "a").to_string(),
        );
        let err = kubectl(&no, &["create", "-f", &file]).await.err(&row);
        assert_kubectl_file_error(&err, &refused, "creating", &file);
        assert_eq!(world.stored(kind, "refused").await, None);

        // Raw JSON: 201 with the object, then 409, 403 and 422.
        let (code, body) = json_call(
            &ok.client,
            "POST",
            &kind.collection(),
            Some(kind.object("by-json", "b")),
        )
        .await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(
            (body["kind"].as_str(), kind.value_of(&body)),
            (Some(kind.kind), Some("b"))
        );
        assert_eq!(
            world
                .stored(kind, "by-json")
                .await
                .as_ref()
                .and_then(|o| kind.value_of(o)),
            Some("b")
        );
        let (code, body) = json_call(
            &ok.client,
            "POST",
            &kind.collection(),
            Some(kind.object("by-json", "c")),
        )
        .await;
        assert_eq!(
            (code, &body),
            (409, &upstream::already_exists(kind, "by-json"))
        );
        let (code, body) = json_call(
            &no.client,
            "POST",
            &kind.collection(),
            Some(kind.object("refused", "b")),
        )
        .await;
        assert_eq!((code, &body), (403, &refused));
        let (code, body) = json_call(
            &ok.client,
            "POST",
            &kind.collection(),
            Some(kind.object("Bad_Name", "b")),
        )
        .await;
        let detail = "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let want = upstream::invalid(
            kind,
            "Bad_Name",
            "FieldValueInvalid",
            "metadata.name",
            detail,
        );
        assert_eq!((code, &body), (422, &want));

        // Raw protobuf: built-ins answer in kind, custom resources are 415.
        let body = kind.protobuf_object("by-protobuf", "p");
        let Some(body) = body else {
            let bytes = pb::envelope(
                &kind.api_version(),
                kind.kind,
                &[pb::m(1, &[pb::s(1, "pb")])],
            );
            let answer = send(
                &ok.client,
                "POST",
                &kind.collection(),
                Some(PROTOBUF),
                PROTOBUF_OR_JSON,
                bytes,
            )
            .await;
            assert_eq!(answer.code, 415);
            assert_eq!(
                answer.json(),
                upstream::unsupported_media_type(&["application/json", "application/yaml"])
            );
            continue;
        };
        let answer = send(
            &ok.client,
            "POST",
            &kind.collection(),
            Some(PROTOBUF),
            PROTOBUF_OR_JSON,
            body.clone(),
        )
        .await;
        assert_eq!(answer.code, 201, "{:?}", answer.body);
        let (version, answered_kind, raw) = pb::open(&answer.body);
        assert_eq!(
            (version.as_str(), answered_kind.as_str()),
            ("v1", kind.kind)
        );
        assert_eq!(pb::text(&pb::field(&raw, 1), 1), "by-protobuf");
        assert_eq!(pb::map(&raw, 2), vec![("k".to_owned(), "p".to_owned())]);
        assert_eq!(
            world
                .stored(kind, "by-protobuf")
                .await
                .as_ref()
                .and_then(|o| kind.value_of(o)),
            Some("p")
        );
        let answer = send(
            &no.client,
            "POST",
            &kind.collection(),
            Some(PROTOBUF),
            PROTOBUF_OR_JSON,
            body,
        )
        .await;
        assert_eq!(answer.code, 403);
        assert_eq!(protobuf_status(&answer), refused);
    }
    world.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete() {
    let world = World::start("conf-delete").await;
    for kind in KINDS {
        let row = format!("delete-{}", kind.resource);
        let (ok, no) = world.pair(&row, kind, "delete", &["delete"]).await;
        for name in ["by-kubectl", "by-json", "by-protobuf", "kept"] {
            world.seed(kind, kind.object(name, "v")).await;
        }

        let out = kubectl(
            &ok,
            &["delete", &kind.qualified(), "by-kubectl", "--wait=false"],
        )
        .await
        .out(&row);
        // kubectl 1.35's delete printer: `<kind>[.group] "<name>" deleted from <ns> namespace`.
        assert_eq!(
            out.trim(),
            format!(
                "{} \"by-kubectl\" deleted from conf namespace",
                kind.qualified_singular()
            )
        );
        assert_eq!(world.stored(kind, "by-kubectl").await, None);
        let err = kubectl(&no, &["delete", &kind.qualified(), "kept", "--wait=false"])
            .await
            .err(&row);
        assert_kubectl_error(
            &err,
            &upstream::forbidden(&no.user, "delete", kind, "", "kept"),
        );
        let err = kubectl(
            &ok,
            &["delete", &kind.qualified(), "by-kubectl", "--wait=false"],
        )
        .await
        .err(&row);
        assert_kubectl_error(&err, &upstream::not_found(kind, "by-kubectl"));

        let uid = world.stored(kind, "by-json").await.expect("seeded")["metadata"]["uid"].clone();
        let (code, body) = json_call(&ok.client, "DELETE", &kind.item("by-json"), None).await;
        assert_eq!(
            (code, &body),
            (
                200,
                &upstream::deleted(kind, "by-json", uid.as_str().unwrap_or(""))
            )
        );
        assert_eq!(world.stored(kind, "by-json").await, None);
        let (code, body) = json_call(&ok.client, "DELETE", &kind.item("by-json"), None).await;
        assert_eq!((code, &body), (404, &upstream::not_found(kind, "by-json")));
        let (code, body) = json_call(&no.client, "DELETE", &kind.item("kept"), None).await;
        assert_eq!(
            (code, &body),
            (
                403,
                &upstream::forbidden(&no.user, "delete", kind, "", "kept")
            )
        );

        // A stale precondition is 409 Conflict.
        let stale = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": "1"}});
        let (code, body) = json_call(&ok.client, "DELETE", &kind.item("kept"), Some(stale)).await;
        assert_eq!(code, 409, "{body}");
        assert_eq!(body["reason"], "Conflict");
        assert!(world.stored(kind, "kept").await.is_some());

        if kind.protobuf {
            let answer = send(
                &ok.client,
                "DELETE",
                &kind.item("by-protobuf"),
                None,
                PROTOBUF_OR_JSON,
                Vec::new(),
            )
            .await;
            assert_eq!(answer.code, 200);
            let status = protobuf_status(&answer);
            assert_eq!(status["status"], "Success");
            assert_eq!(world.stored(kind, "by-protobuf").await, None);
            let answer = send(
                &no.client,
                "DELETE",
                &kind.item("kept"),
                None,
                PROTOBUF_OR_JSON,
                Vec::new(),
            )
            .await;
            assert_eq!(
                protobuf_status(&answer),
                upstream::forbidden(&no.user, "delete", kind, "", "kept")
            );
        }
        assert_eq!(world.stored(kind, "kept").await.map(|_| ()), Some(()));
    }
    let _ = (JSON, PROTOBUF, Value::Null, harness::NS);
    world.stop().await;
}
