//! Replay: a [`Scenario`] built from the history recorded in Prometheus
//! instead of a scenario file, run by the same simulator.
//!
//! Reads a fixed number of range queries whatever the number of nodes or
//! workloads: for a shared Prometheus one to discover the clusters (the
//! values of the cluster label on `node_cpu_hourly_cost`), then per cluster
//! one for its prices and allocatable capacity and one for every
//! Deployment's requests, pods and usage, the per-pod values joined to their
//! Deployment once, as the live operator's instant query does (more only when
//! a window holds more than 11,000 steps).
//!
//! Missing points (documented in docs/simulation.md, "Replaying Prometheus
//! history"):
//! - NaN, ±Inf, negative values and a value given by several series are
//!   gaps.
//! - A cluster value (price, allocatable) missing at a step carries its last
//!   value; before its first point, its first. A value with no point in the
//!   whole window is an error: there is nothing to carry.
//! - A Deployment with no pods at a step has 0 replicas, when
//!   kube-state-metrics answered for its cluster at that step (the cluster's
//!   allocatable CPU has a point). When it did not, the Deployment carries
//!   its last values: a scrape gap is not a scale-down.
//! - Per-pod requests are constant in the simulator: the last observed
//!   (requests over pods at the last step with pods).
//! - Per-pod usage missing at a step carries its last value; a Deployment
//!   whose usage is never seen has no usage modelled.
//!
//! Thresholds, the migration model, selector, targets and parameters come
//! from a [`Template`]. Never: one query per workload, or a value made up for
//! a cluster Prometheus said nothing about.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::try_join_all;
use jiff::Timestamp;

use super::error::Error as ScenarioError;
use super::scenario::{ClusterSpec, Scenario, WorkloadSpec};
use super::series::Series;
use crate::metrics::{
    self, PrometheusConfig, PrometheusEndpoint, PrometheusSource, Queries, RangeSeries,
};

const BYTES_PER_GIB: f64 = 1024.0 * 1024.0 * 1024.0;
/// A scenario file's `migration.duration` when it has none.
const DEFAULT_MIGRATION_MS: u64 = 600_000;
/// The metric whose cluster label names the clusters of a shared Prometheus.
const CLUSTER_METRIC: &str = "node_cpu_hourly_cost";

// Tags of the values in the combined queries.
const CPU_PRICE: &str = "cpu_price";
const MEMORY_PRICE: &str = "memory_price";
const ALLOCATABLE_CPU: &str = "allocatable_cpu";
const ALLOCATABLE_MEMORY: &str = "allocatable_memory";
const CPU_REQUESTS: &str = "cpu_requests";
const MEMORY_REQUESTS: &str = "memory_requests";
const PODS: &str = "pods";
const CPU_USAGE: &str = "cpu_usage";
const MEMORY_USAGE: &str = "memory_usage";

/// Per pod, labelled `namespace, pod`: kube-state-metrics' requests, and 1
/// for every pod with a request (a pod of the Deployment).
const POD_CPU_REQUESTS: &str =
    r#"kube_pod_container_resource_requests{resource="cpu",{cluster_selector}}"#;
const POD_MEMORY_REQUESTS: &str =
    r#"kube_pod_container_resource_requests{resource="memory",{cluster_selector}}"#;
const POD_COUNT: &str =
    "group by (namespace, pod) (kube_pod_container_resource_requests{{cluster_selector}})";

/// What can keep a replay from building its scenario.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The window or step cannot make a step grid.
    #[error("invalid replay window: {0}")]
    Window(String),
    /// The template's `interval` does not fit the replay's step.
    #[error(
        "the template's interval ({interval_ms} ms) is not a multiple of the step ({step_secs}s)"
    )]
    Interval { interval_ms: u64, step_secs: i64 },
    /// The template file is unreadable or invalid (its message has the line).
    #[error(transparent)]
    Template(#[from] ScenarioError),
    #[error("{0:?} is not a Prometheus label name")]
    LabelName(String),
    #[error("cannot use the Prometheus endpoint")]
    Endpoint(#[source] Box<metrics::Error>),
    #[error("cannot read {what} from Prometheus")]
    Query {
        what: String,
        #[source]
        source: Box<metrics::Error>,
    },
    #[error("no {CLUSTER_METRIC} series carries the label {label:?} between {from} and {to}")]
    NoClusters {
        label: String,
        from: Timestamp,
        to: Timestamp,
    },
    #[error("cluster {cluster:?} has no {value} between {from} and {to}")]
    NoData {
        cluster: String,
        value: &'static str,
        from: Timestamp,
        to: Timestamp,
    },
}

impl Error {
    /// True when Prometheus could not be read but may be later; every other
    /// error needs a different input.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Query { source, .. } if source.is_transient())
    }

    /// True when Prometheus answered with something unusable or not at all,
    /// rather than the input being wrong.
    pub fn is_prometheus(&self) -> bool {
        matches!(self, Error::Query { .. })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use crate::metrics::parse_time;

pub use crate::units::scenario::step as parse_step;
pub use template::Template;
pub use window::Window;

/// Replays `window` of the history in the Prometheus at `endpoint`: for a
/// shared one (`endpoint.cluster_label` set) every cluster found in it, else
/// the one cluster it holds, named `cluster`.
pub async fn replay(
    endpoint: &PrometheusEndpoint,
    cluster: &str,
    config: &PrometheusConfig,
    window: &Window,
    template: &Template,
) -> Result<Scenario> {
    let clusters = match &endpoint.cluster_label {
        Some(label) => discover_clusters(endpoint, label, config, window).await?,
        None => vec![cluster.to_owned()],
    };
    let source = PrometheusSource::new(
        config.clone(),
        clusters.iter().map(|c| (c.clone(), endpoint.clone())),
    )
    .map_err(|e| Error::Endpoint(Box::new(e)))?;
    scenario(&source, &clusters, window, template).await
}

/// The values of `label` on `CLUSTER_METRIC` within `window`, sorted: one
/// range query. The endpoint's own `cluster_label` is not used.
pub async fn discover_clusters(
    endpoint: &PrometheusEndpoint,
    label: &str,
    config: &PrometheusConfig,
    window: &Window,
) -> Result<Vec<String>> {
    let valid = label
        .chars()
        .enumerate()
        .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
    if label.is_empty() || !valid {
        return Err(Error::LabelName(label.to_owned()));
    }
    let whole = PrometheusEndpoint {
        cluster_label: None,
        ..endpoint.clone()
    };
    let source = PrometheusSource::new(config.clone(), [(String::new(), whole)])
        .map_err(|e| Error::Endpoint(Box::new(e)))?;
    let series = range(
        &source,
        "",
        &format!("count by ({label}) ({CLUSTER_METRIC})"),
        window,
        "cluster names",
    )
    .await?;
    let names: BTreeSet<String> = series
        .into_iter()
        .filter_map(|s| s.labels.get(label).cloned())
        .filter(|name| !name.is_empty())
        .collect();
    if names.is_empty() {
        return Err(Error::NoClusters {
            label: label.to_owned(),
            from: window.start(),
            to: window.end(),
        });
    }
    Ok(names.into_iter().collect())
}

/// The scenario of `clusters` over `window`, read from `source` with two
/// range queries per cluster (clusters read concurrently).
pub async fn scenario(
    source: &PrometheusSource,
    clusters: &[String],
    window: &Window,
    template: &Template,
) -> Result<Scenario> {
    let q = source.queries();
    let cluster_template = Queries::tagged_template(&[
        (CPU_PRICE, &q.cpu_core_hour_price.expr),
        (MEMORY_PRICE, &q.memory_gib_hour_price.expr),
        (ALLOCATABLE_CPU, &q.allocatable_cpu.expr),
        (ALLOCATABLE_MEMORY, &q.allocatable_memory.expr),
    ]);
    let workload_template = Queries::per_deployment_template(&[
        (CPU_REQUESTS, POD_CPU_REQUESTS),
        (MEMORY_REQUESTS, POD_MEMORY_REQUESTS),
        (PODS, POD_COUNT),
        (CPU_USAGE, &q.workload_cpu_usage.expr),
        (MEMORY_USAGE, &q.workload_memory_usage.expr),
    ]);
    let reads = clusters.iter().map(|cluster| {
        let (cluster_template, workload_template) = (&cluster_template, &workload_template);
        async move {
            let what = (
                format!("cluster values of {cluster}"),
                format!("workload values of {cluster}"),
            );
            let (values, workloads) = futures::try_join!(
                range(source, cluster, cluster_template, window, &what.0),
                range(source, cluster, workload_template, window, &what.1),
            )?;
            Ok::<_, Error>((cluster.clone(), History::new(window, values, workloads)))
        }
    });
    let histories = try_join_all(reads).await?;
    build(window, template, histories)
}

async fn range(
    source: &PrometheusSource,
    cluster: &str,
    template: &str,
    window: &Window,
    what: &str,
) -> Result<Vec<RangeSeries>> {
    source
        .query_range(
            cluster,
            template,
            window.start(),
            window.time(window.steps - 1),
            window.step(),
        )
        .await
        .map_err(|source| Error::Query {
            what: what.to_owned(),
            source: Box::new(source),
        })
}

/// One value per step, `None` where there is no usable point.
type Points = Vec<Option<f64>>;

/// What Prometheus said about one cluster, on the step grid.
#[derive(Debug, Default)]
struct History {
    values: BTreeMap<String, Points>,
    /// By (namespace, Deployment), then by value.
    workloads: BTreeMap<(String, String), BTreeMap<String, Points>>,
}

impl History {
    fn new(window: &Window, values: Vec<RangeSeries>, workloads: Vec<RangeSeries>) -> History {
        let mut history = History::default();
        // A value given by several series is ambiguous: no point.
        let mut counts: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for s in &values {
            let Some(tag) = Queries::tag_of(&s.labels) else {
                continue;
            };
            let points = history
                .values
                .entry(tag.to_owned())
                .or_insert_with(|| vec![None; window.steps]);
            let seen = counts
                .entry(tag.to_owned())
                .or_insert_with(|| vec![0; window.steps]);
            for (k, v) in on_grid(window, s) {
                seen[k] += 1;
                points[k] = (seen[k] == 1).then_some(v);
            }
        }
        for s in &workloads {
            let (Some(tag), Some(namespace), Some(deployment)) = (
                Queries::tag_of(&s.labels),
                s.labels.get("namespace"),
                s.labels.get("deployment"),
            ) else {
                continue;
            };
            let points = history
                .workloads
                .entry((namespace.clone(), deployment.clone()))
                .or_default()
                .entry(tag.to_owned())
                .or_insert_with(|| vec![None; window.steps]);
            for (k, v) in on_grid(window, s) {
                points[k] = Some(v);
            }
        }
        history
    }

    fn value(&self, tag: &str, steps: usize) -> Points {
        self.values
            .get(tag)
            .cloned()
            .unwrap_or_else(|| vec![None; steps])
    }
}

/// The usable points of a series, by step.
fn on_grid<'a>(window: &'a Window, s: &'a RangeSeries) -> impl Iterator<Item = (usize, f64)> + 'a {
    s.points
        .iter()
        .filter(|(_, v)| v.is_finite() && *v >= 0.0)
        .filter_map(|(t, v)| Some((window.index(*t)?, *v)))
}

/// Carries the last value over gaps, and the first back over the leading
/// gap; `None` when there is no value at all.
fn fill(points: &[Option<f64>]) -> Option<Vec<f64>> {
    let mut last = points.iter().flatten().next().copied()?;
    Some(
        points
            .iter()
            .map(|p| {
                if let Some(v) = p {
                    last = *v;
                }
                last
            })
            .collect(),
    )
}

/// A table, or a constant when every step has the same value.
fn series(values: Vec<f64>) -> Series {
    match values.first() {
        Some(&first) if values.iter().all(|v| *v == first) => Series::Constant(first),
        _ => Series::Table(values.into()),
    }
}

/// The scenario from each cluster's history. Pure.
fn build(
    window: &Window,
    template: &Template,
    histories: Vec<(String, History)>,
) -> Result<Scenario> {
    let steps = window.steps;
    let mut clusters = Vec::with_capacity(histories.len());
    for (name, h) in &histories {
        let value = |tag: &str, what: &'static str, scale: f64| -> Result<Series> {
            let points: Points = h
                .value(tag, steps)
                .iter()
                .map(|p| p.map(|v| v * scale))
                .collect();
            fill(&points).map(series).ok_or_else(|| Error::NoData {
                cluster: name.clone(),
                value: what,
                from: window.start(),
                to: window.end(),
            })
        };
        clusters.push(ClusterSpec {
            name: name.clone(),
            region: String::new(),
            labels: Vec::new(),
            cpu_cores: value(ALLOCATABLE_CPU, "allocatable CPU", 1.0)?,
            memory_gib: value(
                ALLOCATABLE_MEMORY,
                "allocatable memory",
                1.0 / BYTES_PER_GIB,
            )?,
            cpu_price: value(CPU_PRICE, "CPU price", 1.0)?,
            memory_price: value(MEMORY_PRICE, "memory price", 1.0)?,
            // Replayed history carries no carbon series.
            carbon_intensity: None,
        });
    }

    // A Deployment in several clusters is several workloads.
    let mut seen: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    for (_, h) in &histories {
        for (namespace, name) in h.workloads.keys() {
            *seen.entry((namespace, name)).or_default() += 1;
        }
    }
    let mut workloads = Vec::new();
    for (c, (cluster, h)) in histories.iter().enumerate() {
        // kube-state-metrics answered for the cluster at these steps.
        let answered: Vec<bool> = h
            .value(ALLOCATABLE_CPU, steps)
            .iter()
            .map(Option::is_some)
            .collect();
        for ((namespace, name), values) in &h.workloads {
            let get = |tag: &str| {
                values
                    .get(tag)
                    .cloned()
                    .unwrap_or_else(|| vec![None; steps])
            };
            let pods = get(PODS);
            let Some(replicas) = fill(
                &pods
                    .iter()
                    .zip(&answered)
                    .map(|(p, a)| p.or(a.then_some(0.0)))
                    .collect::<Points>(),
            ) else {
                continue;
            };
            let (cpu, memory) = (get(CPU_REQUESTS), get(MEMORY_REQUESTS));
            let Some(last) = (0..steps)
                .rev()
                .find(|&k| pods[k].is_some_and(|p| p >= 1.0))
            else {
                continue;
            };
            let per_pod = |total: &Points| total[last].unwrap_or(0.0) / pods[last].unwrap_or(1.0);
            let usage = |tag: &str, scale: f64| {
                let per_pod: Points = get(tag)
                    .iter()
                    .zip(&pods)
                    .map(|(u, p)| match (u, p) {
                        (Some(u), Some(p)) if *p >= 1.0 => Some(u / p * scale),
                        _ => None,
                    })
                    .collect();
                fill(&per_pod).map(series)
            };
            let unique = seen.get(&(namespace.as_str(), name.as_str())) == Some(&1);
            workloads.push(WorkloadSpec {
                namespace: namespace.clone(),
                name: if unique {
                    name.clone()
                } else {
                    format!("{name}@{cluster}")
                },
                kind: "Deployment".to_owned(),
                cluster: c,
                labels: Vec::new(),
                pinned: false,
                replicas: series(replicas),
                pod_cpu_millis: (per_pod(&cpu) * 1000.0).round() as u64,
                pod_memory_bytes: per_pod(&memory).round() as u64,
                usage_cpu_cores: usage(CPU_USAGE, 1.0),
                usage_memory_gib: usage(MEMORY_USAGE, 1.0 / BYTES_PER_GIB),
            });
        }
    }
    template.apply(window, clusters, workloads)
}

mod template;
#[cfg(test)]
mod tests;
mod window;
