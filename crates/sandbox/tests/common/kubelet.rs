//! Helpers of the kubelet tests: the realistic mode's rules, workloads
//! written as JSON, and reads of their pods and EndpointSlices.

use std::time::Duration;

use ferry_sandbox::{Exit, ImageRule, KubeletRules, Pull, Readiness};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::Cluster;

pub fn rules() -> KubeletRules {
    let rule = |image: &str| ImageRule::new(image);
    KubeletRules {
        rules: vec![
            ImageRule {
                start_delay: Some(Duration::from_millis(400)),
                ..rule("*:slow")
            },
            ImageRule {
                readiness: Readiness::Never,
                ..rule("*:unready")
            },
            ImageRule {
                pull: Pull::Fail,
                ..rule("registry.example/*:missing")
            },
            ImageRule {
                exit: Exit::Fail,
                ..rule("*/migrate:fails")
            },
        ],
    }
}

pub async fn realistic(name: &str) -> Cluster {
    let cluster = super::start(name).await;
    cluster.sandbox.kubelet().set_realistic(rules());
    cluster
}

pub async fn create<K>(client: &Client, object: Value) -> K
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), "default");
    let object: K = serde_json::from_value(object).expect("a valid object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("created")
}

pub fn deployment(name: &str, replicas: i32, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                {"name": "app", "image": image, "ports": [{"name": "http", "containerPort": 8080}]}]}}}})
}

pub fn service(name: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"selector": {"app": app}, "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}})
}

pub async fn pods_of(client: &Client, app: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await;
    list.expect("pods are listed").items
}

pub fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

pub fn waiting_reason(pod: &Pod) -> Option<String> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

pub async fn slice_of(client: &Client, service: &str) -> Option<EndpointSlice> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let selector = format!("kubernetes.io/service-name={service}");
    let list = api
        .list(&ListParams::default().labels(&selector))
        .await
        .ok()?;
    list.items.into_iter().next()
}

/// The pinned kubectl, run on a blocking thread; its stdout, or a panic
/// with what it said.
pub async fn kubectl(cluster: &Cluster, args: &[&str]) -> String {
    let kubeconfig = cluster.kubeconfig_path();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let binary = super::kubectl();
        let home = kubeconfig
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default();
        let output = std::process::Command::new(&binary)
            .args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", home)
            .output()
            .unwrap_or_else(|e| panic!("{} does not run: {e}", binary.display()));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {stdout}{stderr}"
        );
        stdout
    })
    .await
    .expect("kubectl thread")
}
