//! `ferry simulate` at scale: 30 days at 5-minute steps (8,640 steps), 500
//! workloads across 10 clusters, the `cheapest-cluster` policy. Target: at
//! most 10 s and 500 MiB on a 2-core machine.
//!
//! `cargo bench --bench simulate` (build the policies first). Prints steps
//! per second and peak memory (VmHWM).

#[path = "../tests/support/mod.rs"]
mod support;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use ferry::policy::{Engine, EngineConfig, Limits};
use ferry::simulate::{self, Control, NamedPolicy};

const CLUSTERS: usize = 10;
const WORKLOADS_PER_CLUSTER: usize = 50;

fn scenario_text() -> String {
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
                "{{spikes: {{base: {{daily: {{base: {base}, amplitude: 0.008, peakHour: {peak}}}}}, probability: 0.002, multiplier: 3, duration: 2h}}}}"
            )
        } else {
            format!("{{daily: {{base: {base}, amplitude: 0.008, peakHour: {peak}}}}}")
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
}
