//! A `ClusterPeer` (cluster-scoped) pointing at Secrets outside the
//! operator's namespace: refused with a condition naming the field, and the
//! operator's ServiceAccount never asks the API server for them. The sandbox
//! records every request RBAC allowed (`FERRY_SANDBOX_AUTHZ_LOG`); the chart
//! grants the operator `get` on Secrets cluster-wide, so a read would be
//! allowed and would show in the record.
//!
//! The only test in this file: it sets the recording variable for the whole
//! process before any sandbox (or other thread) starts.

mod support;

use std::path::Path;
use std::time::Duration;

use ferry::controller::prometheus::ClusterPrometheus;
use ferry::crd::{
    ClusterPeer, PrometheusEndpoint as PeerPrometheus, SecretKeyRef, find_condition, types,
};
use ferry::metrics::{MetricsSource, PrometheusConfig, PrometheusEndpoint};
use ferry::peers::{PeerContext, PeerSet, reasons, run_peer_controller};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use support::cluster::world::peer_config;
use support::cluster::*;

const ELSEWHERE: &str = "tenant-secrets";

async fn put_secret(client: &kube::Client, namespace: &str, name: &str, key: &str, value: &str) {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {key: value},
    });
    api.patch(
        name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&secret),
    )
    .await
    .expect("Secret written");
}

/// Waits until peer `name`'s condition `kind` has `status` and `reason`, and
/// returns its message.
async fn wait_condition(
    client: &kube::Client,
    name: &str,
    kind: &str,
    status: &str,
    reason: &str,
) -> String {
    let api: Api<ClusterPeer> = Api::all(client.clone());
    eventually(&format!("{name} {kind}={status} ({reason})"), WAIT, || {
        let api = api.clone();
        async move {
            let peer = api.get(name).await.ok()?;
            let c = find_condition(&peer.status.as_ref()?.conditions, kind)?;
            (c.status == status && c.reason == reason).then(|| c.message.clone())
        }
    })
    .await
}

/// The Secret requests the operator's ServiceAccount made, as
/// `(verb, namespace)`, from every record file of the sandbox `cluster`.
fn secret_requests(dir: &Path, cluster: &str) -> Vec<(String, String)> {
    let operator = format!("system:serviceaccount:{FERRY_NAMESPACE}:ferry");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("record directory") {
        let path = entry.expect("record file").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !name.ends_with(&format!("-{cluster}.jsonl")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("record readable");
        for line in text.lines() {
            let record: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            if record["user"] == operator.as_str() && record["resource"] == "secrets" {
                found.push((
                    record["verb"].as_str().unwrap_or_default().to_owned(),
                    record["namespace"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    found
}

#[test]
fn secrets_outside_the_operators_namespace_are_refused_unread() {
    let record = tempfile::tempdir().expect("record directory");
    // SAFETY: no other thread of this process exists yet that could read
    // the environment concurrently (this is the binary's only test, and the
    // runtime below is built after this line).
    unsafe { std::env::set_var("FERRY_SANDBOX_AUTHZ_LOG", record.path()) };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(refused_unread(record.path()));
}

async fn refused_unread(record: &Path) {
    let clusters = start_clusters(&["scopehome", "scopeeast"], Duration::from_millis(20)).await;
    let (home, east) = (&clusters[0], &clusters[1]);
    ensure_namespace(&home.client, ELSEWHERE).await;
    let kubeconfig = east.peer_kubeconfig("scopehome");
    // Usable Secrets, so only the namespace rule can refuse them.
    put_secret(
        &home.client,
        ELSEWHERE,
        "east-kubeconfig",
        "kubeconfig",
        &kubeconfig,
    )
    .await;
    put_secret(&home.client, ELSEWHERE, "prom-token", "token", "t").await;

    let mut far_kubeconfig = peer_spec("far", false);
    far_kubeconfig.kubeconfig_secret_ref = Some(SecretKeyRef {
        namespace: ELSEWHERE.into(),
        name: "east-kubeconfig".into(),
        key: "kubeconfig".into(),
    });
    let api: Api<ClusterPeer> = Api::all(home.client.clone());
    api.patch(
        "far",
        &PatchParams::apply("test").force(),
        &Patch::Apply(&ClusterPeer::new("far", far_kubeconfig)),
    )
    .await
    .expect("ClusterPeer far");
    let mut far_token = peer_spec("near", false);
    far_token.prometheus = Some(PeerPrometheus {
        url: "https://prometheus.invalid".into(),
        cluster_label: None,
        bearer_token_secret_ref: Some(SecretKeyRef {
            namespace: ELSEWHERE.into(),
            name: "prom-token".into(),
            key: "token".into(),
        }),
        ca_secret_ref: None,
    });
    add_peer(&home.client, "near", &kubeconfig, far_token).await;

    let peers = PeerSet::new();
    let controller = Task::spawn(run_peer_controller(PeerContext {
        client: home.ferry.clone(),
        peers: peers.clone(),
        config: peer_config(),
    }));
    let message = wait_condition(
        &home.client,
        "far",
        types::CONNECTED,
        "False",
        reasons::SECRET_OUTSIDE_NAMESPACE,
    )
    .await;
    assert!(
        message.contains("spec.kubeconfigSecretRef.namespace"),
        "{message}"
    );
    assert!(peers.get("far").expect("known").client.is_none());
    // The kubeconfig in Ferry's namespace connects; the token elsewhere
    // keeps the peer from Ready.
    wait_condition(
        &home.client,
        "near",
        types::CONNECTED,
        "True",
        reasons::REACHABLE,
    )
    .await;
    let message = wait_condition(
        &home.client,
        "near",
        types::READY,
        "False",
        reasons::SECRET_OUTSIDE_NAMESPACE,
    )
    .await;
    assert!(
        message.contains("spec.prometheus.bearerTokenSecretRef.namespace"),
        "{message}"
    );
    // The metrics reader refuses it too, before reading.
    let metrics = ClusterPrometheus::new(
        home.ferry.clone(),
        FERRY_NAMESPACE,
        "scopehome",
        PrometheusEndpoint {
            url: "https://own.invalid".into(),
            ..PrometheusEndpoint::default()
        },
        peers.clone(),
        PrometheusConfig::default(),
    );
    let error = metrics
        .cluster("near", jiff::Timestamp::now())
        .await
        .expect_err("a token Secret outside the operator's namespace");
    assert!(
        error
            .to_string()
            .contains("spec.prometheus.bearerTokenSecretRef.namespace"),
        "{error}"
    );

    let requests = secret_requests(record, "scopehome");
    assert!(
        requests.iter().any(|(_, ns)| ns == FERRY_NAMESPACE),
        "the record holds the operator's reads in its own namespace: {requests:?}"
    );
    assert!(
        requests.iter().all(|(_, ns)| ns != ELSEWHERE),
        "the operator asked for a Secret in {ELSEWHERE}: {requests:?}"
    );
    controller.stop().await;
    for c in clusters {
        c.shutdown().await;
    }
}
