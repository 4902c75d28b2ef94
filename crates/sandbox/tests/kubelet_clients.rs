//! The realistic kubelet driven by kubectl (whose create subcommands send
//! protobuf), and fed odd objects and a workload larger than one pass.

mod common;

use common::kubelet::{create, deployment, is_ready, kubectl, pods_of, realistic};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde_json::json;

#[tokio::test]
async fn kubectl_creates_the_new_kinds_in_protobuf_and_waits_for_them() {
    let cluster = realistic("realistic-kubectl").await;
    // kubectl's create subcommands send protobuf bodies.
    kubectl(
        &cluster,
        &["create", "job", "hook", "--image=registry.example/hook:1"],
    )
    .await;
    kubectl(
        &cluster,
        &[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=1",
        ],
    )
    .await;
    kubectl(
        &cluster,
        &[
            "create",
            "deployment",
            "web",
            "--image=registry.example/web:1",
            "--replicas=2",
        ],
    )
    .await;
    kubectl(
        &cluster,
        &[
            "expose",
            "deployment",
            "web",
            "--port=80",
            "--target-port=8080",
        ],
    )
    .await;
    kubectl(
        &cluster,
        &[
            "wait",
            "--for=condition=complete",
            "job/hook",
            "--timeout=120s",
        ],
    )
    .await;
    kubectl(
        &cluster,
        &["rollout", "status", "deployment/web", "--timeout=120s"],
    )
    .await;
    let pods = kubectl(&cluster, &["get", "pods", "-l", "app=web", "-o", "name"]).await;
    assert_eq!(pods.lines().count(), 2, "{pods}");
    let endpoints = kubectl(
        &cluster,
        &[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "jsonpath={.items[0].endpoints[*].conditions.ready}",
        ],
    )
    .await;
    assert_eq!(endpoints, "true true");
    let resources = kubectl(&cluster, &["api-resources", "-o", "name"]).await;
    for name in [
        "pods",
        "statefulsets.apps",
        "jobs.batch",
        "endpointslices.discovery.k8s.io",
        "persistentvolumeclaims",
        "horizontalpodautoscalers.autoscaling",
    ] {
        assert!(
            resources.lines().any(|l| l == name),
            "{name} in {resources}"
        );
    }
    cluster.stop().await;
}

#[tokio::test]
async fn odd_objects_and_huge_workloads_do_not_stall_the_kubelet() {
    let cluster = realistic("realistic-abuse").await;
    let client = cluster.client.clone();
    // Objects whose fields have the wrong shape, written as raw JSON. The
    // sandbox stores them (it does not check built-in kinds' field types);
    // were it to refuse them, the rest of the test still holds.
    let odd = [
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "odd"}, "spec": {"containers": "nope"}}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "odd"}, "spec": {"selector": {"app": 7}, "ports": [{"port": "x", "targetPort": []}]}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/statefulsets",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "odd"}, "spec": {"replicas": 2, "template": "nope", "volumeClaimTemplates": [{}]}}),
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "odd"}, "spec": {"completions": "all", "template": {"spec": {"containers": [{"image": 5}]}}}}),
        ),
    ];
    for (path, body) in odd {
        let request = http::Request::post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).expect("JSON"))
            .expect("a request");
        // Accepted or refused: either way the kubelet must keep going.
        let _ = client.request_text(request).await;
    }
    // A workload asking for more pods than one pass makes.
    let _: Deployment = create(&client, deployment("many", 1200, "registry.example/many:1")).await;
    let _: Deployment = create(&client, deployment("after", 1, "registry.example/after:1")).await;
    common::eventually("the later deployment ready", || async {
        let pods = pods_of(&client, "after").await;
        (pods.len() == 1 && pods.iter().all(is_ready)).then_some(())
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    common::eventually("1200 replicas ready", || async {
        let status = deployments.get("many").await.ok()?.status?;
        (status.ready_replicas == Some(1200)).then_some(())
    })
    .await;
    assert_eq!(pods_of(&client, "many").await.len(), 1200);
    cluster.stop().await;
}
