//! From the file as written ([`super::raw`]) to a [`Scenario`]: the clock,
//! the migration model, the clusters and the workloads, every series
//! compiled to the step grid. The steps run in the order of the file's
//! checks, so a file with several problems always reports the same first
//! one. Never accepts a value it could not check.

use std::collections::BTreeSet;
use std::path::Path;

use serde_saphyr::{Location, Spanned};

use super::raw::{RawCluster, RawMigration, RawScenario, RawWorkload};
use super::thresholds::thresholds;
use super::{
    ClusterSpec, DEFAULT_START_MS, MAX_STEPS, MigrationModel, Scenario, WorkloadSpec, duration_of,
    invalid,
};
use crate::contract::Label;
use crate::simulate::error::Result;
use crate::simulate::series::{Clock, Series, SeriesSpec, compile};
use crate::units::scenario::{cpu_millis, memory_bytes};

/// The virtual clock as the file sets it.
struct Timing {
    start_ms: u64,
    step_ms: u64,
    steps: usize,
    /// The policy runs every `interval_steps` steps.
    interval_steps: usize,
}

pub(super) fn compile_scenario(
    raw: RawScenario,
    file: &str,
    dir: &Path,
    seed: Option<u64>,
) -> Result<Scenario> {
    let timing = timing(&raw, file)?;
    let seed = seed.or(raw.seed).unwrap_or(0);

    let (thresholds, guardrails, parameters_json) = thresholds(&raw, file)?;

    let migration = migration_model(
        raw.migration.as_ref(),
        file,
        timing.step_ms,
        guardrails.migration_cost,
    )?;
    let back_and_forth_window_ms = match &raw.back_and_forth_window {
        Some(w) => duration_of(file, "backAndForthWindow", w)?,
        None => 86_400_000,
    };

    let clock = Clock {
        start_ms: timing.start_ms,
        step_ms: timing.step_ms,
        steps: timing.steps,
        seed,
        dir,
        file,
    };
    let clusters = clusters(&raw.clusters, &clock)?;
    let workloads = workloads(&raw.workloads, &clusters, &clock)?;

    Ok(Scenario {
        name: raw.name.clone().unwrap_or_else(|| file.to_owned()),
        start_ms: timing.start_ms,
        step_ms: timing.step_ms,
        steps: timing.steps,
        interval_steps: timing.interval_steps,
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

/// `start`, `step`, `duration` and `interval`: at least one step of at least
/// 1s, at most [`MAX_STEPS`], the interval a whole number of steps.
fn timing(raw: &RawScenario, file: &str) -> Result<Timing> {
    let start_ms = start_ms(raw.start.as_ref(), file)?;
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
    Ok(Timing {
        start_ms,
        step_ms,
        steps: steps as usize,
        interval_steps,
    })
}

/// `start`: an RFC 3339 time after 1970, [`DEFAULT_START_MS`] when absent.
fn start_ms(start: Option<&Spanned<String>>, file: &str) -> Result<u64> {
    let Some(s) = start else {
        return Ok(DEFAULT_START_MS);
    };
    let ts: jiff::Timestamp = s.value.parse().map_err(|e| {
        invalid(
            file,
            s.referenced,
            "start",
            format!(
                "{:?} is not an RFC 3339 time ({e}); write for example \"2025-01-06T00:00:00Z\"",
                s.value
            ),
        )
    })?;
    u64::try_from(ts.as_millisecond())
        .map_err(|_| invalid(file, s.referenced, "start", "must be after 1970"))
}

/// `migration`: how long a move takes (in whole steps, at least one), what
/// it costs (the thresholds' `migrationCost` when absent) and how often it
/// fails.
fn migration_model(
    m: Option<&RawMigration>,
    file: &str,
    step_ms: u64,
    default_cost: f64,
) -> Result<MigrationModel> {
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
        None => default_cost,
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
    Ok(MigrationModel {
        duration_steps: (duration_ms.div_ceil(step_ms) as usize).max(1),
        cost,
        failure_probability,
    })
}

/// `clusters`: at least one, names unique and not empty, capacity and prices
/// never negative.
fn clusters(raw: &[RawCluster], clock: &Clock<'_>) -> Result<Vec<ClusterSpec>> {
    let file = clock.file;
    if raw.is_empty() {
        return Err(invalid(
            file,
            Location::UNKNOWN,
            "clusters",
            "lists no cluster",
        ));
    }
    let mut clusters: Vec<ClusterSpec> = Vec::with_capacity(raw.len());
    for (i, c) in raw.iter().enumerate() {
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
            labels: Label::from_map(&c.labels),
            cpu_cores: non_negative(
                &c.allocatable.cpu,
                &format!("{path}.allocatable.cpu"),
                clock,
            )?,
            memory_gib: non_negative(
                &c.allocatable.memory,
                &format!("{path}.allocatable.memory"),
                clock,
            )?,
            cpu_price: non_negative(
                &c.prices.cpu_core_hour,
                &format!("{path}.prices.cpuCoreHour"),
                clock,
            )?,
            memory_price: non_negative(
                &c.prices.memory_gib_hour,
                &format!("{path}.prices.memoryGibHour"),
                clock,
            )?,
            carbon_intensity: c
                .carbon_intensity
                .as_ref()
                .map(|spec| non_negative(spec, &format!("{path}.carbonIntensity"), clock))
                .transpose()?,
        });
    }
    Ok(clusters)
}

/// `workloads`: each entry once, or `count` times as `name-0`, `name-1`, …;
/// every `namespace/name` unique and not empty.
fn workloads(
    raw: &[RawWorkload],
    clusters: &[ClusterSpec],
    clock: &Clock<'_>,
) -> Result<Vec<WorkloadSpec>> {
    let mut workloads: Vec<WorkloadSpec> = Vec::new();
    let mut names = BTreeSet::new();
    for (i, w) in raw.iter().enumerate() {
        let path = format!("workloads[{i}]");
        let shape = shape(w, &path, clusters, clock)?;
        let count = w.count.as_ref().map_or(1, |c| c.value);
        for n in 0..count {
            let name = if w.count.is_some() {
                format!("{}-{n}", w.name.value)
            } else {
                w.name.value.clone()
            };
            if name.is_empty() || !names.insert((w.namespace.clone(), name.clone())) {
                return Err(invalid(
                    clock.file,
                    w.name.referenced,
                    &format!("{path}.name"),
                    format!("{}/{name} is empty or not unique", w.namespace),
                ));
            }
            workloads.push(WorkloadSpec {
                namespace: w.namespace.clone(),
                name,
                kind: w.kind.clone(),
                cluster: shape.cluster,
                labels: Label::from_map(&w.labels),
                pinned: w.pinned,
                replicas: shape.replicas.clone(),
                pod_cpu_millis: shape.cpu_millis,
                pod_memory_bytes: shape.memory_bytes,
                usage_cpu_cores: shape.usage_cpu.clone(),
                usage_memory_gib: shape.usage_memory.clone(),
            });
        }
    }
    Ok(workloads)
}

/// What every copy of one `workloads[i]` entry shares.
struct Shape {
    /// Index into the clusters.
    cluster: usize,
    cpu_millis: u64,
    memory_bytes: u64,
    replicas: Series,
    usage_cpu: Option<Series>,
    usage_memory: Option<Series>,
}

/// One entry's cluster, per-pod requests (bare numbers are cores and GiB),
/// replicas (1 when absent) and usage, checked in that order.
fn shape(
    w: &RawWorkload,
    path: &str,
    clusters: &[ClusterSpec],
    clock: &Clock<'_>,
) -> Result<Shape> {
    let file = clock.file;
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
    let cpu = cpu_millis(&w.requests.cpu.value.text()).map_err(|m| {
        invalid(
            file,
            w.requests.cpu.referenced,
            &format!("{path}.requests.cpu"),
            m,
        )
    })?;
    let memory = memory_bytes(&w.requests.memory.value.text()).map_err(|m| {
        invalid(
            file,
            w.requests.memory.referenced,
            &format!("{path}.requests.memory"),
            m,
        )
    })?;
    let replicas = match &w.replicas {
        Some(r) => non_negative(r, &format!("{path}.replicas"), clock)?,
        None => Series::Constant(1.0),
    };
    let usage = w.usage.as_ref();
    let usage_cpu = usage
        .and_then(|u| u.cpu.as_ref())
        .map(|s| non_negative(s, &format!("{path}.usage.cpu"), clock))
        .transpose()?;
    let usage_memory = usage
        .and_then(|u| u.memory.as_ref())
        .map(|s| non_negative(s, &format!("{path}.usage.memory"), clock))
        .transpose()?;
    Ok(Shape {
        cluster,
        cpu_millis: cpu,
        memory_bytes: memory,
        replicas,
        usage_cpu,
        usage_memory,
    })
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
