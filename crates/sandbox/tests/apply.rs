//! Server-side apply: ownership by field manager, conflicts, force, removal
//! of fields a manager stops applying, apply-to-create.

mod common;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

fn cm(data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": data})
}

#[tokio::test]
async fn two_managers_with_disjoint_fields_both_keep_theirs() {
    let cluster = common::start("ssa-disjoint").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    api.patch(
        "shared",
        &PatchParams::apply("alice"),
        &Patch::Apply(cm(json!({"a": "1", "x": "1"}))),
    )
    .await
    .expect("apply creates the object");
    api.patch(
        "shared",
        &PatchParams::apply("bob"),
        &Patch::Apply(cm(json!({"b": "2"}))),
    )
    .await
    .unwrap();
    let both = api.get("shared").await.unwrap().data.unwrap();
    assert_eq!(
        (both["a"].as_str(), both["b"].as_str(), both["x"].as_str()),
        ("1", "2", "1")
    );

    // Alice stops applying x: it goes, since nobody else owns it.
    api.patch(
        "shared",
        &PatchParams::apply("alice"),
        &Patch::Apply(cm(json!({"a": "1"}))),
    )
    .await
    .unwrap();
    let data = api.get("shared").await.unwrap().data.unwrap();
    assert!(!data.contains_key("x"));
    assert_eq!(data["b"], "2");
    cluster.stop().await;
}

#[tokio::test]
async fn a_conflicting_apply_is_409_and_force_takes_ownership() {
    let cluster = common::start("ssa-conflict").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    api.patch(
        "shared",
        &PatchParams::apply("alice"),
        &Patch::Apply(cm(json!({"a": "1"}))),
    )
    .await
    .unwrap();
    let conflict = common::status(
        api.patch(
            "shared",
            &PatchParams::apply("bob"),
            &Patch::Apply(cm(json!({"a": "2"}))),
        )
        .await,
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict
            .message
            .contains("conflict with \"alice\": .data.a"),
        "{}",
        conflict.message
    );

    let forced = api
        .patch(
            "shared",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(cm(json!({"a": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["a"], "2");
    let owners: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(owners, ["bob"], "alice lost her only field");

    // Bob now owns it: alice applying the old value conflicts with bob.
    let back = common::status(
        api.patch(
            "shared",
            &PatchParams::apply("alice"),
            &Patch::Apply(cm(json!({"a": "1"}))),
        )
        .await,
    );
    assert!(back.message.contains("\"bob\""), "{}", back.message);
    cluster.stop().await;
}

#[tokio::test]
async fn apply_requires_a_field_manager() {
    let cluster = common::start("ssa-manager").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let params = PatchParams {
        field_manager: None,
        ..PatchParams::default()
    };
    let result = api
        .patch("shared", &params, &Patch::Apply(cm(json!({"a": "1"}))))
        .await;
    // kube itself refuses to send an apply without a field manager, or the server answers 400.
    assert!(result.is_err());
    cluster.stop().await;
}
