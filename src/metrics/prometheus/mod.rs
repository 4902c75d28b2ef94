//! Reading cost and load from Prometheus.
//!
//! Per cluster and cycle: one request holding every cluster value, plus, for
//! the operator's own cluster, one request holding every workload value,
//! whatever the number of nodes or workloads: each request combines the
//! overridable [`Queries`] with `or`, each value tagged by a label (so at
//! most 2 requests per cluster, retries aside). Clusters are read concurrently by
//! [`read`](crate::metrics::read). Each request has a
//! timeout and transient failures are retried with capped backoff.
//!
//! Never: one query per workload, or a number made up for a value Prometheus
//! did not give.

mod client;
mod queries;
mod range;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use jiff::Timestamp;
use prometheus_http_query::response::InstantVector;

pub use client::RetryPolicy;
pub use queries::{Queries, ValueQuery};
pub use range::{MAX_POINTS_PER_REQUEST, RangeSeries};

use self::client::{Endpoint, Settings};
use self::queries::{ClusterField, Part, VALUE_LABEL, WorkloadField, cluster_selector};
use super::sample::{self, Cell, Checked};
use super::{
    ClusterMetrics, Error, MetricsSource, Result, WorkloadKey, WorkloadMap, WorkloadMetrics,
};

/// Where one cluster's metrics are read. `ClusterPeer.spec.prometheus` maps
/// onto this.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PrometheusEndpoint {
    /// Base URL, e.g. `https://thanos.example.com/` (API paths are appended).
    pub url: String,
    /// Sent as `Authorization: Bearer …`.
    pub bearer_token: Option<String>,
    /// CA bundle (PEM) trusted for this endpoint instead of the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// For a Prometheus shared by several clusters: the label holding the
    /// cluster's name (`{cluster_selector}` expands to `LABEL="NAME"`).
    /// `None` for a Prometheus that holds only this cluster.
    pub cluster_label: Option<String>,
    /// Send `bearer_token` even when `url` is not https. Off by default:
    /// anyone on the path could read the token and reuse it. Whoever builds
    /// the endpoint sets it only from an explicit opt-in
    /// (`--prometheus-allow-token-over-http`,
    /// `ClusterPeer.spec.insecure.credentialsOverPlainHTTP`).
    pub allow_token_over_plain_http: bool,
}

impl PrometheusEndpoint {
    /// Refuses an endpoint that would send its bearer token over anything
    /// but https without `allow_token_over_plain_http`. Checked by every
    /// [`PrometheusSource`] before it builds a client.
    pub fn check_token_transport(&self) -> Result<()> {
        let https = self
            .url
            .trim()
            .get(..8)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
        if self.bearer_token.is_some() && !https && !self.allow_token_over_plain_http {
            return Err(Error::TokenOverPlainHttp {
                url: self.url.clone(),
            });
        }
        Ok(())
    }
}

impl std::fmt::Debug for PrometheusEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusEndpoint")
            .field("url", &self.url)
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("ca_pem", &self.ca_pem.as_ref().map(|p| p.len()))
            .field("cluster_label", &self.cluster_label)
            .field(
                "allow_token_over_plain_http",
                &self.allow_token_over_plain_http,
            )
            .finish()
    }
}

/// How a [`PrometheusSource`] queries.
#[derive(Clone, Debug, PartialEq)]
pub struct PrometheusConfig {
    pub queries: Queries,
    /// Per request (attempt), client side and passed to Prometheus.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// A sample older than this before the evaluation time is stale.
    pub freshness: Duration,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            queries: Queries::default(),
            timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            freshness: Duration::from_secs(180),
        }
    }
}

struct Target {
    endpoint: Endpoint,
    selector: String,
}

/// [`MetricsSource`] reading one Prometheus per cluster, or one shared
/// Prometheus with a cluster label, or a mix.
pub struct PrometheusSource {
    config: PrometheusConfig,
    settings: Settings,
    clusters: HashMap<String, Target>,
    /// Clusters whose configured carbon intensity query last gave no value,
    /// so that the warning is logged when a cluster's value goes missing,
    /// not on every read.
    carbon_missing: Mutex<HashSet<String>>,
}

impl PrometheusSource {
    /// A source for the given clusters. Clusters with the same URL, token and
    /// CA share one HTTP client (and its connections).
    pub fn new(
        config: PrometheusConfig,
        clusters: impl IntoIterator<Item = (String, PrometheusEndpoint)>,
    ) -> Result<Self> {
        type ClientKey = (String, Option<String>, Option<Vec<u8>>);
        let mut clients: HashMap<ClientKey, Endpoint> = HashMap::new();
        let mut targets = HashMap::new();
        for (name, ep) in clusters {
            // Before the shared-client lookup: a client another cluster was
            // allowed to build must not carry this one's token over http.
            ep.check_token_transport()?;
            let key = (ep.url.clone(), ep.bearer_token.clone(), ep.ca_pem.clone());
            let endpoint = match clients.get(&key) {
                Some(endpoint) => endpoint.clone(),
                None => {
                    let endpoint = Endpoint::new(&ep, config.timeout)?;
                    clients.insert(key, endpoint.clone());
                    endpoint
                }
            };
            let selector = cluster_selector(ep.cluster_label.as_deref(), &name);
            targets.insert(name, Target { endpoint, selector });
        }
        Ok(PrometheusSource {
            settings: Settings {
                timeout: config.timeout,
                retry: config.retry.clone(),
                requests: Arc::new(AtomicU64::new(0)),
            },
            config,
            clusters: targets,
            carbon_missing: Mutex::new(HashSet::new()),
        })
    }

    /// The queries this source expands templates with.
    pub(crate) fn queries(&self) -> &Queries {
        &self.config.queries
    }

    /// HTTP requests sent so far, retries included.
    pub fn requests_sent(&self) -> u64 {
        self.settings.requests.load(Ordering::Relaxed)
    }

    fn target(&self, cluster: &str) -> Result<&Target> {
        self.clusters
            .get(cluster)
            .ok_or_else(|| Error::UnknownCluster(cluster.to_owned()))
    }

    /// Evaluates `template` (placeholders as in [`Queries`]) over
    /// `[start, end]` every `step` (whole seconds, at least one), in as many
    /// requests as the 11,000-points-per-series limit needs, one after the
    /// other; the series come back merged, each in time order.
    pub async fn query_range(
        &self,
        cluster: &str,
        template: &str,
        start: Timestamp,
        end: Timestamp,
        step: Duration,
    ) -> Result<Vec<RangeSeries>> {
        self.query_range_in_chunks(cluster, template, start, end, step, MAX_POINTS_PER_REQUEST)
            .await
    }

    #[doc(hidden)]
    /// [`query_range`](Self::query_range) with a smaller chunk, for tests.
    pub async fn query_range_in_chunks(
        &self,
        cluster: &str,
        template: &str,
        start: Timestamp,
        end: Timestamp,
        step: Duration,
        max_points: u64,
    ) -> Result<Vec<RangeSeries>> {
        let target = self.target(cluster)?;
        let step_secs = i64::try_from(step.as_secs()).unwrap_or(i64::MAX);
        if step_secs < 1 || step.subsec_nanos() != 0 {
            return Err(Error::InvalidRange(format!(
                "step {step:?} is not a whole number of seconds"
            )));
        }
        let (start, end) = (start.as_second(), end.as_second());
        if end < start || max_points == 0 {
            return Err(Error::InvalidRange(format!(
                "end {end} is before start {start}"
            )));
        }
        let expr = self.config.queries.expand(template, &target.selector);
        let mut merged = BTreeMap::new();
        for (from, to) in range::split_range(start, end, step_secs, max_points) {
            let chunk = target
                .endpoint
                .range(&self.settings, "range", &expr, from, to, step_secs as f64)
                .await?;
            range::merge_chunk(&mut merged, chunk);
        }
        Ok(range::into_series(merged))
    }

    async fn read_cluster(&self, cluster: &str, at: Timestamp) -> Result<ClusterMetrics> {
        let target = self.target(cluster)?;
        let expr = self.config.queries.cluster_expr(&target.selector);
        let name = format!("cluster values of {cluster}");
        let at_secs = at.as_second();
        let vectors = target
            .endpoint
            .instant(&self.settings, &name, &expr, at_secs)
            .await?;
        let mut values: BTreeMap<ClusterField, (Cell, Cell)> = BTreeMap::new();
        for (labels, value) in tagged(vectors) {
            match queries::cluster_part(&labels.tag) {
                Some(Part::Value(f)) => values.entry(f).or_default().0.push(value),
                Some(Part::SampleTime(f)) => values.entry(f).or_default().1.push(value),
                None => {}
            }
        }
        let check = |f: ClusterField| -> Checked {
            let (value, time) = values.get(&f).copied().unwrap_or_default();
            sample::check(value, time, at_secs as f64, self.config.freshness)
        };
        let checked: Vec<(ClusterField, Checked)> =
            ClusterField::ALL.iter().map(|f| (*f, check(*f))).collect();
        let get = |f: ClusterField| {
            checked
                .iter()
                .find(|(g, _)| *g == f)
                .and_then(|(_, c)| c.value)
        };
        // An optional value neither makes a cluster fresh nor stale.
        let required = || {
            checked
                .iter()
                .filter(|(f, _)| *f != ClusterField::CarbonIntensity)
        };
        let seen = required().any(|(_, c)| c.seen);
        let stale = required().any(|(_, c)| c.stale);
        if stale {
            tracing::info!(cluster, "some metrics are older than the freshness window");
        }
        let carbon_intensity = sample::non_negative(get(ClusterField::CarbonIntensity));
        if let Some(query) = &self.config.queries.carbon_intensity {
            self.note_carbon_intensity(cluster, &target.selector, query, carbon_intensity);
        }
        Ok(ClusterMetrics {
            cpu_core_hour_price: sample::non_negative(get(ClusterField::CpuPrice)),
            memory_gib_hour_price: sample::non_negative(get(ClusterField::MemoryPrice)),
            allocatable_cpu_millis: sample::cores_to_millis(get(ClusterField::AllocatableCpu)),
            allocatable_memory_bytes: sample::to_u64(get(ClusterField::AllocatableMemory)),
            requested_cpu_millis: sample::cores_to_millis(get(ClusterField::RequestedCpu)),
            requested_memory_bytes: sample::to_u64(get(ClusterField::RequestedMemory)),
            cpu_utilization: sample::non_negative(get(ClusterField::CpuUtilization)),
            memory_utilization: sample::non_negative(get(ClusterField::MemoryUtilization)),
            carbon_intensity,
            fresh: seen && !stale,
        })
    }

    /// Warns when the configured carbon intensity query stops giving
    /// `cluster` a value, naming the query, and says when it gives one
    /// again. A missing intensity is no data: the cycle goes on and
    /// policies see `carbonIntensity` as null.
    fn note_carbon_intensity(
        &self,
        cluster: &str,
        selector: &str,
        query: &ValueQuery,
        value: Option<f64>,
    ) {
        let mut missing = self
            .carbon_missing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match value {
            None if missing.insert(cluster.to_owned()) => tracing::warn!(
                cluster,
                query = %self.config.queries.expand(&query.expr, selector),
                "no carbon intensity for this cluster: the query gave no fresh, \
                 non-negative value; policies see its carbonIntensity as null"
            ),
            Some(_) if missing.remove(cluster) => {
                tracing::info!(cluster, "the carbon intensity is back for this cluster");
            }
            _ => {}
        }
    }

    async fn read_workloads(&self, cluster: &str, at: Timestamp) -> Result<WorkloadMap> {
        let target = self.target(cluster)?;
        let expr = self.config.queries.workload_expr(&target.selector);
        let name = format!("workload values of {cluster}");
        let at_secs = at.as_second();
        let vectors = target
            .endpoint
            .instant(&self.settings, &name, &expr, at_secs)
            .await?;
        let mut cells: HashMap<WorkloadKey, [(Cell, Cell); 4]> = HashMap::new();
        // Sample times without workload labels hold for every workload.
        let mut cluster_wide = [Cell::Missing; 4];
        let index = |f: WorkloadField| WorkloadField::ALL.iter().position(|g| *g == f).unwrap_or(0);
        for (labels, value) in tagged(vectors) {
            let part = queries::workload_part(&labels.tag);
            let (Some(namespace), Some(deployment)) = (labels.namespace, labels.deployment) else {
                if let Some(Part::SampleTime(f)) = part {
                    cluster_wide[index(f)].push(value);
                }
                continue;
            };
            let entry = cells
                .entry(WorkloadKey::new(namespace, deployment))
                .or_default();
            match part {
                Some(Part::Value(f)) => entry[index(f)].0.push(value),
                Some(Part::SampleTime(f)) => entry[index(f)].1.push(value),
                None => {}
            }
        }
        for entry in cells.values_mut() {
            for (i, (_, time)) in entry.iter_mut().enumerate() {
                if *time == Cell::Missing {
                    *time = cluster_wide[i];
                }
            }
        }
        let freshness = self.config.freshness;
        Ok(cells
            .into_iter()
            .map(|(key, cells)| {
                let get = |f: WorkloadField| {
                    let (value, time) = cells[index(f)];
                    sample::check(value, time, at_secs as f64, freshness).value
                };
                let metrics = WorkloadMetrics {
                    cpu_usage_millis: sample::cores_to_millis(get(WorkloadField::CpuUsage)),
                    memory_usage_bytes: sample::to_u64(get(WorkloadField::MemoryUsage)),
                    cpu_allocation_millis: sample::cores_to_millis(get(
                        WorkloadField::CpuAllocation,
                    )),
                    memory_allocation_bytes: sample::to_u64(get(WorkloadField::MemoryAllocation)),
                    hourly_cost: None,
                };
                (key, metrics)
            })
            .collect())
    }
}

struct Labels {
    tag: String,
    namespace: Option<String>,
    deployment: Option<String>,
}

/// The series of a combined answer that carry Ferry's tag.
fn tagged(vectors: Vec<InstantVector>) -> impl Iterator<Item = (Labels, f64)> {
    vectors.into_iter().filter_map(|v| {
        let (mut metric, sample) = v.into_inner();
        let labels = Labels {
            tag: metric.remove(VALUE_LABEL)?,
            namespace: metric.remove("namespace"),
            deployment: metric.remove("deployment"),
        };
        Some((labels, sample.value()))
    })
}

impl MetricsSource for PrometheusSource {
    fn cluster<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<ClusterMetrics>> {
        self.read_cluster(cluster, at).boxed()
    }

    fn workloads<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<WorkloadMap>> {
        self.read_workloads(cluster, at).boxed()
    }

    fn instant_values<'a>(
        &'a self,
        cluster: &'a str,
        query: &'a str,
    ) -> BoxFuture<'a, Result<Vec<f64>>> {
        async move {
            let target = self.target(cluster)?;
            let expr = self.config.queries.expand(query, &target.selector);
            let now = Timestamp::now().as_second();
            let vectors = target
                .endpoint
                .instant(&self.settings, "gate", &expr, now)
                .await?;
            Ok(vectors
                .into_iter()
                .map(|v| v.into_inner().1.value())
                .collect())
        }
        .boxed()
    }
}
