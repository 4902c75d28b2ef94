//! What a simulation found: per-run totals, time series bucketed for charts,
//! the migrations, the JSON form and the terminal table.
//!
//! The JSON is a pure function of the scenario, the seed and the modules:
//! maps are `BTreeMap`s, times are virtual, and no wall-clock time is in it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::optimum::Optimum;
use super::scenario::Scenario;
use crate::contract::Resources;

/// Most points of a time series in the report.
pub const MAX_POINTS: usize = 1000;

/// Time series are averaged over buckets of `steps` steps.
#[derive(Clone, Copy, Debug)]
pub struct Bucketer {
    pub steps: usize,
    pub buckets: usize,
}

impl Bucketer {
    pub fn new(total_steps: usize) -> Self {
        let steps = total_steps.div_ceil(MAX_POINTS).max(1);
        Bucketer {
            steps,
            buckets: total_steps.div_ceil(steps),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Completed,
    Failed,
    /// Still moving when the run ended.
    InFlight,
}

/// One move started by a policy.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationEvent {
    pub step: usize,
    /// Virtual time, ms since the epoch.
    pub time_ms: u64,
    pub namespace: String,
    pub name: String,
    pub from: String,
    pub to: String,
    /// What the policy claimed.
    pub hourly_savings: f64,
    pub outcome: Outcome,
    /// The policy's reason, and what a contract v2 policy added: a partial
    /// move (which the simulator carries out whole), a strategy hint and
    /// structured reasons.
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<crate::contract::Strategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasons: Option<crate::contract::Reasons>,
    #[serde(skip)]
    pub workload: usize,
}

/// Utilisation (requested over allocatable) of one cluster, per bucket.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSeries {
    pub cluster: String,
    pub cpu: Vec<f64>,
    pub memory: Vec<f64>,
}

/// The results of one run: the baseline or one policy.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    pub steps_simulated: usize,
    /// Cost of running the workloads over the run (hourly cost × hours).
    pub run_cost: f64,
    /// What the moves cost (`migration.cost` per move started).
    pub migration_cost: f64,
    /// Baseline total minus this run's total (`runCost + migrationCost`).
    pub saving: f64,
    /// `saving` over the hindsight optimum's saving ([`Report::optimal`]);
    /// null when the optimum saves nothing.
    pub share_of_optimal: Option<f64>,
    pub migrations: u64,
    pub completed: u64,
    pub failed: u64,
    /// Moves back to where the workload came from within the window.
    pub back_and_forth: u64,
    /// Workload-hours spent moving.
    pub migrating_hours: f64,
    /// Kilograms of CO2 the requested resources emitted over the run, by
    /// the clusters' carbon intensity; only when the scenario gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emissions_kg: Option<f64>,
    /// (step, cluster) pairs with requests over allocatable CPU or memory.
    pub capacity_breaches: u64,
    /// Policy errors by class.
    pub errors: BTreeMap<String, u64>,
    /// Refused decisions by rule.
    pub refusals: BTreeMap<String, u64>,
    /// Average hourly cost per bucket.
    pub cost_per_hour: Vec<f64>,
    /// Average kilograms of CO2 emitted per hour, per bucket; only when the
    /// scenario gives carbon intensity, as `emissions_kg`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emissions_per_hour: Option<Vec<f64>>,
    /// Moves started per bucket.
    pub migrations_per_bucket: Vec<u64>,
    pub utilization: Vec<ClusterSeries>,
    pub events: Vec<MigrationEvent>,
    #[serde(skip)]
    open: Vec<Option<usize>>,
    #[serde(skip)]
    counts: Vec<u32>,
    #[serde(skip)]
    step_hours: f64,
}

impl RunResult {
    pub(crate) fn new(name: &str, sha256: Option<String>, s: &Scenario, b: &Bucketer) -> Self {
        RunResult {
            name: name.to_owned(),
            sha256,
            steps_simulated: 0,
            emissions_kg: s
                .clusters
                .iter()
                .any(|c| c.carbon_intensity.is_some())
                .then_some(0.0),
            run_cost: 0.0,
            migration_cost: 0.0,
            saving: 0.0,
            share_of_optimal: None,
            migrations: 0,
            completed: 0,
            failed: 0,
            back_and_forth: 0,
            migrating_hours: 0.0,
            capacity_breaches: 0,
            errors: BTreeMap::new(),
            refusals: BTreeMap::new(),
            cost_per_hour: vec![0.0; b.buckets],
            emissions_per_hour: s
                .clusters
                .iter()
                .any(|c| c.carbon_intensity.is_some())
                .then(|| vec![0.0; b.buckets]),
            migrations_per_bucket: vec![0; b.buckets],
            utilization: s
                .clusters
                .iter()
                .map(|c| ClusterSeries {
                    cluster: c.name.clone(),
                    cpu: vec![0.0; b.buckets],
                    memory: vec![0.0; b.buckets],
                })
                .collect(),
            events: Vec::new(),
            open: vec![None; s.workloads.len()],
            counts: vec![0; b.buckets],
            step_hours: s.step_ms as f64 / 3_600_000.0,
        }
    }

    /// Adds step `t`'s emissions at `grams_per_hour`, when the scenario
    /// has carbon series. Called after `record_step` for the same step.
    pub(crate) fn record_emissions(&mut self, t: usize, grams_per_hour: f64, b: &Bucketer) {
        if let Some(kg) = &mut self.emissions_kg {
            *kg += grams_per_hour * self.step_hours / 1000.0;
        }
        if let Some(series) = &mut self.emissions_per_hour {
            series[t / b.steps] += grams_per_hour / 1000.0;
        }
    }

    pub(crate) fn record_step(
        &mut self,
        t: usize,
        hourly: f64,
        started: u64,
        requested: &[Resources],
        alloc: &[Resources],
        b: &Bucketer,
    ) {
        self.steps_simulated = t + 1;
        self.run_cost += hourly * self.step_hours;
        let k = t / b.steps;
        self.cost_per_hour[k] += hourly;
        self.migrations_per_bucket[k] += started;
        self.counts[k] += 1;
        for (c, series) in self.utilization.iter_mut().enumerate() {
            let ratio = |r: u64, a: u64| if a == 0 { 0.0 } else { r as f64 / a as f64 };
            series.cpu[k] += ratio(requested[c].cpu_millis, alloc[c].cpu_millis);
            series.memory[k] += ratio(requested[c].memory_bytes, alloc[c].memory_bytes);
        }
    }

    pub(crate) fn open_event(&mut self, event: MigrationEvent) {
        self.open[event.workload] = Some(self.events.len());
        self.events.push(event);
    }

    pub(crate) fn close_event(&mut self, workload: usize, _started: usize, outcome: Outcome) {
        if let Some(i) = self.open[workload].take() {
            self.events[i].outcome = outcome;
        }
    }

    /// Turns bucket sums into averages and drops buckets never reached.
    pub(crate) fn finish(&mut self, _s: &Scenario, b: &Bucketer) {
        let used = self.steps_simulated.div_ceil(b.steps);
        let counts = std::mem::take(&mut self.counts);
        let avg = |v: &mut Vec<f64>| {
            v.truncate(used);
            for (x, n) in v.iter_mut().zip(&counts) {
                *x /= f64::from((*n).max(1));
            }
        };
        avg(&mut self.cost_per_hour);
        if let Some(series) = &mut self.emissions_per_hour {
            avg(series);
        }
        self.migrations_per_bucket.truncate(used);
        for series in &mut self.utilization {
            avg(&mut series.cpu);
            avg(&mut series.memory);
        }
    }

    /// Run cost plus migration cost.
    pub fn total_cost(&self) -> f64 {
        self.run_cost + self.migration_cost
    }
}

/// Everything a simulation found.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    /// Virtual start, RFC 3339.
    pub start: String,
    pub step_seconds: u64,
    pub steps: usize,
    /// Fewer than `steps` when the run was stopped.
    pub steps_simulated: usize,
    pub complete: bool,
    /// Each point of a time series averages this many steps.
    pub bucket_steps: usize,
    pub clusters: Vec<String>,
    pub baseline: RunResult,
    /// The hindsight optimum over the simulated steps: the most any policy
    /// could have saved, knowing every future price.
    pub optimal: Optimum,
    pub policies: Vec<RunResult>,
}

impl Report {
    /// The JSON form, pretty-printed, ending in a newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        text.push('\n');
        text
    }

    /// The summary table for the terminal: one column per policy plus the
    /// baseline.
    pub fn summary_table(&self) -> String {
        let runs: Vec<&RunResult> = std::iter::once(&self.baseline)
            .chain(&self.policies)
            .collect();
        let map_text = |m: &BTreeMap<String, u64>| {
            if m.is_empty() {
                "0".to_owned()
            } else {
                m.iter()
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        };
        let base = self.baseline.total_cost();
        let mut rows: Vec<(&str, Vec<String>)> = vec![
            (
                "total cost",
                runs.iter()
                    .map(|r| format!("{:.2}", r.total_cost()))
                    .collect(),
            ),
            (
                "  running",
                runs.iter().map(|r| format!("{:.2}", r.run_cost)).collect(),
            ),
            (
                "  migrations",
                runs.iter()
                    .map(|r| format!("{:.2}", r.migration_cost))
                    .collect(),
            ),
            (
                "saving",
                runs.iter().map(|r| format!("{:.2}", r.saving)).collect(),
            ),
            (
                "CO2 kg",
                runs.iter()
                    .map(|r| r.emissions_kg.map_or("-".into(), |kg| format!("{kg:.1}")))
                    .collect(),
            ),
            (
                "saving %",
                runs.iter()
                    .map(|r| {
                        if base > 0.0 {
                            format!("{:.1}%", r.saving / base * 100.0)
                        } else {
                            "-".into()
                        }
                    })
                    .collect(),
            ),
            (
                "share of optimal",
                runs.iter()
                    .map(|r| {
                        r.share_of_optimal
                            .map_or_else(|| "-".into(), |s| format!("{:.1}%", s * 100.0))
                    })
                    .collect(),
            ),
            (
                "migrations",
                runs.iter().map(|r| r.migrations.to_string()).collect(),
            ),
            (
                "  completed",
                runs.iter().map(|r| r.completed.to_string()).collect(),
            ),
            (
                "  failed",
                runs.iter().map(|r| r.failed.to_string()).collect(),
            ),
            (
                "back-and-forth",
                runs.iter().map(|r| r.back_and_forth.to_string()).collect(),
            ),
            (
                "hours migrating",
                runs.iter()
                    .map(|r| format!("{:.1}", r.migrating_hours))
                    .collect(),
            ),
            (
                "capacity breaches",
                runs.iter()
                    .map(|r| r.capacity_breaches.to_string())
                    .collect(),
            ),
            (
                "policy errors",
                runs.iter().map(|r| map_text(&r.errors)).collect(),
            ),
            (
                "refused",
                runs.iter()
                    .map(|r| r.refusals.values().sum::<u64>().to_string())
                    .collect(),
            ),
        ];
        // The optimum's column: its costs, saving and moves; the rest
        // (outcomes, breaches, refusals) are a policy run's.
        let o = &self.optimal;
        let percent = |v: f64| {
            if base > 0.0 {
                format!("{:.1}%", v / base * 100.0)
            } else {
                "-".into()
            }
        };
        let optimal_cell = |label: &str| match label {
            "total cost" => format!("{:.2}", o.total_cost()),
            "  running" => format!("{:.2}", o.run_cost),
            "  migrations" => format!("{:.2}", o.migration_cost),
            "saving" => format!("{:.2}", o.saving),
            "saving %" => percent(o.saving),
            "share of optimal" if o.saving > 0.0 => "100.0%".to_owned(),
            "migrations" => o.migrations.to_string(),
            _ => "-".to_owned(),
        };
        for row in &mut rows {
            let cell = optimal_cell(row.0);
            row.1.push(cell);
        }
        let optimal_name = if o.exact { "optimal" } else { "optimal*" };
        let label_width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let names: Vec<&str> = runs
            .iter()
            .map(|r| r.name.as_str())
            .chain([optimal_name])
            .collect();
        let widths: Vec<usize> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                rows.iter()
                    .map(|row| row.1[i].chars().count())
                    .max()
                    .unwrap_or(0)
                    .max(name.chars().count())
            })
            .collect();
        let mut out = String::new();
        let _ = write!(out, "{:label_width$}", "");
        for (name, w) in names.iter().zip(&widths) {
            let _ = write!(out, "  {name:>w$}");
        }
        out.push('\n');
        for (label, cells) in rows {
            let _ = write!(out, "{label:label_width$}");
            for (cell, w) in cells.iter().zip(&widths) {
                let _ = write!(out, "  {cell:>w$}");
            }
            out.push('\n');
        }
        if o.exact {
            let _ = writeln!(
                out,
                "optimal: the hindsight optimum, exact (no cluster's capacity binds)"
            );
        } else {
            let _ = writeln!(
                out,
                "optimal*: an upper bound; capacity binds at {} (step, cluster) pairs, so this is the optimum without capacity",
                o.capacity_conflicts
            );
        }
        if !self.complete {
            let _ = writeln!(
                out,
                "stopped after {} of {} steps",
                self.steps_simulated, self.steps
            );
        }
        out
    }
}
