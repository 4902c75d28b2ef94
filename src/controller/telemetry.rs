//! The operator's own metrics and probes: `/metrics` (Prometheus text),
//! `/healthz` (the process serves) and `/readyz` (it has started its
//! controllers or is a standby replica ready to take over).
//! It only reads the cluster, for its gauges; it never writes to it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use kube::Api;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::crd::WorkloadMigration;
use crate::migration::ReceiverMetrics;
use crate::peers::PeerSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    pub policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub policy: String,
    /// `accepted`, `would_migrate` or `refused`.
    pub outcome: String,
    pub mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub policy: String,
    /// The policy error class, or `invalid_spec`, `metrics`, `module`, `api`.
    pub class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerLabels {
    pub peer: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Every metric Ferry exports, under the prefix `ferry`.
pub struct Telemetry {
    registry: Registry,
    pub cycle_seconds: HistogramFamily<PolicyLabels>,
    pub evaluation_seconds: HistogramFamily<PolicyLabels>,
    pub evaluation_memory: Family<PolicyLabels, Gauge>,
    pub decisions: Family<DecisionLabels, Counter>,
    pub errors: Family<ErrorLabels, Counter>,
    pub migrations: Family<PhaseLabels, Gauge>,
    pub peer_connected: Family<PeerLabels, Gauge>,
    pub leader: Gauge,
    /// The migration receiver's counters (refusals by peer and reason).
    pub receiver: ReceiverMetrics,
    ready: AtomicBool,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

impl Telemetry {
    pub fn new() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("ferry");
        let cycle_seconds: HistogramFamily<PolicyLabels> =
            Family::new_with_constructor(duration_histogram);
        let evaluation_seconds: HistogramFamily<PolicyLabels> =
            Family::new_with_constructor(duration_histogram);
        let evaluation_memory = Family::<PolicyLabels, Gauge>::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let migrations = Family::<PhaseLabels, Gauge>::default();
        let peer_connected = Family::<PeerLabels, Gauge>::default();
        let leader = Gauge::default();
        let receiver = ReceiverMetrics::default();
        receiver.register(registry);
        registry.register(
            "cycle_duration_seconds",
            "Duration of a policy cycle",
            cycle_seconds.clone(),
        );
        registry.register(
            "evaluation_duration_seconds",
            "Duration of a policy module's evaluation",
            evaluation_seconds.clone(),
        );
        registry.register(
            "evaluation_memory_bytes",
            "Linear memory the policy module held in its last evaluation, initial memory included",
            evaluation_memory.clone(),
        );
        registry.register(
            "decisions",
            "Policy decisions by outcome and mode",
            decisions.clone(),
        );
        registry.register(
            "errors",
            "Failed cycles by policy and error class",
            errors.clone(),
        );
        registry.register(
            "migrations",
            "WorkloadMigrations of this cluster by phase",
            migrations.clone(),
        );
        registry.register(
            "peer_connected",
            "1 when a peer cluster is connected",
            peer_connected.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica is the leader",
            leader.clone(),
        );
        Telemetry {
            registry: root,
            cycle_seconds,
            evaluation_seconds,
            evaluation_memory,
            decisions,
            errors,
            migrations,
            peer_connected,
            leader,
            receiver,
            ready: AtomicBool::new(false),
        }
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub fn count_error(&self, policy: &str, class: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                policy: policy.to_owned(),
                class: class.to_owned(),
            })
            .inc();
    }

    /// The registry in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` until the task
/// is dropped.
pub async fn serve(listener: TcpListener, telemetry: Arc<Telemetry>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let telemetry = telemetry.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let response = respond(request.uri().path(), &telemetry);
                    async move { Ok::<_, std::convert::Infallible>(response) }
                });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await;
        });
    }
}

/// Keeps the migration and peer gauges current.
pub(crate) async fn refresh_gauges(
    client: kube::Client,
    peers: PeerSet,
    telemetry: Arc<Telemetry>,
) {
    let migrations: Api<WorkloadMigration> = Api::all(client);
    let mut known_phases: Vec<String> = Vec::new();
    loop {
        if let Ok(list) = migrations.list(&Default::default()).await {
            let mut counts: BTreeMap<String, i64> =
                known_phases.iter().map(|p| (p.clone(), 0)).collect();
            for migration in list {
                let phase = migration
                    .status
                    .map(|s| format!("{:?}", s.phase))
                    .unwrap_or_else(|| "Pending".to_owned());
                *counts.entry(phase).or_default() += 1;
            }
            for (phase, count) in &counts {
                telemetry
                    .migrations
                    .get_or_create(&PhaseLabels {
                        phase: phase.clone(),
                    })
                    .set(*count);
            }
            known_phases = counts.into_keys().collect();
        }
        for peer in peers.all() {
            telemetry
                .peer_connected
                .get_or_create(&PeerLabels {
                    peer: peer.name.clone(),
                })
                .set(i64::from(peer.connected));
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}

/// Binds the probe and metrics address.
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await
}

fn respond(path: &str, telemetry: &Telemetry) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match path {
        "/metrics" => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            telemetry.encode(),
        ),
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
        "/readyz" if telemetry.ready.load(Ordering::Relaxed) => {
            (StatusCode::OK, "text/plain", "ready\n".to_owned())
        }
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "starting\n".to_owned(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}
