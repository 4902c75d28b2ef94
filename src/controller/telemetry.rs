//! The operator's own metrics and probes: `/metrics` (Prometheus text),
//! `/healthz` (the process serves) and `/readyz` (it has started its
//! controllers or is a standby replica ready to take over).
//! It never touches the cluster; `gauges.rs` reads it for the gauges.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::migration::ReceiverMetrics;

/// A policy, by the namespace and name of its `MigrationPolicy`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct PolicyLabels {
    pub namespace: String,
    pub name: String,
}

impl PolicyLabels {
    pub fn new(namespace: &str, name: &str) -> Self {
        PolicyLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The labels of the policy `namespace/name` (a namespace never holds
    /// a `/`, so the first one separates the two).
    pub fn from_key(key: &str) -> Self {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        Self::new(namespace, name)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    #[prometheus(flatten)]
    pub policy: PolicyLabels,
    /// `accepted`, `would_migrate`, `not_started` or `refused`.
    pub outcome: String,
    pub mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    #[prometheus(flatten)]
    pub policy: PolicyLabels,
    /// The policy error class, or `invalid_spec`, `metrics`, `module`, `api`.
    pub class: String,
}

/// How this binary was built, as the build script recorded it: what
/// `ferry version` prints and `ferry_build_info` labels.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildInfo {
    pub version: &'static str,
    /// The commit built, when the build knew it (a git checkout built in
    /// release mode, or `FERRY_GIT_COMMIT` set at build time).
    pub git_commit: Option<&'static str>,
    pub rustc: &'static str,
    pub target: &'static str,
    pub profile: &'static str,
}

/// This binary's build.
pub const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    git_commit: option_env!("FERRY_BUILD_GIT_COMMIT"),
    rustc: env!("FERRY_BUILD_RUSTC"),
    target: env!("FERRY_BUILD_TARGET"),
    profile: env!("FERRY_BUILD_PROFILE"),
};

/// What `ferry_build_info` says of the running binary.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    commit: String,
    rustc: String,
}

impl BuildLabels {
    /// This binary's, with `unknown` for a commit the build did not know.
    fn of_this_build() -> Self {
        BuildLabels {
            version: BUILD.version.to_owned(),
            commit: BUILD.git_commit.unwrap_or("unknown").to_owned(),
            rustc: BUILD.rustc.to_owned(),
        }
    }
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
    /// Per policy: the hourly saving its completed moves realise, as
    /// [`super::gauges::realised_savings`] defines it.
    pub realised_savings: Family<PolicyLabels, Gauge<f64, AtomicU64>>,
    pub peer_connected: Family<PeerLabels, Gauge>,
    pub leader: Gauge,
    /// The migration receiver's counters (refusals by peer and reason).
    pub receiver: ReceiverMetrics,
    ready: AtomicBool,
    /// Where `/metrics` is served, once bound.
    address: OnceLock<SocketAddr>,
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
        let realised_savings = Family::<PolicyLabels, Gauge<f64, AtomicU64>>::default();
        let peer_connected = Family::<PeerLabels, Gauge>::default();
        let leader = Gauge::default();
        let receiver = ReceiverMetrics::default();
        receiver.register(registry);
        registry.register(
            "build",
            "The running binary: its version, commit and compiler (value 1)",
            Info::new(BuildLabels::of_this_build()),
        );
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
            "realised_hourly_savings",
            "Per policy, the hourly saving its decisions estimated for the moves this cluster completed and still records, one per workload (the latest), excluding dry runs and Keep moves",
            realised_savings.clone(),
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
        // The process metrics keep their conventional, unprefixed names.
        root.register_collector(Box::new(super::process::ProcessCollector));
        Telemetry {
            registry: root,
            cycle_seconds,
            evaluation_seconds,
            evaluation_memory,
            decisions,
            errors,
            migrations,
            realised_savings,
            peer_connected,
            leader,
            receiver,
            ready: AtomicBool::new(false),
            address: OnceLock::new(),
        }
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Where `/metrics`, `/healthz` and `/readyz` are served, once the
    /// operator has bound its address (a port of 0 gets a free one).
    pub fn address(&self) -> Option<SocketAddr> {
        self.address.get().copied()
    }

    pub(crate) fn set_address(&self, address: SocketAddr) {
        let _ = self.address.set(address);
    }

    pub fn count_error(&self, policy: &PolicyLabels, class: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                policy: policy.clone(),
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
