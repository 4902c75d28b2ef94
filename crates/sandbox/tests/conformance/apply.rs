//! apply, client-side (`kubectl apply`: get, then create or patch) and
//! server-side (`kubectl apply --server-side` and a raw apply patch): the
//! stored object, kubectl's lines, and the 403 for a caller without the verb
//! the step needs.

use crate::harness::{World, assert_kubectl_file_error, json_call, kubectl, send};
use crate::kinds::KINDS;
use crate::upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply() {
    let world = World::start("conf-apply").await;
    for kind in KINDS {
        let row = format!("apply-{}", kind.resource);
        let (ok, no_create) = world
            .pair(&row, kind, "create", &["get", "create", "patch"])
            .await;
        let file = world.file(
            &format!("{row}.json"),
            &kind.object("applied", "one").to_string(),
        );
        let out = kubectl(&ok, &["apply", "-f", &file]).await.out(&row);
        assert_eq!(
            out.trim(),
            format!("{} created", kind.kubectl_ref("applied"))
        );
        let stored = world.stored(kind, "applied").await.expect("created");
        assert_eq!(kind.value_of(&stored), Some("one"));
        // kubectl records what it applied (k8s.io/kubectl/pkg/util/apply.go).
        let annotation =
            &stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"];
        let recorded: serde_json::Value =
            serde_json::from_str(annotation.as_str().expect("recorded")).expect("JSON");
        assert_eq!(kind.value_of(&recorded), Some("one"));

        let file = world.file(
            &format!("{row}.json"),
            &kind.object("applied", "two").to_string(),
        );
        let out = kubectl(&ok, &["apply", "-f", &file]).await.out(&row);
        assert_eq!(
            out.trim(),
            format!("{} configured", kind.kubectl_ref("applied"))
        );
        assert_eq!(
            world
                .stored(kind, "applied")
                .await
                .as_ref()
                .and_then(|o| kind.value_of(o)),
            Some("two")
        );

        let other = world.file(
            &format!("{row}-no.json"),
            &kind.object("refused", "one").to_string(),
        );
        let err = kubectl(&no_create, &["apply", "-f", &other])
            .await
            .err(&row);
        let refused = upstream::forbidden(&no_create.user, "create", kind, "", "");
        assert_kubectl_file_error(&err, &refused, "creating", &other);
        assert_eq!(world.stored(kind, "refused").await, None);

        // Without patch, a change is refused in upstream's words.
        let file = world.file(
            &format!("{row}.json"),
            &kind.object("applied", "three").to_string(),
        );
        let no_patch = world
            .cert_user(&format!("{row}-nopatch"), kind, &["get", "create", "list"])
            .await;
        let err = kubectl(&no_patch, &["apply", "-f", &file]).await.err(&row);
        let refused = upstream::forbidden(&no_patch.user, "patch", kind, "", "applied");
        let message = refused["message"].as_str().expect("message");
        assert!(err.contains(message), "{err}");
    }
    world.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply() {
    let world = World::start("conf-ssa").await;
    for kind in KINDS {
        let row = format!("ssa-{}", kind.resource);
        let (ok, no_patch) = world.pair(&row, kind, "patch", &["patch", "create"]).await;
        let file = world.file(
            &format!("{row}.json"),
            &kind.object("applied", "one").to_string(),
        );
        let args = ["apply", "--server-side", "-f", &file];
        for value in ["one", "two"] {
            let file = world.file(
                &format!("{row}.json"),
                &kind.object("applied", value).to_string(),
            );
            let out = kubectl(&ok, &["apply", "--server-side", "-f", &file])
                .await
                .out(&row);
            assert_eq!(
                out.trim(),
                format!("{} serverside-applied", kind.kubectl_ref("applied"))
            );
            let stored = world.stored(kind, "applied").await.expect("applied");
            assert_eq!(kind.value_of(&stored), Some(value));
            // The field manager kubectl names (k8s.io/kubectl/pkg/cmd/apply/apply.go).
            let managers: Vec<&str> = stored["metadata"]["managedFields"]
                .as_array()
                .expect("managedFields")
                .iter()
                .filter_map(|m| m["manager"].as_str())
                .collect();
            assert_eq!(managers, vec!["kubectl"], "{stored}");
        }
        let err = kubectl(&no_patch, &args).await.err(&row);
        let refused = upstream::forbidden(&no_patch.user, "patch", kind, "", "applied");
        assert!(
            err.contains(refused["message"].as_str().expect("message")),
            "{err}"
        );

        // Raw: an apply that creates needs create too (upstream's patch
        // handler authorizes the create, k8s.io/apiserver/pkg/endpoints/handlers/patch.go).
        let path = format!("{}?fieldManager=raw", kind.item("raw"));
        let body = kind.object("raw", "r").to_string().into_bytes();
        let answer = send(
            &ok.client,
            "PATCH",
            &path,
            Some("application/apply-patch+yaml"),
            "application/json",
            body.clone(),
        )
        .await;
        assert_eq!(answer.code, 201, "{:?}", answer.body);
        assert_eq!(kind.value_of(&answer.json()), Some("r"));
        let patch_only = world
            .cert_user(&format!("{row}-nocreate"), kind, &["patch"])
            .await;
        let path = format!("{}?fieldManager=raw", kind.item("raw-refused"));
        let body = kind.object("raw-refused", "r").to_string().into_bytes();
        let answer = send(
            &patch_only.client,
            "PATCH",
            &path,
            Some("application/apply-patch+yaml"),
            "application/json",
            body,
        )
        .await;
        assert_eq!(
            (answer.code, answer.json()),
            (403, upstream::forbidden_apply_create(kind, "raw-refused"))
        );
        let (code, _) = json_call(
            &world.admin().clone(),
            "GET",
            &kind.item("raw-refused"),
            None,
        )
        .await;
        assert_eq!(code, 404);
    }
    world.stop().await;
}
