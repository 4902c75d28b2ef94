//! The kubelet stand-in's realistic mode: Pods for Deployments and
//! StatefulSets that start, become ready or fail per image rule,
//! EndpointSlices for Services, Jobs that end, claims that bind; and the
//! instant mode, which makes no Pods but keeps EndpointSlices; and an
//! EndpointSlice controller that can be down.

mod common;

use std::time::Duration;

use common::kubelet::{
    create, deployment, is_ready, pods_of, realistic, service, slice_of, waiting_reason,
};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::time::Instant;

#[tokio::test]
async fn pods_start_after_their_delay_and_the_deployment_follows_them() {
    let cluster = realistic("realistic-start").await;
    let client = cluster.client.clone();
    let created = Instant::now();
    let _: Deployment = create(&client, deployment("web", 2, "registry.example/web:slow")).await;
    let pods = common::eventually("two ready pods", || async {
        let pods = pods_of(&client, "web").await;
        (pods.len() == 2 && pods.iter().all(is_ready)).then_some(pods)
    })
    .await;
    assert!(
        created.elapsed() >= Duration::from_millis(400),
        "pods became ready before their start delay"
    );
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let hash = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("pod-template-hash"))
            .cloned();
        let hash = hash.expect("a pod-template-hash label");
        assert!(name.starts_with(&format!("web-{hash}-")), "{name}");
        assert_eq!(name.len(), "web-".len() + hash.len() + 6, "{name}");
        let owner = &pod.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("Deployment", "web", Some(true))
        );
        let status = pod.status.as_ref().expect("a status");
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(status.pod_ip.is_some(), "a running pod has an IP");
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    common::eventually("the deployment available", || async {
        let status = deployments.get("web").await.ok()?.status?;
        let available = status.conditions?.iter().any(|c| {
            c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True")
        });
        (available && status.ready_replicas == Some(2) && status.updated_replicas == Some(2))
            .then_some(())
    })
    .await;

    // Scaling down removes pods; deleting the Deployment removes the rest.
    deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scaled");
    common::eventually("one pod left", || async {
        (pods_of(&client, "web").await.len() == 1).then_some(())
    })
    .await;
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .expect("deleted");
    common::eventually("no pods left", || async {
        pods_of(&client, "web").await.is_empty().then_some(())
    })
    .await;
    cluster.stop().await;
}

#[tokio::test]
async fn unready_pods_keep_the_deployment_unavailable_and_out_of_ready_endpoints() {
    let cluster = realistic("realistic-unready").await;
    let client = cluster.client.clone();
    let _: Deployment = create(&client, deployment("good", 2, "registry.example/good:1")).await;
    let _: Deployment = create(
        &client,
        deployment("bad", 2, "registry.example/bad:unready"),
    )
    .await;
    let _: Service = create(&client, service("good", "good")).await;
    let _: Service = create(&client, service("bad", "bad")).await;

    let ready_flags = |slice: &EndpointSlice| -> Vec<Option<bool>> {
        slice
            .endpoints
            .iter()
            .flatten()
            .map(|e| e.conditions.as_ref().and_then(|c| c.ready))
            .collect()
    };
    let good = common::eventually("two ready endpoints for good", || async {
        let slice = slice_of(&client, "good").await?;
        (ready_flags(&slice) == [Some(true), Some(true)]).then_some(slice)
    })
    .await;
    let port = good
        .ports
        .as_ref()
        .and_then(|p| p.first())
        .cloned()
        .expect("a port");
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("web"), Some(8080)),
        "targetPort resolved by name"
    );
    let owner = &good.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Service", "good")
    );

    common::eventually("two unready endpoints for bad", || async {
        let slice = slice_of(&client, "bad").await?;
        (ready_flags(&slice) == [Some(false), Some(false)]).then_some(())
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let status = deployments
        .get("bad")
        .await
        .expect("read")
        .status
        .expect("a status");
    let available = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_.as_deref() == Some("Available"));
    assert_eq!(available.and_then(|c| c.status).as_deref(), Some("False"));
    assert_eq!(
        (status.replicas, status.available_replicas),
        (Some(2), Some(0))
    );

    // A rollout to a ready image replaces them; the old pods go once the new
    // ones are ready.
    deployments
        .patch("bad", &PatchParams::default(), &Patch::Merge(json!({"spec": {"template": {"spec": {
            "containers": [{"name": "app", "image": "registry.example/bad:fixed", "ports": [{"name": "http", "containerPort": 8080}]}]}}}})))
        .await
        .expect("patched");
    common::eventually("two ready endpoints for bad", || async {
        let slice = slice_of(&client, "bad").await?;
        (ready_flags(&slice) == [Some(true), Some(true)]).then_some(())
    })
    .await;
    common::eventually("only the new pods", || async {
        let pods = pods_of(&client, "bad").await;
        (pods.len() == 2 && pods.iter().all(is_ready)).then_some(())
    })
    .await;

    // Deleting a Service takes its slice along.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    services
        .delete("good", &DeleteParams::default())
        .await
        .expect("deleted");
    common::eventually("the slice gone", || async {
        slice_of(&client, "good").await.is_none().then_some(())
    })
    .await;
    cluster.stop().await;
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_shows_pull_errors() {
    let cluster = realistic("realistic-pull").await;
    let client = cluster.client.clone();
    let _: Deployment = create(
        &client,
        deployment("ghost", 1, "registry.example/ghost:missing"),
    )
    .await;
    for reason in ["ErrImagePull", "ImagePullBackOff", "ErrImagePull"] {
        common::eventually(reason, || async {
            let pods = pods_of(&client, "ghost").await;
            (pods.len() == 1 && waiting_reason(&pods[0]).as_deref() == Some(reason)).then_some(())
        })
        .await;
    }
    let pod = pods_of(&client, "ghost").await.remove(0);
    assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let status = deployments
        .get("ghost")
        .await
        .expect("read")
        .status
        .expect("a status");
    assert_eq!(status.available_replicas, Some(0));
    cluster.stop().await;
}

fn job(name: &str, image: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 2, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "hook", "image": image}]}}}})
}

#[tokio::test]
async fn jobs_complete_or_fail_and_claims_bind() {
    let cluster = realistic("realistic-jobs").await;
    let client = cluster.client.clone();
    let _: Job = create(&client, job("export", "registry.example/export:slow")).await;
    let _: Job = create(&client, job("import", "registry.example/migrate:fails")).await;
    let _: Job = create(&client, job("pull", "registry.example/hook:missing")).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let condition = |name: &'static str, type_: &'static str| {
        let jobs = jobs.clone();
        async move {
            let status = jobs.get(name).await.ok()?.status?;
            let found = status
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == type_ && c.status == "True");
            found.then_some(status)
        }
    };
    let done = common::eventually("export complete", || condition("export", "Complete")).await;
    assert_eq!((done.succeeded, done.active), (Some(1), Some(0)));
    assert!(done.completion_time.is_some());
    let failed = common::eventually("import failed", || condition("import", "Failed")).await;
    assert_eq!(failed.failed, Some(3), "backoffLimit + 1 attempts");
    common::eventually("pull failed", || condition("pull", "Failed")).await;

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let _: PersistentVolumeClaim = create(
        &client,
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    let bound = common::eventually("the claim bound", || async {
        let status = claims.get("data").await.ok()?.status?;
        (status.phase.as_deref() == Some("Bound")).then_some(status)
    })
    .await;
    assert_eq!(
        bound
            .capacity
            .and_then(|c| c.get("storage").cloned())
            .map(|q| q.0)
            .as_deref(),
        Some("1Gi")
    );
    cluster.stop().await;
}

#[tokio::test]
async fn statefulset_pods_are_ordinal_and_scale_down_from_the_top() {
    let cluster = realistic("realistic-sts").await;
    let client = cluster.client.clone();
    let _: StatefulSet = create(&client, json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db"}, "spec": {"replicas": 3, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}]}}))
    .await;
    let names = |pods: &[Pod]| -> Vec<String> {
        pods.iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };
    common::eventually("three ready ordinal pods", || async {
        let pods = pods_of(&client, "db").await;
        (names(&pods) == ["db-0", "db-1", "db-2"] && pods.iter().all(is_ready)).then_some(())
    })
    .await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    common::eventually("status ready", || async {
        let status = sets.get("db").await.ok()?.status?;
        (status.ready_replicas == Some(3) && status.updated_replicas == Some(3)).then_some(())
    })
    .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    for claim in ["data-db-0", "data-db-1", "data-db-2"] {
        let phase = claims
            .get(claim)
            .await
            .expect(claim)
            .status
            .and_then(|s| s.phase);
        assert_eq!(phase.as_deref(), Some("Bound"), "{claim}");
    }
    sets.patch_scale(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .expect("scaled");
    common::eventually("the highest ordinal removed", || async {
        (names(&pods_of(&client, "db").await) == ["db-0", "db-1"]).then_some(())
    })
    .await;
    assert!(claims.get("data-db-2").await.is_ok(), "claims are retained");
    cluster.stop().await;
}

#[tokio::test]
async fn the_instant_mode_makes_no_pods() {
    let cluster = common::start("instant").await;
    assert!(!cluster.sandbox.kubelet().is_realistic());
    let client = cluster.client.clone();
    let _: Deployment = create(
        &client,
        deployment("web", 2, "registry.example/web:unready"),
    )
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    common::eventually("available without pods", || async {
        let status = deployments.get("web").await.ok()?.status?;
        (status.available_replicas == Some(2)).then_some(())
    })
    .await;
    assert!(pods_of(&client, "web").await.is_empty());
    cluster.stop().await;
}

#[tokio::test]
async fn the_instant_mode_keeps_slices_of_ready_replicas_unless_the_controller_is_down() {
    let cluster = common::start("instant-slices").await;
    let client = cluster.client.clone();
    let _: Service = create(&client, service("web", "web")).await;
    let _: Deployment = create(&client, deployment("web", 2, "registry.example/web:1")).await;
    let slice = common::eventually("two ready endpoints", || async {
        let slice = slice_of(&client, "web").await?;
        (slice.endpoints.iter().flatten().count() == 2).then_some(slice)
    })
    .await;
    for endpoint in slice.endpoints.iter().flatten() {
        let ready = endpoint.conditions.as_ref().and_then(|c| c.ready);
        assert_eq!(ready, Some(true));
        assert!(endpoint.target_ref.is_none(), "there is no pod to point at");
    }
    assert_eq!(
        slice.ports.iter().flatten().next().and_then(|p| p.port),
        Some(8080)
    );

    // The controller down: a new Service gets nothing until it is back.
    cluster.sandbox.kubelet().set_endpoints(false);
    let _: Service = create(&client, service("web-2", "web")).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(slice_of(&client, "web-2").await.is_none());
    cluster.sandbox.kubelet().set_endpoints(true);
    common::eventually("the slice once the controller is back", || async {
        let slice = slice_of(&client, "web-2").await?;
        (slice.endpoints.iter().flatten().count() == 2).then_some(())
    })
    .await;
    cluster.stop().await;
}
