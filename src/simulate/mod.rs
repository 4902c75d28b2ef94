//! Offline simulation: what policies would have done over a scenario.
//!
//! A [`Scenario`] (YAML; docs/simulation.md, "The scenario file", example
//! `examples/simulate/scenario.yaml`) describes clusters, workloads, prices
//! and capacity over time. [`simulate`] runs each policy on a virtual clock
//! through the same [`crate::guardrails`] as the live operator, next to a
//! baseline in which nothing moves, and returns a [`Report`]: JSON
//! ([`Report::to_json`]), a terminal table ([`Report::summary_table`]) and a
//! self-contained HTML page ([`html::render`]). [`replay`] builds the
//! scenario from the history recorded in Prometheus instead of a file. The
//! docs/simulation.md shows the command.
//!
//! Deterministic: the same scenario, seed and modules give the same report,
//! byte for byte (fuel is deterministic; a wall-clock timeout is not, so keep
//! the timeout generous). It never touches a cluster and reads no clock;
//! only [`replay`] reads Prometheus, and only to build the scenario.

mod error;
pub mod html;
mod optimum;
mod random;
pub mod replay;
mod report;
mod run;
mod scenario;
mod series;

use std::sync::atomic::{AtomicBool, AtomicU64};

pub use error::{Error, Located, Result};
pub use optimum::Optimum;
pub use report::{Bucketer, ClusterSeries, MAX_POINTS, MigrationEvent, Outcome, Report, RunResult};
pub use run::Control;
pub use scenario::{
    ClusterSpec, DEFAULT_START_MS, MAX_STEPS, MigrationModel, Scenario, WorkloadSpec, load, parse,
};
pub use series::Series;

use crate::policy::{Engine, Limits, Policy};

/// A loaded policy and the name it has in the report.
#[derive(Clone, Debug)]
pub struct NamedPolicy {
    pub name: String,
    pub policy: Policy,
}

/// Runs the baseline and every policy over the scenario, each policy on its
/// own thread. Stops early (with what was simulated so far) when
/// `control.stop` is set.
pub fn simulate(
    scenario: &Scenario,
    engine: &Engine,
    policies: &[NamedPolicy],
    limits: &Limits,
    control: &Control<'_>,
) -> Report {
    let grid = run::Grid::new(scenario);
    let b = Bucketer::new(scenario.steps);
    let (baseline, runs) = std::thread::scope(|scope| {
        let handles: Vec<_> = policies
            .iter()
            .map(|p| {
                let grid = &grid;
                scope.spawn(move || {
                    run::run_policy(
                        scenario, grid, engine, &p.policy, &p.name, limits, &b, control,
                    )
                })
            })
            .collect();
        let baseline = run::baseline(scenario, &grid, &b, control);
        let runs: Vec<RunResult> = handles
            .into_iter()
            .zip(policies)
            .map(|(h, p)| {
                h.join().unwrap_or_else(|_| {
                    let mut r =
                        RunResult::new(&p.name, Some(p.policy.digest().to_owned()), scenario, &b);
                    r.errors.insert("Host".to_owned(), 1);
                    r
                })
            })
            .collect();
        (baseline, runs)
    });
    assemble(scenario, &grid, &b, baseline, runs)
}

/// The hindsight optimum of the whole scenario on its own, without running
/// any policy ([`Report::optimal`] has it over the simulated steps).
pub fn hindsight_optimum(scenario: &Scenario) -> Optimum {
    optimum::optimum(scenario, &run::Grid::new(scenario), scenario.steps)
}

fn assemble(
    scenario: &Scenario,
    full: &run::Grid,
    b: &Bucketer,
    mut baseline: RunResult,
    mut runs: Vec<RunResult>,
) -> Report {
    // Every run covers the same steps: the fewest any of them reached.
    let simulated = runs
        .iter()
        .map(|r| r.steps_simulated)
        .chain([baseline.steps_simulated])
        .min()
        .unwrap_or(0);
    if baseline.steps_simulated > simulated {
        // Stopped runs: recompute the baseline over the common span.
        let stop = AtomicBool::new(false);
        let progress = AtomicU64::new(0);
        let mut short = scenario.clone();
        short.steps = simulated;
        let grid = run::Grid::new(&short);
        baseline = run::baseline(
            &short,
            &grid,
            b,
            &Control {
                stop: &stop,
                progress: &progress,
            },
        );
    }
    let base = baseline.total_cost();
    let mut optimal = optimum::optimum(scenario, full, simulated);
    // Against the report's own baseline, as every policy's saving is.
    optimal.saving = base - optimal.total_cost();
    let share = |saving: f64| (optimal.saving > 0.0).then(|| saving / optimal.saving);
    baseline.share_of_optimal = share(0.0);
    for r in &mut runs {
        r.saving = base - r.total_cost();
        r.share_of_optimal = share(r.saving);
    }
    let start = jiff::Timestamp::from_millisecond(scenario.start_ms as i64)
        .map(|t| t.to_string())
        .unwrap_or_default();
    Report {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        start,
        step_seconds: scenario.step_ms / 1000,
        steps: scenario.steps,
        steps_simulated: simulated,
        complete: simulated == scenario.steps,
        bucket_steps: b.steps,
        clusters: scenario.clusters.iter().map(|c| c.name.clone()).collect(),
        baseline,
        optimal,
        policies: runs,
    }
}
