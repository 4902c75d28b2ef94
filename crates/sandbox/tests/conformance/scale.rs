//! The scale subresource of a Deployment and of a custom resource: the
//! `autoscaling/v1 Scale` field by field, `kubectl scale`, raw GET, PUT and
//! PATCH (and protobuf for the Deployment), and the 403 naming
//! `<resource>/scale`.

use serde_json::{Value, json};

use crate::harness::{PROTOBUF_OR_JSON, World, assert_kubectl_error, json_call, kubectl, send};
use crate::kinds::{DEPLOYMENT, Kind, WIDGET};
use crate::{pb, upstream};

/// The Scale upstream builds from an object: metadata {name, namespace,
/// uid, resourceVersion, creationTimestamp}, spec.replicas, status.replicas
/// and status.selector (k8s.io/kubernetes/pkg/registry/apps/deployment/storage/storage.go
/// `scaleFromDeployment`; k8s.io/apiextensions-apiserver/pkg/registry/customresource/etcd.go
/// `scaleFromCustomResource`).
fn expected_scale(object: &Value, spec: i64, status: i64, selector: &str) -> Value {
    let meta = &object["metadata"];
    let mut scale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
        "spec": {"replicas": spec}, "status": {"replicas": status}});
    if !selector.is_empty() {
        scale["status"]["selector"] = json!(selector);
    }
    scale
}

async fn seed(world: &World, kind: &Kind, name: &str) -> Value {
    let mut object = kind.object(name, "s");
    if kind.kind == "Widget" {
        object["spec"]["replicas"] = json!(1);
    }
    world.seed(kind, object).await;
    if kind.kind == "Widget" {
        // A controller's status: the replicas and selector the Scale reports.
        let status = json!({"status": {"replicas": 1, "selector": format!("app={name}")}});
        let path = format!("{}/status", kind.item(name));
        let answer = send(
            world.admin(),
            "PATCH",
            &path,
            Some("application/merge-patch+json"),
            "application/json",
            status.to_string().into_bytes(),
        )
        .await;
        assert_eq!(answer.code, 200, "{:?}", answer.body);
    }
    world.stored(kind, name).await.expect("seeded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale() {
    let world = World::start("conf-scale").await;
    world.cluster.sandbox.kubelet().set_rollouts_ready(false);
    for kind in [&DEPLOYMENT, &WIDGET] {
        let row = format!("scale-{}", kind.resource);
        // kubectl scale reads the object, then patches its scale.
        let (ok, no) = world
            .pair(&row, kind, "patch", &["get", "patch", "update"])
            .await;
        let object = seed(&world, kind, "s").await;
        let scale_path = format!("{}/scale", kind.item("s"));

        let (code, scale) = json_call(&ok.client, "GET", &scale_path, None).await;
        assert_eq!(code, 200, "{scale}");
        let status_replicas = scale["status"]["replicas"].as_i64().unwrap_or(0);
        assert_eq!(scale, expected_scale(&object, 1, status_replicas, "app=s"));

        let out = kubectl(&ok, &["scale", &kind.qualified(), "s", "--replicas=3"])
            .await
            .out(&row);
        assert_eq!(out.trim(), format!("{} scaled", kind.kubectl_ref("s")));
        assert_eq!(
            world.stored(kind, "s").await.expect("kept")["spec"]["replicas"],
            3
        );
        let err = kubectl(&no, &["scale", &kind.qualified(), "s", "--replicas=4"])
            .await
            .err(&row);
        let refused = upstream::forbidden(&no.user, "patch", kind, "scale", "s");
        assert_kubectl_error(&err, &refused);

        let mut put = scale.clone();
        put["spec"]["replicas"] = json!(5);
        put["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("resourceVersion");
        let (code, answered) = json_call(&ok.client, "PUT", &scale_path, Some(put.clone())).await;
        assert_eq!(
            (code, &answered["kind"], &answered["spec"]["replicas"]),
            (200, &json!("Scale"), &json!(5))
        );
        assert_eq!(
            world.stored(kind, "s").await.expect("kept")["spec"]["replicas"],
            5
        );
        let patch = json!({"spec": {"replicas": 2}}).to_string().into_bytes();
        let answer = send(
            &ok.client,
            "PATCH",
            &scale_path,
            Some("application/merge-patch+json"),
            "application/json",
            patch.clone(),
        )
        .await;
        assert_eq!(answer.json()["spec"]["replicas"], 2);
        assert_eq!(
            world.stored(kind, "s").await.expect("kept")["spec"]["replicas"],
            2
        );
        let answer = send(
            &no.client,
            "PATCH",
            &scale_path,
            Some("application/merge-patch+json"),
            "application/json",
            patch,
        )
        .await;
        assert_eq!((answer.code, answer.json()), (403, refused));
        let no_get = world
            .cert_user(&format!("{row}-noget"), kind, &["patch"])
            .await;
        let (code, body) = json_call(&no_get.client, "GET", &scale_path, None).await;
        assert_eq!(
            (code, body),
            (
                403,
                upstream::forbidden(&no_get.user, "get", kind, "scale", "s")
            )
        );

        if kind.protobuf {
            // autoscaling/v1 Scale in protobuf: metadata 1, spec 2 {replicas 1},
            // status 3 {replicas 1, selector 2}.
            let answer = send(
                &ok.client,
                "GET",
                &scale_path,
                None,
                PROTOBUF_OR_JSON,
                Vec::new(),
            )
            .await;
            let (version, answered, raw) = pb::open(&answer.body);
            assert_eq!(
                (version.as_str(), answered.as_str()),
                ("autoscaling/v1", "Scale")
            );
            assert_eq!(pb::number(&pb::field(&raw, 2), 1), 2);
            assert_eq!(pb::text(&pb::field(&raw, 3), 2), "app=s");
        }
    }
    world.stop().await;
}
