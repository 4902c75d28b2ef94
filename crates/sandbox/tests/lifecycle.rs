//! Deletion (finalizers, owner cascade, namespaces), the kubelet stand-in and
//! the scale subresource, optimistic concurrency, fault injection.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn a_finalizer_holds_deletion_until_removed() {
    let cluster = common::start("finalizers").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let mut held = cm("held");
    held.metadata.finalizers = Some(vec!["ferry.dev/cleanup".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("held").await.expect("still there");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(common::status(api.get("held").await).code, 404);
    cluster.stop().await;
}

#[tokio::test]
async fn deleting_an_owner_deletes_its_dependents_and_a_namespace_its_contents() {
    let cluster = common::start("cascade").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let owner = api
        .create(&PostParams::default(), &cm("owner"))
        .await
        .unwrap();
    let mut child = cm("child");
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.metadata.uid.clone().unwrap(),
        ..Default::default()
    }]);
    api.create(&PostParams::default(), &child).await.unwrap();
    api.create(&PostParams::default(), &cm("bystander"))
        .await
        .unwrap();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    assert_eq!(common::status(api.get("child").await).code, 404);
    assert!(api.get("bystander").await.is_ok());

    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("doomed".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let inside: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "doomed");
    inside
        .create(&PostParams::default(), &cm("inside"))
        .await
        .unwrap();
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(common::status(inside.get("inside").await).code, 404);
    cluster.stop().await;
}

#[tokio::test]
async fn concurrent_read_modify_write_with_retry_loses_no_increment() {
    let cluster = common::start("concurrency").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let mut counter = cm("counter");
    counter.data = Some(BTreeMap::from([("n".to_string(), "0".to_string())]));
    api.create(&PostParams::default(), &counter).await.unwrap();
    let (tasks, increments) = (8, 25);
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let api = api.clone();
        handles.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..increments {
                loop {
                    let mut current = api.get("counter").await.unwrap();
                    let data = current.data.get_or_insert_with(BTreeMap::new);
                    let n: u64 = data["n"].parse().unwrap();
                    data.insert("n".into(), (n + 1).to_string());
                    match api
                        .replace("counter", &PostParams::default(), &current)
                        .await
                    {
                        Ok(_) => break,
                        Err(kube::Error::Api(s)) if s.code == 409 => conflicts += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            conflicts
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    let n = api.get("counter").await.unwrap().data.unwrap()["n"].clone();
    assert_eq!(n, (tasks * increments).to_string());
    cluster.stop().await;
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn the_kubelet_rolls_deployments_out_and_follows_scale() {
    let cluster = common::start("kubelet").await;
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    api.create(&PostParams::default(), &deployment("web", 3))
        .await
        .unwrap();
    let available = |want: i32, generation: i64| {
        let api = api.clone();
        async move {
            let d = api.get("web").await.ok()?;
            let s = d.status?;
            (s.available_replicas == Some(want) && s.observed_generation == Some(generation))
                .then_some(())
        }
    };
    common::eventually("3 replicas available", || available(3, 1)).await;

    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .unwrap();
    common::eventually("scaled to zero", || available(0, 2)).await;

    cluster.sandbox.kubelet().set_rollouts_ready(false);
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();
    let unready = common::eventually("unready rollout", || async {
        let s = api.get("web").await.ok()?.status?;
        (s.replicas == Some(2) && s.observed_generation == Some(3)).then_some(s)
    })
    .await;
    assert_eq!(unready.available_replicas, Some(0));
    cluster.stop().await;
}

#[tokio::test]
async fn injected_faults_fail_writes_deterministically() {
    let cluster = common::start("faults").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    cluster.sandbox.faults().set_error_rate(1.0);
    let failed = common::status(api.create(&PostParams::default(), &cm("x")).await);
    assert_eq!(
        (failed.code, failed.reason.as_str()),
        (500, "InternalError")
    );
    assert!(
        api.list(&Default::default()).await.is_ok(),
        "reads are not affected"
    );
    cluster.sandbox.faults().clear();
    cluster.sandbox.faults().set_conflict_rate(1.0);
    assert_eq!(
        common::status(api.create(&PostParams::default(), &cm("x")).await).code,
        409
    );
    cluster.sandbox.faults().clear();

    let mut outcomes = Vec::new();
    for round in 0..2 {
        cluster.sandbox.faults().set_seed(42);
        cluster.sandbox.faults().set_error_rate(0.5);
        let mut results = Vec::new();
        for i in 0..20 {
            results.push(
                api.create(&PostParams::default(), &cm(&format!("r{round}-{i}")))
                    .await
                    .is_ok(),
            );
        }
        outcomes.push(results);
    }
    assert_eq!(outcomes[0], outcomes[1], "same seed, same faults");
    assert!(outcomes[0].contains(&true) && outcomes[0].contains(&false));

    cluster.sandbox.faults().clear();
    cluster
        .sandbox
        .faults()
        .set_latency(Duration::from_millis(100));
    let start = std::time::Instant::now();
    api.get("x").await.ok();
    assert!(start.elapsed() >= Duration::from_millis(100));
    cluster.stop().await;
}

#[tokio::test]
async fn dropping_a_sandbox_stops_its_server() {
    let cluster = common::start("dropped").await;
    let port = cluster.sandbox.port();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    drop(cluster);
    common::eventually("the port to close", || async move {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .is_err()
            .then_some(())
    })
    .await;
}
