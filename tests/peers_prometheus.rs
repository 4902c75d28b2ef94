//! A peer's plain-http Prometheus against a real Prometheus behind a
//! recording proxy: refused without `spec.insecure.plainHTTP`, its bearer
//! token never sent without `credentialsOverPlainHTTP` as well, and the
//! peer's `Ready` condition names the switch. The operator's own
//! `--prometheus` follows the same rule for its token.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry::controller::prometheus::ClusterPrometheus;
use ferry::crd::{ClusterPeer, PrometheusEndpoint as PeerPrometheus, find_condition, types};
use ferry::metrics::{MetricsSource, PrometheusConfig, PrometheusEndpoint};
use ferry::peers::{PeerContext, PeerSet, reasons, run_peer_controller};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use support::cluster::world::peer_config;
use support::cluster::*;
use support::prometheus::Prometheus;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "peer-prometheus-token-9f3a";

/// A TCP proxy in front of Prometheus that keeps every byte clients send.
struct RecordingProxy {
    url: String,
    seen: Arc<Mutex<Vec<u8>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl RecordingProxy {
    async fn start(upstream: &str) -> RecordingProxy {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let (record, upstream) = (record.clone(), upstream.clone());
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (mut in_read, mut in_write) = inbound.into_split();
                    let (mut out_read, mut out_write) = outbound.into_split();
                    let answers = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut out_read, &mut in_write).await;
                    });
                    let mut buffer = [0u8; 8192];
                    while let Ok(n @ 1..) = in_read.read(&mut buffer).await {
                        record
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .extend_from_slice(&buffer[..n]);
                        if out_write.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                    }
                    answers.abort();
                });
            }
        });
        RecordingProxy { url, seen, accept }
    }

    fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Waits until peer `name`'s Ready condition has `status` and `reason` and
/// a message holding `naming` (a spec update keeps the reason and changes
/// the message).
async fn wait_ready(client: &kube::Client, name: &str, status: &str, reason: &str, naming: &str) {
    let api: Api<ClusterPeer> = Api::all(client.clone());
    eventually(
        &format!("{name} Ready={status} ({reason}) naming {naming}"),
        WAIT,
        || {
            let api = api.clone();
            async move {
                let peer = api.get(name).await.ok()?;
                let c = find_condition(&peer.status.as_ref()?.conditions, types::READY)?;
                (c.status == status && c.reason == reason && c.message.contains(naming))
                    .then_some(())
            }
        },
    )
    .await
}

/// Writes `ferry/prom-token` holding [`TOKEN`].
async fn put_token_secret(client: &kube::Client) {
    let api: Api<Secret> = Api::namespaced(client.clone(), FERRY_NAMESPACE);
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "prom-token", "namespace": FERRY_NAMESPACE},
        "stringData": {"token": TOKEN},
    });
    api.patch(
        "prom-token",
        &PatchParams::apply("test").force(),
        &Patch::Apply(&secret),
    )
    .await
    .expect("token Secret written");
}

fn config() -> PrometheusConfig {
    PrometheusConfig {
        timeout: Duration::from_secs(30),
        ..PrometheusConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_prometheus_gets_no_token_without_both_switches() {
    let prometheus = Prometheus::start(&[]);
    let proxy = RecordingProxy::start(prometheus.url()).await;
    let clusters = start_clusters(&["home", "east"], Duration::from_millis(20)).await;
    let (home, east) = (&clusters[0], &clusters[1]);
    put_token_secret(&home.client).await;
    let mut spec = peer_spec("east", false);
    spec.prometheus = Some(PeerPrometheus {
        url: proxy.url.clone(),
        cluster_label: None,
        bearer_token_secret_ref: Some(ferry::crd::SecretKeyRef {
            namespace: FERRY_NAMESPACE.into(),
            name: "prom-token".into(),
            key: "token".into(),
        }),
        ca_secret_ref: None,
    });
    add_peer(
        &home.client,
        "east",
        &east.peer_kubeconfig("home"),
        spec.clone(),
    )
    .await;
    let peers = PeerSet::new();
    let controller = Task::spawn(run_peer_controller(PeerContext {
        client: home.ferry.clone(),
        peers: peers.clone(),
        config: peer_config(),
    }));
    // The shared Prometheus of this cluster, without a token: not involved.
    let own = PrometheusEndpoint {
        url: "https://own.invalid".into(),
        ..PrometheusEndpoint::default()
    };
    let metrics = ClusterPrometheus::new(
        home.ferry.clone(),
        FERRY_NAMESPACE,
        "home",
        own,
        peers.clone(),
        config(),
    );
    let metrics = &metrics;
    let read = move || async move { metrics.cluster("east", jiff::Timestamp::now()).await };

    // No switch: plain http itself is refused, by the condition and the reader.
    wait_ready(
        &home.client,
        "east",
        "False",
        reasons::INSECURE_PROMETHEUS,
        "spec.insecure.plainHTTP ",
    )
    .await;
    let error = read().await.expect_err("plain http without the switch");
    assert!(
        error.to_string().contains("spec.insecure.plainHTTP"),
        "{error}"
    );

    // plainHTTP only: the token is still refused, naming the other switch.
    spec.insecure.plain_http = true;
    add_peer(
        &home.client,
        "east",
        &east.peer_kubeconfig("home"),
        spec.clone(),
    )
    .await;
    wait_ready(
        &home.client,
        "east",
        "False",
        reasons::INSECURE_PROMETHEUS,
        "spec.insecure.credentialsOverPlainHTTP",
    )
    .await;
    eventually("the reader sees plainHTTP", WAIT, || {
        let spec = peers.get("east").map(|p| p.spec.insecure.plain_http);
        async move { (spec == Some(true)).then_some(()) }
    })
    .await;
    let error = read().await.expect_err("a token over plain http");
    assert!(
        error.to_string().contains("credentialsOverPlainHTTP"),
        "{error}"
    );
    assert!(
        !proxy.seen().contains(TOKEN),
        "the token reached the plain-http Prometheus: {}",
        proxy.seen()
    );

    // Both switches: the token goes, and the proxy does see it, so the
    // assertions above would have caught a leak.
    spec.insecure.credentials_over_plain_http = true;
    add_peer(&home.client, "east", &east.peer_kubeconfig("home"), spec).await;
    wait_ready(&home.client, "east", "True", reasons::PEER_READY, "usable").await;
    eventually("the token travels once both switches are set", WAIT, || {
        let read = read();
        let proxy = &proxy;
        async move {
            read.await.ok()?;
            proxy.seen().contains(TOKEN).then_some(())
        }
    })
    .await;

    controller.stop().await;
    for c in clusters {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_own_token_is_not_sent_over_plain_http_unless_allowed() {
    let prometheus = Prometheus::start(&[]);
    let proxy = RecordingProxy::start(prometheus.url()).await;
    let clusters = start_clusters(&["home"], Duration::from_millis(20)).await;
    let home = &clusters[0];
    let own = |allowed: bool| PrometheusEndpoint {
        url: proxy.url.clone(),
        bearer_token: Some(TOKEN.into()),
        allow_token_over_plain_http: allowed,
        ..PrometheusEndpoint::default()
    };
    let source = |allowed: bool| {
        ClusterPrometheus::new(
            home.ferry.clone(),
            FERRY_NAMESPACE,
            "home",
            own(allowed),
            PeerSet::new(),
            config(),
        )
    };
    let refused = source(false).cluster("home", jiff::Timestamp::now()).await;
    assert!(
        matches!(
            refused,
            Err(ferry::metrics::Error::TokenOverPlainHttp { .. })
        ),
        "{refused:?}"
    );
    assert!(!proxy.seen().contains(TOKEN), "{}", proxy.seen());
    source(true)
        .cluster("home", jiff::Timestamp::now())
        .await
        .expect("allowed explicitly");
    assert!(
        proxy.seen().contains(TOKEN),
        "the proxy records what it forwards"
    );
    for c in clusters {
        c.shutdown().await;
    }
}

/// The API server refuses what the schema says: `credentialsOverPlainHTTP`
/// without `plainHTTP` (CEL), and the removed `allowInsecure` under strict
/// field validation (what `kubectl apply` asks for by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_refuses_a_lone_credentials_switch_and_allow_insecure() {
    let clusters = start_clusters(&["home"], Duration::from_millis(20)).await;
    let api: Api<ClusterPeer> = Api::all(clusters[0].client.clone());
    let mut spec = serde_json::to_value(peer_spec("p", false)).expect("spec");
    spec["insecure"] = serde_json::json!({"credentialsOverPlainHTTP": true});
    let object = serde_json::json!({
        "apiVersion": "ferry.dev/v1alpha1", "kind": "ClusterPeer",
        "metadata": {"name": "p"}, "spec": spec,
    });
    let refused = api
        .patch(
            "p",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&object),
        )
        .await
        .expect_err("credentialsOverPlainHTTP without plainHTTP");
    assert!(
        refused
            .to_string()
            .contains("credentialsOverPlainHTTP needs plainHTTP"),
        "{refused}"
    );

    let mut spec = serde_json::to_value(peer_spec("q", false)).expect("spec");
    spec["allowInsecure"] = true.into();
    let object = serde_json::json!({
        "apiVersion": "ferry.dev/v1alpha1", "kind": "ClusterPeer",
        "metadata": {"name": "q"}, "spec": spec,
    });
    let mut strict = PatchParams::apply("test").force();
    strict.field_validation = Some(kube::api::ValidationDirective::Strict);
    let refused = api
        .patch("q", &strict, &Patch::Apply(&object))
        .await
        .expect_err("allowInsecure is not a field any more");
    assert!(refused.to_string().contains("allowInsecure"), "{refused}");
    for c in clusters {
        c.shutdown().await;
    }
}
