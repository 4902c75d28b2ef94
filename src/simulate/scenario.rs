//! The scenario file: how it is written (YAML, see `examples/SIMULATION.md`)
//! and what it compiles to. Every value that is checked keeps its location,
//! so an error names the line and the field at fault.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_saphyr::{Location, Spanned};

use super::error::{Error, Located, Result};
use super::series::{Clock, Series, SeriesSpec, compile};
use super::units::{parse_cpu_millis, parse_duration_ms, parse_memory_bytes};
use crate::crd::{Duration, Guardrails, MigrationPolicySpec, ThresholdsSpec, validate_policy};
use crate::contract::{Label, Thresholds};

/// Default start of the virtual clock: 2025-01-06T00:00:00Z (a Monday).
pub const DEFAULT_START_MS: u64 = 1_736_121_600_000;
/// Longest run: a million steps.
pub const MAX_STEPS: u64 = 1_000_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawScenario {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    start: Option<Spanned<String>>,
    duration: Spanned<String>,
    step: Spanned<String>,
    #[serde(default)]
    interval: Option<Spanned<String>>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    thresholds: Option<Spanned<RawThresholds>>,
    #[serde(default)]
    selector: Option<LabelSelector>,
    #[serde(default)]
    target_clusters: Vec<String>,
    #[serde(default)]
    parameters: Option<serde_json::Value>,
    #[serde(default)]
    migration: Option<RawMigration>,
    #[serde(default)]
    back_and_forth_window: Option<Spanned<String>>,
    clusters: Vec<RawCluster>,
    #[serde(default)]
    workloads: Vec<RawWorkload>,
}

/// `MigrationPolicy.spec.thresholds`, field for field, with locations.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawThresholds {
    min_hourly_savings: Option<Spanned<f64>>,
    min_savings_percent: Option<Spanned<f64>>,
    max_target_cpu_utilization_percent: Option<Spanned<f64>>,
    max_target_memory_utilization_percent: Option<Spanned<f64>>,
    cooldown: Option<Spanned<String>>,
    max_migrations_per_cycle: Option<Spanned<u32>>,
    max_in_flight: Option<Spanned<u32>>,
    migration_cost: Option<Spanned<f64>>,
    max_payback_hours: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawMigration {
    #[serde(default)]
    duration: Option<Spanned<String>>,
    #[serde(default)]
    cost: Option<Spanned<f64>>,
    #[serde(default)]
    failure_probability: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCluster {
    name: Spanned<String>,
    #[serde(default)]
    region: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    allocatable: RawCapacity,
    prices: RawPrices,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCapacity {
    /// Cores.
    cpu: Spanned<SeriesSpec>,
    /// GiB.
    memory: Spanned<SeriesSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPrices {
    cpu_core_hour: Spanned<SeriesSpec>,
    memory_gib_hour: Spanned<SeriesSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawWorkload {
    name: Spanned<String>,
    #[serde(default = "default_namespace")]
    namespace: String,
    #[serde(default = "default_kind")]
    kind: String,
    cluster: Spanned<String>,
    #[serde(default)]
    count: Option<Spanned<u32>>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    pinned: bool,
    #[serde(default)]
    replicas: Option<Spanned<SeriesSpec>>,
    requests: RawRequests,
    #[serde(default)]
    usage: Option<RawUsage>,
}

fn default_namespace() -> String {
    "default".to_owned()
}

fn default_kind() -> String {
    "Deployment".to_owned()
}

/// Per pod; numbers are cores and GiB, strings are Kubernetes quantities.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequests {
    cpu: Spanned<Quantity>,
    memory: Spanned<Quantity>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Quantity {
    Number(f64),
    Text(String),
}

impl Quantity {
    fn text(&self) -> String {
        match self {
            Quantity::Number(n) => n.to_string(),
            Quantity::Text(t) => t.clone(),
        }
    }
}

/// Per pod, over time: cores and GiB.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUsage {
    #[serde(default)]
    cpu: Option<Spanned<SeriesSpec>>,
    #[serde(default)]
    memory: Option<Spanned<SeriesSpec>>,
}

/// A scenario ready to run: every series compiled to the step grid.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub start_ms: u64,
    pub step_ms: u64,
    pub steps: usize,
    /// The policy runs every `interval_steps` steps.
    pub interval_steps: usize,
    pub seed: u64,
    pub thresholds: Thresholds,
    pub guardrails: Guardrails,
    pub selector: Option<LabelSelector>,
    pub target_clusters: Vec<String>,
    pub parameters_json: String,
    pub migration: MigrationModel,
    /// A move back to where the workload came from within this window counts
    /// as back-and-forth.
    pub back_and_forth_window_ms: u64,
    pub clusters: Vec<ClusterSpec>,
    pub workloads: Vec<WorkloadSpec>,
}

/// How moves behave in the simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct MigrationModel {
    /// Steps from the decision until the workload runs at the target (at least 1).
    pub duration_steps: usize,
    /// Charged once per move started, failed or not.
    pub cost: f64,
    /// Chance that a move fails (the workload stays), drawn from the seed.
    pub failure_probability: f64,
}

#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub name: String,
    pub region: String,
    pub labels: Vec<Label>,
    /// Allocatable cores and GiB.
    pub cpu_cores: Series,
    pub memory_gib: Series,
    /// Prices per core-hour and per GiB-hour.
    pub cpu_price: Series,
    pub memory_price: Series,
}

#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    pub namespace: String,
    pub name: String,
    pub kind: String,
    /// Index into [`Scenario::clusters`] where it starts.
    pub cluster: usize,
    pub labels: Vec<Label>,
    pub pinned: bool,
    pub replicas: Series,
    pub pod_cpu_millis: u64,
    pub pod_memory_bytes: u64,
    /// Per-pod usage in cores and GiB, when modelled.
    pub usage_cpu_cores: Option<Series>,
    pub usage_memory_gib: Option<Series>,
}

/// Reads and compiles a scenario file; `seed` overrides the file's.
pub fn load(path: &Path, seed: Option<u64>) -> Result<Scenario> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse(&text, &path.display().to_string(), dir, seed)
}

/// Parses and compiles scenario text; `file` names it in errors and `dir`
/// resolves CSV paths.
pub fn parse(text: &str, file: &str, dir: &Path, seed: Option<u64>) -> Result<Scenario> {
    let raw: RawScenario = serde_saphyr::from_str(text).map_err(|err| {
        let location = err.location().unwrap_or(Location::UNKNOWN);
        Error::Syntax {
            file: file.to_owned(),
            line: location.line(),
            column: location.column(),
            message: err.to_string(),
        }
    })?;
    compile_scenario(raw, file, dir, seed)
}

fn invalid(file: &str, loc: Location, field: &str, message: impl Into<String>) -> Error {
    Error::Invalid(Located::new(file, loc, field, message.into()))
}

fn duration_of(file: &str, field: &str, value: &Spanned<String>) -> Result<u64> {
    parse_duration_ms(&value.value).map_err(|m| invalid(file, value.referenced, field, m))
}

fn compile_scenario(
    raw: RawScenario,
    file: &str,
    dir: &Path,
    seed: Option<u64>,
) -> Result<Scenario> {
    let start_ms = match &raw.start {
        None => DEFAULT_START_MS,
        Some(s) => {
            let ts: jiff::Timestamp = s.value.parse().map_err(|e| {
                invalid(file, s.referenced, "start", format!("{:?} is not an RFC 3339 time ({e}); write for example \"2025-01-06T00:00:00Z\"", s.value))
            })?;
            u64::try_from(ts.as_millisecond())
                .map_err(|_| invalid(file, s.referenced, "start", "must be after 1970"))?
        }
    };
    let step_ms = duration_of(file, "step", &raw.step)?;
    if step_ms < 1000 {
        return Err(invalid(
            file,
            raw.step.referenced,
            "step",
            "must be at least 1s",
        ));
    }
    let duration_ms = duration_of(file, "duration", &raw.duration)?;
    let steps = duration_ms / step_ms;
    if steps == 0 || steps > MAX_STEPS {
        return Err(invalid(
            file,
            raw.duration.referenced,
            "duration",
            format!(
                "gives {steps} steps of {}; must give 1 to {MAX_STEPS}",
                raw.step.value
            ),
        ));
    }
    let interval_steps = match &raw.interval {
        None => 1,
        Some(i) => {
            let ms = duration_of(file, "interval", i)?;
            if ms == 0 || ms % step_ms != 0 {
                return Err(invalid(
                    file,
                    i.referenced,
                    "interval",
                    format!("must be a positive multiple of step ({})", raw.step.value),
                ));
            }
            (ms / step_ms) as usize
        }
    };
    let seed = seed.or(raw.seed).unwrap_or(0);

    let (thresholds, guardrails, parameters_json) = thresholds(&raw, file)?;

    let migration = {
        let m = raw.migration.as_ref();
        let duration_ms = match m.and_then(|m| m.duration.as_ref()) {
            Some(d) => duration_of(file, "migration.duration", d)?,
            None => 600_000,
        };
        let cost = match m.and_then(|m| m.cost.as_ref()) {
            Some(c) if !(c.value.is_finite() && c.value >= 0.0) => {
                return Err(invalid(
                    file,
                    c.referenced,
                    "migration.cost",
                    format!("is {}; must be at least 0", c.value),
                ));
            }
            Some(c) => c.value,
            None => guardrails.migration_cost,
        };
        let failure_probability = match m.and_then(|m| m.failure_probability.as_ref()) {
            Some(p) if !(0.0..=1.0).contains(&p.value) => {
                return Err(invalid(
                    file,
                    p.referenced,
                    "migration.failureProbability",
                    format!("is {}; must be between 0 and 1", p.value),
                ));
            }
            Some(p) => p.value,
            None => 0.0,
        };
        MigrationModel {
            duration_steps: (duration_ms.div_ceil(step_ms) as usize).max(1),
            cost,
            failure_probability,
        }
    };
    let back_and_forth_window_ms = match &raw.back_and_forth_window {
        Some(w) => duration_of(file, "backAndForthWindow", w)?,
        None => 86_400_000,
    };

    let clock = Clock {
        start_ms,
        step_ms,
        steps: steps as usize,
        seed,
        dir,
        file,
    };
    if raw.clusters.is_empty() {
        return Err(invalid(
            file,
            Location::UNKNOWN,
            "clusters",
            "lists no cluster",
        ));
    }
    let mut clusters: Vec<ClusterSpec> = Vec::with_capacity(raw.clusters.len());
    for (i, c) in raw.clusters.iter().enumerate() {
        let path = format!("clusters[{i}]");
        if c.name.value.is_empty() || clusters.iter().any(|o| o.name == c.name.value) {
            return Err(invalid(
                file,
                c.name.referenced,
                &format!("{path}.name"),
                format!("{:?} is empty or not unique", c.name.value),
            ));
        }
        clusters.push(ClusterSpec {
            name: c.name.value.clone(),
            region: c.region.clone(),
            labels: labels(&c.labels),
            cpu_cores: non_negative(
                &c.allocatable.cpu,
                &format!("{path}.allocatable.cpu"),
                &clock,
            )?,
            memory_gib: non_negative(
                &c.allocatable.memory,
                &format!("{path}.allocatable.memory"),
                &clock,
            )?,
            cpu_price: non_negative(
                &c.prices.cpu_core_hour,
                &format!("{path}.prices.cpuCoreHour"),
                &clock,
            )?,
            memory_price: non_negative(
                &c.prices.memory_gib_hour,
                &format!("{path}.prices.memoryGibHour"),
                &clock,
            )?,
        });
    }

    let mut workloads: Vec<WorkloadSpec> = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, w) in raw.workloads.iter().enumerate() {
        let path = format!("workloads[{i}]");
        let cluster = clusters
            .iter()
            .position(|c| c.name == w.cluster.value)
            .ok_or_else(|| {
                invalid(
                    file,
                    w.cluster.referenced,
                    &format!("{path}.cluster"),
                    format!("{:?} is not one of the clusters", w.cluster.value),
                )
            })?;
        let cpu = parse_cpu_millis(&w.requests.cpu.value.text()).map_err(|m| {
            invalid(
                file,
                w.requests.cpu.referenced,
                &format!("{path}.requests.cpu"),
                m,
            )
        })?;
        let memory = parse_memory_bytes(&w.requests.memory.value.text()).map_err(|m| {
            invalid(
                file,
                w.requests.memory.referenced,
                &format!("{path}.requests.memory"),
                m,
            )
        })?;
        let replicas = match &w.replicas {
            Some(r) => non_negative(r, &format!("{path}.replicas"), &clock)?,
            None => Series::Constant(1.0),
        };
        let usage_cpu = w
            .usage
            .as_ref()
            .and_then(|u| u.cpu.as_ref())
            .map(|s| non_negative(s, &format!("{path}.usage.cpu"), &clock))
            .transpose()?;
        let usage_memory = w
            .usage
            .as_ref()
            .and_then(|u| u.memory.as_ref())
            .map(|s| non_negative(s, &format!("{path}.usage.memory"), &clock))
            .transpose()?;
        let count = w.count.as_ref().map_or(1, |c| c.value);
        for n in 0..count {
            let name = if w.count.is_some() {
                format!("{}-{n}", w.name.value)
            } else {
                w.name.value.clone()
            };
            if name.is_empty() || !names.insert((w.namespace.clone(), name.clone())) {
                return Err(invalid(
                    file,
                    w.name.referenced,
                    &format!("{path}.name"),
                    format!("{}/{name} is empty or not unique", w.namespace),
                ));
            }
            workloads.push(WorkloadSpec {
                namespace: w.namespace.clone(),
                name,
                kind: w.kind.clone(),
                cluster,
                labels: labels(&w.labels),
                pinned: w.pinned,
                replicas: replicas.clone(),
                pod_cpu_millis: cpu,
                pod_memory_bytes: memory,
                usage_cpu_cores: usage_cpu.clone(),
                usage_memory_gib: usage_memory.clone(),
            });
        }
    }

    Ok(Scenario {
        name: raw.name.clone().unwrap_or_else(|| file.to_owned()),
        start_ms,
        step_ms,
        steps: steps as usize,
        interval_steps,
        seed,
        thresholds,
        guardrails,
        selector: raw.selector.clone(),
        target_clusters: raw.target_clusters.clone(),
        parameters_json,
        migration,
        back_and_forth_window_ms,
        clusters,
        workloads,
    })
}

fn labels(map: &BTreeMap<String, String>) -> Vec<Label> {
    map.iter()
        .map(|(k, v)| Label {
            key: k.clone(),
            value: v.clone(),
        })
        .collect()
}

/// Compiles a series that must never go below zero, naming the value at
/// fault: the step, the constant, or the series as a whole.
fn non_negative(spec: &Spanned<SeriesSpec>, path: &str, clock: &Clock<'_>) -> Result<Series> {
    let series = compile(spec, path, clock)?;
    let min = series.min();
    if min >= 0.0 && min.is_finite() {
        return Ok(series);
    }
    let (loc, field) = match &spec.value {
        SeriesSpec::Steps(steps) => steps
            .iter()
            .enumerate()
            .find(|(_, s)| s.value.value.is_nan() || s.value.value < 0.0)
            .map(|(i, s)| (s.value.referenced, format!("{path}.steps[{i}].value")))
            .unwrap_or((spec.referenced, path.to_owned())),
        _ => (spec.referenced, path.to_owned()),
    };
    Err(invalid(
        clock.file,
        loc,
        &field,
        format!("goes down to {min}; must never be negative"),
    ))
}

/// The thresholds as the CRD has them, checked and converted by the same code
/// as a `MigrationPolicy` (`crd::validate_policy`).
fn thresholds(raw: &RawScenario, file: &str) -> Result<(Thresholds, Guardrails, String)> {
    let d = ThresholdsSpec::default();
    let empty = RawThresholds::default();
    let t = raw.thresholds.as_ref().map_or(&empty, |t| &t.value);
    let block = raw
        .thresholds
        .as_ref()
        .map_or(Location::UNKNOWN, |t| t.referenced);
    let spec = ThresholdsSpec {
        min_hourly_savings: t
            .min_hourly_savings
            .as_ref()
            .map_or(d.min_hourly_savings, |v| v.value),
        min_savings_percent: t
            .min_savings_percent
            .as_ref()
            .map_or(d.min_savings_percent, |v| v.value),
        max_target_cpu_utilization_percent: t
            .max_target_cpu_utilization_percent
            .as_ref()
            .map_or(d.max_target_cpu_utilization_percent, |v| v.value),
        max_target_memory_utilization_percent: t
            .max_target_memory_utilization_percent
            .as_ref()
            .map_or(d.max_target_memory_utilization_percent, |v| v.value),
        cooldown: t
            .cooldown
            .as_ref()
            .map_or(d.cooldown.clone(), |v| Duration::new(v.value.clone())),
        max_migrations_per_cycle: t
            .max_migrations_per_cycle
            .as_ref()
            .map_or(d.max_migrations_per_cycle, |v| v.value),
        max_in_flight: t
            .max_in_flight
            .as_ref()
            .map_or(d.max_in_flight, |v| v.value),
        migration_cost: t
            .migration_cost
            .as_ref()
            .map_or(d.migration_cost, |v| v.value),
        max_payback_hours: t
            .max_payback_hours
            .as_ref()
            .map_or(d.max_payback_hours, |v| v.value),
    };
    let policy: MigrationPolicySpec = serde_json::from_value(serde_json::json!({
        "module": {"url": "https://simulation.invalid/policy.wasm", "sha256": "0".repeat(64)},
        "thresholds": spec,
        "selector": raw.selector,
        "targetClusters": raw.target_clusters,
        "parameters": raw.parameters.clone().unwrap_or_else(|| serde_json::json!({})),
    }))
    .map_err(|e| {
        invalid(
            file,
            Location::UNKNOWN,
            "parameters",
            format!("must be a map ({e})"),
        )
    })?;
    match validate_policy(&policy) {
        Ok(v) => Ok((v.thresholds, v.guardrails, v.parameters_json)),
        Err(errors) => {
            let first = &errors[0];
            let field = first.path.trim_start_matches("spec.").to_owned();
            let loc = match field.strip_prefix("thresholds.") {
                Some(name) => threshold_location(t, name).unwrap_or(block),
                None => Location::UNKNOWN,
            };
            Err(invalid(file, loc, &field, first.message.clone()))
        }
    }
}

fn threshold_location(t: &RawThresholds, name: &str) -> Option<Location> {
    match name {
        "minHourlySavings" => t.min_hourly_savings.as_ref().map(|v| v.referenced),
        "minSavingsPercent" => t.min_savings_percent.as_ref().map(|v| v.referenced),
        "maxTargetCpuUtilizationPercent" => t
            .max_target_cpu_utilization_percent
            .as_ref()
            .map(|v| v.referenced),
        "maxTargetMemoryUtilizationPercent" => t
            .max_target_memory_utilization_percent
            .as_ref()
            .map(|v| v.referenced),
        "cooldown" => t.cooldown.as_ref().map(|v| v.referenced),
        "migrationCost" => t.migration_cost.as_ref().map(|v| v.referenced),
        "maxPaybackHours" => t.max_payback_hours.as_ref().map(|v| v.referenced),
        _ => None,
    }
}
