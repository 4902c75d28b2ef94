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
//! Missing points (documented in `examples/SIMULATION.md`):
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
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use futures::future::try_join_all;
use jiff::Timestamp;
use serde::Deserialize;
use serde_saphyr::Location;

use super::error::{Error as ScenarioError, Located};
use super::scenario::{ClusterSpec, MAX_STEPS, MigrationModel, Scenario, WorkloadSpec, parse};
use super::series::Series;
use super::units::parse_duration_ms;
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

/// A step: a duration (`60s`, `5m`, `1h`) or a number of seconds, whole
/// seconds and at least one.
pub fn parse_step(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let ms = match t.parse::<u64>() {
        Ok(seconds) => seconds.saturating_mul(1000),
        Err(_) => parse_duration_ms(t)?,
    };
    if ms == 0 || ms % 1000 != 0 {
        return Err(format!(
            "{t:?} is not a whole number of seconds, at least 1"
        ));
    }
    Ok(Duration::from_millis(ms))
}

/// The replayed steps: `start`, `start + step`, … each standing for the
/// step of time after it, the last ending at or before the window's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    start: i64,
    step: i64,
    steps: usize,
}

impl Window {
    /// The steps from `from` to `to` (whole seconds, after 1970).
    pub fn new(from: Timestamp, to: Timestamp, step: Duration) -> Result<Window> {
        let bad = |m: String| Err(Error::Window(m));
        if step.subsec_nanos() != 0 || step.as_secs() == 0 {
            return bad(format!(
                "the step ({step:?}) is not a whole number of seconds, at least 1"
            ));
        }
        if from.subsec_nanosecond() != 0 || to.subsec_nanosecond() != 0 {
            return bad(format!("{from} and {to} must be whole seconds"));
        }
        if from.as_second() < 0 {
            return bad(format!("{from} is before 1970"));
        }
        if to <= from {
            return bad(format!("the end ({to}) is not after the start ({from})"));
        }
        let step = i64::try_from(step.as_secs()).unwrap_or(i64::MAX);
        let steps = (to.as_second() - from.as_second()) / step;
        if steps == 0 || steps as u64 > MAX_STEPS {
            return bad(format!(
                "{from} to {to} gives {steps} steps of {step}s; must give 1 to {MAX_STEPS}"
            ));
        }
        Ok(Window {
            start: from.as_second(),
            step,
            steps: steps as usize,
        })
    }

    pub fn start(&self) -> Timestamp {
        self.time(0)
    }

    /// The end of the last step.
    pub fn end(&self) -> Timestamp {
        self.time(self.steps)
    }

    pub fn step(&self) -> Duration {
        Duration::from_secs(self.step as u64)
    }

    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The time of step `k` (within the window, so always representable).
    fn time(&self, k: usize) -> Timestamp {
        Timestamp::from_second(self.start + k as i64 * self.step).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// The step evaluated at `t`, if `t` is one.
    fn index(&self, t: Timestamp) -> Option<usize> {
        let offset = t.as_second() - self.start;
        if t.subsec_nanosecond() != 0 || offset < 0 || offset % self.step != 0 {
            return None;
        }
        let k = (offset / self.step) as usize;
        (k < self.steps).then_some(k)
    }
}

/// What a replay takes from a scenario file: thresholds, selector, target
/// clusters, parameters, seed, the migration model and `interval`,
/// `backAndForthWindow`. Its `start`, `duration`, `step`, clusters and
/// workloads are ignored and may be left out; durations are converted to the
/// replay's step.
#[derive(Clone, Debug)]
pub struct Template {
    scenario: Scenario,
    interval_ms: Option<u64>,
    migration_ms: u64,
}

/// The fields of a template that depend on the step, read leniently: every
/// field is checked by the scenario parser.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TimeFields {
    #[serde(default)]
    duration: Option<String>,
    #[serde(default)]
    step: Option<String>,
    #[serde(default)]
    interval: Option<String>,
    #[serde(default)]
    clusters: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    migration: Option<MigrationTime>,
}

#[derive(Debug, Default, Deserialize)]
struct MigrationTime {
    #[serde(default)]
    duration: Option<String>,
}

/// Satisfies the scenario parser when a template has no clusters.
const PLACEHOLDER_CLUSTERS: &str = "clusters: [{name: template, allocatable: {cpu: 1, memory: 1}, prices: {cpuCoreHour: 0, memoryGibHour: 0}}]\n";

impl Template {
    /// The CRD's defaults, as a scenario file without those fields has them.
    pub fn defaults(seed: Option<u64>) -> Template {
        Template::parse("", "<defaults>", Path::new("."), seed).expect("an empty template is valid")
    }

    /// Reads a scenario file as a template; `seed` overrides the file's.
    pub fn load(path: &Path, seed: Option<u64>) -> Result<Template> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_owned(),
            source,
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Template::parse(&text, &path.display().to_string(), dir, seed)
    }

    /// Parses scenario text as a template, checked by the scenario parser
    /// (errors name the line and field).
    pub fn parse(text: &str, file: &str, dir: &Path, seed: Option<u64>) -> Result<Template> {
        let fields: TimeFields = if text.trim().is_empty() {
            TimeFields::default()
        } else {
            match serde_saphyr::from_str(text) {
                Ok(fields) => fields,
                // The scenario parser tells where the text is wrong.
                Err(err) => {
                    parse(text, file, dir, seed)?;
                    return Err(ScenarioError::Syntax {
                        file: file.to_owned(),
                        line: 0,
                        column: 0,
                        message: err.to_string(),
                    }
                    .into());
                }
            }
        };
        // Added at the end, so the lines of the file keep their numbers.
        let mut full = text.to_owned();
        if !full.is_empty() && !full.ends_with('\n') {
            full.push('\n');
        }
        let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
        match (&fields.duration, &fields.step) {
            (None, None) => full.push_str("duration: 1s\nstep: 1s\n"),
            (None, Some(step)) => {
                let _ = writeln!(full, "duration: {}", quoted(step));
            }
            (Some(duration), None) => {
                let _ = writeln!(full, "step: {}", quoted(duration));
            }
            (Some(_), Some(_)) => {}
        }
        if fields.clusters.is_none() {
            full.push_str(PLACEHOLDER_CLUSTERS);
        }
        let scenario = parse(&full, file, dir, seed)?;
        let duration = |field: &str, text: &str| {
            parse_duration_ms(text).map_err(|m| {
                ScenarioError::Invalid(Located::new(file, Location::UNKNOWN, field, m))
            })
        };
        let interval_ms = fields
            .interval
            .as_deref()
            .map(|i| duration("interval", i))
            .transpose()?;
        let migration_ms = match fields.migration.and_then(|m| m.duration) {
            Some(d) => duration("migration.duration", &d)?,
            None => DEFAULT_MIGRATION_MS,
        };
        Ok(Template {
            scenario,
            interval_ms,
            migration_ms,
        })
    }

    /// The scenario of the replayed clusters and workloads on `window`.
    fn apply(
        &self,
        window: &Window,
        clusters: Vec<ClusterSpec>,
        workloads: Vec<WorkloadSpec>,
    ) -> Result<Scenario> {
        let step_ms = window.step as u64 * 1000;
        let interval_steps = match self.interval_ms {
            None => 1,
            Some(ms) if ms > 0 && ms % step_ms == 0 => (ms / step_ms) as usize,
            Some(ms) => {
                return Err(Error::Interval {
                    interval_ms: ms,
                    step_secs: window.step,
                });
            }
        };
        Ok(Scenario {
            name: format!("replay {} to {}", window.start(), window.end()),
            start_ms: window.start as u64 * 1000,
            step_ms,
            steps: window.steps,
            interval_steps,
            migration: MigrationModel {
                duration_steps: (self.migration_ms.div_ceil(step_ms) as usize).max(1),
                ..self.scenario.migration.clone()
            },
            clusters,
            workloads,
            ..self.scenario.clone()
        })
    }
}

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

/// The values of `label` on [`CLUSTER_METRIC`] within `window`, sorted: one
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

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_767_225_600;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn window(steps: i64) -> Window {
        Window::new(at(T0), at(T0 + 60 * steps), Duration::from_secs(60)).unwrap()
    }

    #[test]
    fn times_are_rfc3339_or_unix_seconds() {
        assert_eq!(parse_time("2026-01-01T00:00:00Z").unwrap(), at(T0));
        assert_eq!(parse_time("1767225600").unwrap(), at(T0));
        assert!(parse_time("yesterday").is_err());
    }

    #[test]
    fn steps_are_whole_seconds() {
        assert_eq!(parse_step("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_step("90").unwrap(), Duration::from_secs(90));
        for bad in ["0s", "1500ms", "0", "soon"] {
            assert!(parse_step(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_window_ends_at_or_before_its_end() {
        let w = Window::new(at(T0), at(T0 + 150), Duration::from_secs(60)).unwrap();
        assert_eq!(w.steps(), 2);
        assert_eq!(w.end(), at(T0 + 120));
        assert_eq!(w.index(at(T0 + 60)), Some(1));
        assert_eq!(w.index(at(T0 + 30)), None);
        assert_eq!(w.index(at(T0 + 120)), None, "past the last step");
        for (from, to) in [(T0, T0), (T0, T0 + 59), (T0 + 60, T0)] {
            assert!(
                Window::new(at(from), at(to), Duration::from_secs(60)).is_err(),
                "{from}..{to}"
            );
        }
    }

    #[test]
    fn gaps_carry_the_last_value_and_lead_with_the_first() {
        assert_eq!(
            fill(&[None, Some(2.0), None, Some(3.0), None]),
            Some(vec![2.0, 2.0, 2.0, 3.0, 3.0])
        );
        assert_eq!(fill(&[None, None]), None);
    }

    #[test]
    fn a_template_needs_no_clusters_and_takes_the_replay_step() {
        let text = "thresholds: {minHourlySavings: 0.01, migrationCost: 0.2}\ninterval: 5m\nmigration: {duration: 7m, failureProbability: 0.5}\n";
        let t = Template::parse(text, "t.yaml", Path::new("."), Some(9)).unwrap();
        let s = t.apply(&window(30), Vec::new(), Vec::new()).unwrap();
        assert_eq!((s.steps, s.step_ms, s.interval_steps), (30, 60_000, 5));
        assert_eq!(s.migration.duration_steps, 7);
        assert_eq!(s.migration.cost, 0.2, "migration cost from thresholds");
        assert_eq!(s.migration.failure_probability, 0.5);
        assert_eq!(s.seed, 9);
        assert!((s.thresholds.min_hourly_savings - 0.01).abs() < 1e-12);
        assert!(s.clusters.is_empty());
        let three = Window::new(at(T0), at(T0 + 600), Duration::from_secs(180)).unwrap();
        assert!(matches!(
            t.apply(&three, Vec::new(), Vec::new()),
            Err(Error::Interval { .. })
        ));
    }

    #[test]
    fn a_template_of_comments_is_the_defaults() {
        let t = Template::parse("# nothing to change\n", "t.yaml", Path::new("."), None).unwrap();
        let s = t.apply(&window(10), Vec::new(), Vec::new()).unwrap();
        assert_eq!(s.migration.duration_steps, 10);
    }

    #[test]
    fn a_whole_scenario_is_a_template_whose_clusters_are_ignored() {
        let text = include_str!("../../tests/data/simulate/price_step.yaml");
        let t = Template::parse(text, "price_step.yaml", Path::new("."), None).unwrap();
        let s = t.apply(&window(120), Vec::new(), Vec::new()).unwrap();
        assert!(s.clusters.is_empty() && s.workloads.is_empty());
        assert_eq!(s.migration.duration_steps, 60, "its 1h in minutes");
        assert_eq!(s.migration.cost, 0.5);
    }

    #[test]
    fn template_errors_keep_their_line() {
        let err = Template::parse(
            "migration:\n  duration: 5m\nthresholds:\n  minSavingsPercent: 400\n",
            "t.yaml",
            Path::new("."),
            None,
        )
        .unwrap_err();
        let Error::Template(err) = err else {
            panic!("{err:?}")
        };
        assert_eq!(err.line(), Some(4), "{err}");
    }

    #[test]
    fn defaults_are_the_crds() {
        let s = Template::defaults(None)
            .apply(&window(10), Vec::new(), Vec::new())
            .unwrap();
        let d = crate::crd::ThresholdsSpec::default();
        assert!((s.thresholds.min_hourly_savings - d.min_hourly_savings).abs() < 1e-12);
        assert_eq!(s.migration.duration_steps, 10, "10 minutes");
        assert_eq!(s.interval_steps, 1);
    }

    fn points(values: &[Option<f64>]) -> Points {
        values.to_vec()
    }

    #[test]
    fn an_absent_deployment_has_no_pods_unless_the_exporter_was_silent() {
        let w = window(5);
        let mut h = History::default();
        for (tag, v) in [
            (CPU_PRICE, 0.04),
            (MEMORY_PRICE, 0.005),
            (ALLOCATABLE_MEMORY, BYTES_PER_GIB),
        ] {
            h.values.insert(tag.to_owned(), vec![Some(v); 5]);
        }
        // kube-state-metrics silent at step 3.
        h.values.insert(
            ALLOCATABLE_CPU.to_owned(),
            points(&[Some(4.0), Some(4.0), Some(4.0), None, Some(4.0)]),
        );
        let mut web = BTreeMap::new();
        web.insert(
            PODS.to_owned(),
            points(&[None, Some(2.0), Some(3.0), None, None]),
        );
        web.insert(
            CPU_REQUESTS.to_owned(),
            points(&[None, Some(1.0), Some(1.5), None, None]),
        );
        web.insert(
            CPU_USAGE.to_owned(),
            points(&[None, Some(0.4), None, None, None]),
        );
        h.workloads
            .insert(("shop".to_owned(), "web".to_owned()), web);
        let s = build(&w, &Template::defaults(None), vec![("a".to_owned(), h)]).unwrap();
        let web = &s.workloads[0];
        let replicas: Vec<f64> = (0..5).map(|k| web.replicas.at(k)).collect();
        assert_eq!(replicas, [0.0, 2.0, 3.0, 3.0, 0.0]);
        assert_eq!(web.pod_cpu_millis, 500, "the last observed per-pod request");
        assert_eq!(web.pod_memory_bytes, 0, "no memory request");
        let usage = web.usage_cpu_cores.as_ref().unwrap();
        assert!((usage.at(4) - 0.2).abs() < 1e-12, "carried");
        assert!(s.workloads.iter().all(|w| w.cluster == 0));
    }

    #[test]
    fn a_cluster_without_a_price_is_an_error_naming_it() {
        let mut h = History::default();
        h.values
            .insert(ALLOCATABLE_CPU.to_owned(), vec![Some(1.0); 3]);
        h.values
            .insert(ALLOCATABLE_MEMORY.to_owned(), vec![Some(1.0); 3]);
        h.values.insert(CPU_PRICE.to_owned(), vec![Some(0.1); 3]);
        let err = build(
            &window(3),
            &Template::defaults(None),
            vec![("east".to_owned(), h)],
        )
        .unwrap_err();
        assert!(
            matches!(&err, Error::NoData { cluster, value: "memory price", .. } if cluster == "east"),
            "{err}"
        );
    }
}
