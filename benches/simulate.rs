//! `ferry simulate` at scale: 30 days at 5-minute steps (8,640 steps), 500
//! workloads across 10 clusters, the `cheapest-cluster` policy. Target: at
//! most 10 s and 500 MiB on a 2-core machine.
//!
//! `cargo bench --bench simulate` (build the policies first). Prints steps
//! per second and peak memory (VmHWM), the time the hindsight optimum takes
//! on its own, and the policy's share of the optimum and back-and-forth
//! share. With `FERRY_BENCH_SEEDS=1,2,3,4,5` it then runs every example
//! policy on each of those seeds and prints the same shares per seed;
//! `FERRY_BENCH_AMPLITUDE` (default 0.008 per core-hour) sharpens or
//! softens the daily price swing of those seeded runs.

#[path = "../tests/support/mod.rs"]
mod support;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use ferry::policy::{Engine, EngineConfig, Limits};
use ferry::simulate::{self, Control, NamedPolicy, Report, Scenario};

const CLUSTERS: usize = 10;
const WORKLOADS_PER_CLUSTER: usize = 50;

fn scenario_text() -> String {
    scenario_with_swing(0.008)
}

/// The bench's scenario with a daily CPU price swing of `amplitude` around
/// each cluster's base price.
fn scenario_with_swing(amplitude: f64) -> String {
    let mut y = String::from(
        "name: bench-30d\nduration: 30d\nstep: 5m\nseed: 42\n\
         thresholds: {minHourlySavings: 0.001, minSavingsPercent: 5, cooldown: 6h, maxMigrationsPerCycle: 5, migrationCost: 0.01}\n\
         migration: {duration: 15m, failureProbability: 0.05}\nclusters:\n",
    );
    for c in 0..CLUSTERS {
        let base = 0.03 + 0.002 * c as f64;
        let peak = (c * 5) % 24;
        let price = if c % 3 == 0 {
            format!(
                "{{spikes: {{base: {{daily: {{base: {base}, amplitude: {amplitude}, peakHour: {peak}}}}}, probability: 0.002, multiplier: 3, duration: 2h}}}}"
            )
        } else {
            format!("{{daily: {{base: {base}, amplitude: {amplitude}, peakHour: {peak}}}}}")
        };
        let _ = writeln!(
            y,
            "  - name: c{c}\n    region: r{}\n    allocatable: {{cpu: 400, memory: 1600}}\n    prices: {{cpuCoreHour: {price}, memoryGibHour: 0.004}}",
            c % 3
        );
    }
    y.push_str("workloads:\n");
    for c in 0..CLUSTERS {
        let _ = writeln!(
            y,
            "  - name: app-c{c}\n    namespace: ns{}\n    count: {WORKLOADS_PER_CLUSTER}\n    cluster: c{c}\n    replicas: 2\n    requests: {{cpu: 500m, memory: 1Gi}}\n    usage: {{cpu: 0.3, memory: 0.6}}",
            c % 4
        );
    }
    y
}

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it too: keep it one run.
    let bytes = support::modules::module("cheapest_cluster");
    let dir = std::env::temp_dir();
    let scenario = simulate::parse(&scenario_text(), "bench.yaml", &dir, None).expect("scenario");
    assert_eq!(scenario.steps, 8640);
    assert_eq!(scenario.workloads.len(), 500);

    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let policy = engine.load("cheapest-cluster", &bytes, None).expect("load");
    let policies = [NamedPolicy {
        name: "cheapest-cluster".into(),
        policy,
    }];
    let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
    let limits = Limits::default();
    let started = Instant::now();
    let report = simulate::simulate(
        &scenario,
        &engine,
        &policies,
        &limits,
        &Control {
            stop: &stop,
            progress: &progress,
        },
    );
    let elapsed = started.elapsed().as_secs_f64();
    let p = &report.policies[0];
    println!(
        "simulate/30d-5m-500w-10c: {} steps in {elapsed:.2}s = {:.0} steps/s; {} migrations, {} errors; peak memory (VmHWM) {:.1} MiB",
        report.steps_simulated,
        report.steps_simulated as f64 / elapsed,
        p.migrations,
        p.errors.values().sum::<u64>(),
        vm_hwm_kib().unwrap_or(0) as f64 / 1024.0
    );
    let started = Instant::now();
    let optimal = simulate::hindsight_optimum(&scenario);
    println!(
        "simulate/30d-5m-500w-10c: hindsight optimum alone in {:.3}s ({} migrations, exact: {})",
        started.elapsed().as_secs_f64(),
        optimal.migrations,
        optimal.exact
    );
    print_shares(42, &report);

    let Ok(seeds) = std::env::var("FERRY_BENCH_SEEDS") else {
        return;
    };
    let amplitude: f64 = std::env::var("FERRY_BENCH_AMPLITUDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.008);
    println!("seeded runs with a daily swing of {amplitude} per core-hour");
    let examples = [
        "cheapest_cluster",
        "spot_aware",
        "utilization_balancer",
        "carbon_aware",
    ];
    let policies: Vec<NamedPolicy> = examples
        .iter()
        .map(|name| NamedPolicy {
            name: (*name).to_owned(),
            policy: engine
                .load(name, &support::modules::module(name), None)
                .expect("load"),
        })
        .collect();
    for seed in seeds
        .split(',')
        .filter_map(|s| s.trim().parse::<u64>().ok())
    {
        let scenario: Scenario = simulate::parse(
            &scenario_with_swing(amplitude),
            "bench.yaml",
            &dir,
            Some(seed),
        )
        .expect("scenario");
        let report = simulate::simulate(
            &scenario,
            &engine,
            &policies,
            &limits,
            &Control {
                stop: &stop,
                progress: &progress,
            },
        );
        print_shares(seed, &report);
    }
}

/// One line per policy: its saving, its share of the hindsight optimum,
/// and back-and-forth moves as a share of its moves.
fn print_shares(seed: u64, report: &Report) {
    let o = &report.optimal;
    for p in &report.policies {
        println!(
            "simulate/30d-5m-500w-10c seed {seed}: {}: saving {:.2} of the optimum's {:.2}{} = {}; {} migrations, {} back-and-forth = {:.1}%",
            p.name,
            p.saving,
            o.saving,
            if o.exact { "" } else { " (upper bound)" },
            p.share_of_optimal
                .map_or_else(|| "-".to_owned(), |s| format!("{:.1}%", s * 100.0)),
            p.migrations,
            p.back_and_forth,
            if p.migrations > 0 {
                p.back_and_forth as f64 / p.migrations as f64 * 100.0
            } else {
                0.0
            }
        );
    }
}
