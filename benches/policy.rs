//! `cargo bench --bench policy`: the cost of asking a policy.
//!
//! For 10, 1,000 and 10,000 workloads across 20 clusters it measures
//! instantiation plus a `noop` call, a `cheapest-cluster` evaluation including
//! marshalling and validation, and the same `cheapest-cluster` logic compiled
//! natively; then it states the wasm/native ratio, from the builds run in
//! turn, for the example built for contract v2 (`ferry:policy@2.0.0`, as
//! `scripts/build-policies` builds it) and for contract v1
//! (`ferry:policy@0.1.0`, the build kept in `tests/data/policies`), both
//! against the same native build. Last, what a module that floods its output costs: 20,000 lines
//! to `host.log`, stdout or stderr, nearly all past the caps and dropped,
//! against the same module answering quietly. And the languages: the
//! `cheapest-cluster` example written in Rust, Python and JavaScript (as
//! `scripts/build-policies` builds them), each one's module size, compile
//! time, instantiate+evaluate time and peak memory at 10 and 10,000
//! workloads, and its ratio to the Rust module, run in turn.

use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "../tests/support/mod.rs"]
mod support;
use support::modules::{LANGUAGES, component, module};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ferry::contract::{Cluster, Label, Resources, Snapshot, Thresholds, Workload};
use ferry::policy::{Engine, EngineConfig, Limits};
use ferry_policy_sdk as sdk;

const GIB: u64 = 1 << 30;
const CLUSTERS: usize = 20;

/// 20 clusters with spread prices and room, and `workloads` Deployments
/// spread over them, so that some moves pay and some targets fill up.
fn snapshot(workloads: usize) -> Snapshot {
    let clusters = (0..CLUSTERS)
        .map(|i| Cluster {
            name: format!("cluster-{i:02}"),
            region: format!("region-{}", i % 4),
            labels: vec![Label {
                key: "tier".into(),
                value: "general".into(),
            }],
            ready: i % 7 != 3,
            allocatable: Resources {
                cpu_millis: 2_000_000,
                memory_bytes: 8_000 * GIB,
            },
            requested: Resources {
                cpu_millis: 500_000 + 40_000 * i as u64,
                memory_bytes: 2_000 * GIB,
            },
            cpu_utilization: Some(0.3),
            memory_utilization: Some(0.3),
            cpu_core_hour_price: Some(0.020 + 0.0015 * ((i * 7) % CLUSTERS) as f64),
            memory_gib_hour_price: Some(0.0025 + 0.0002 * ((i * 3) % CLUSTERS) as f64),
            carbon_intensity: Some(50.0 + 30.0 * ((i * 5) % CLUSTERS) as f64),
        })
        .collect();
    let workloads = (0..workloads)
        .map(|i| Workload {
            namespace: format!("team-{}", i % 50),
            name: format!("service-{i}"),
            kind: "Deployment".into(),
            cluster: format!("cluster-{:02}", i % CLUSTERS),
            replicas: 1 + (i % 5) as u32,
            requests: Resources {
                cpu_millis: 250 + (i as u64 % 8) * 250,
                memory_bytes: (1 + i as u64 % 4) * GIB,
            },
            cpu_usage_millis: Some(200),
            memory_usage_bytes: Some(GIB / 2),
            hourly_cost: None,
            labels: vec![Label {
                key: "app".into(),
                value: format!("service-{i}"),
            }],
            seconds_since_migration: (i % 3 == 0).then_some(600),
            last_move_ms: (i % 3 == 0).then_some(1_767_225_000_000),
            moves_last_day: u32::from(i % 3 == 0),
            moves_last_week: u32::from(i % 3 == 0),
            disruption_cost: Some(0.25),
        })
        .collect();
    Snapshot {
        timestamp_ms: 1_767_225_600_000,
        clusters,
        workloads,
        thresholds: Thresholds {
            max_migrations_per_cycle: 50,
            ..Thresholds::default()
        },
        parameters: "{}".into(),
    }
}

/// The snapshot in the policy SDK's types, as the native build of the
/// logic takes it.
fn native_input(s: &Snapshot) -> sdk::Snapshot {
    let resources = |r: Resources| sdk::Resources {
        cpu_millis: r.cpu_millis,
        memory_bytes: r.memory_bytes,
    };
    let text = |s: &String| sdk::Text::from(s.as_str());
    let labels = |l: &[Label]| -> sdk::List<sdk::Label> {
        l.iter()
            .map(|l| sdk::Label {
                key: text(&l.key),
                value: text(&l.value),
            })
            .collect()
    };
    sdk::Snapshot {
        timestamp_ms: s.timestamp_ms,
        clusters: s
            .clusters
            .iter()
            .map(|c| sdk::Cluster {
                name: text(&c.name),
                region: text(&c.region),
                labels: labels(&c.labels),
                ready: c.ready,
                allocatable: resources(c.allocatable),
                requested: resources(c.requested),
                cpu_utilization: c.cpu_utilization.into(),
                memory_utilization: c.memory_utilization.into(),
                cpu_core_hour_price: c.cpu_core_hour_price.into(),
                memory_gib_hour_price: c.memory_gib_hour_price.into(),
                carbon_intensity: c.carbon_intensity.into(),
            })
            .collect(),
        workloads: s
            .workloads
            .iter()
            .map(|w| sdk::Workload {
                namespace: text(&w.namespace),
                name: text(&w.name),
                kind: text(&w.kind),
                cluster: text(&w.cluster),
                replicas: w.replicas,
                requests: resources(w.requests),
                cpu_usage_millis: w.cpu_usage_millis.into(),
                memory_usage_bytes: w.memory_usage_bytes.into(),
                hourly_cost: w.hourly_cost.into(),
                labels: labels(&w.labels),
                seconds_since_migration: w.seconds_since_migration.into(),
                last_move_ms: w.last_move_ms.into(),
                moves_last_day: w.moves_last_day,
                moves_last_week: w.moves_last_week,
                disruption_cost: w.disruption_cost.into(),
            })
            .collect(),
        thresholds: sdk::Thresholds {
            min_hourly_savings: s.thresholds.min_hourly_savings,
            min_savings_ratio: s.thresholds.min_savings_ratio,
            max_target_cpu_utilization: s.thresholds.max_target_cpu_utilization,
            max_target_memory_utilization: s.thresholds.max_target_memory_utilization,
            cooldown_seconds: s.thresholds.cooldown_seconds,
            max_migrations_per_cycle: s.thresholds.max_migrations_per_cycle,
        },
        parameters: text(&s.parameters),
    }
}

fn policy(c: &mut Criterion) {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let noop = engine
        .load("noop", &module("noop"), None)
        .expect("noop loads");
    let cheapest = engine
        .load("cheapest-cluster", &module("cheapest_cluster"), None)
        .expect("cheapest-cluster loads");
    let limits = Limits::default();

    for workloads in [10, 1_000, 10_000] {
        let input = snapshot(workloads);
        let native = native_input(&input);
        // The two builds must agree before their speeds are compared.
        let wasm_answer = engine
            .evaluate_blocking(&cheapest, &input, &limits)
            .expect("evaluates");
        let native_answer = cheapest_cluster::decide(&native).expect("decides");
        assert_eq!(
            wasm_answer.decisions.len() + wasm_answer.rejected.len(),
            native_answer.len()
        );
        assert!(
            !native_answer.is_empty(),
            "the bench input must produce moves"
        );

        let mut group = c.benchmark_group(format!("{workloads} workloads"));
        group.bench_with_input(
            BenchmarkId::new("instantiate + noop", workloads),
            &input,
            |b, input| {
                b.iter(|| {
                    engine
                        .evaluate_blocking(&noop, black_box(input), &limits)
                        .expect("noop")
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("cheapest-cluster wasm", workloads),
            &input,
            |b, input| {
                b.iter(|| {
                    engine
                        .evaluate_blocking(&cheapest, black_box(input), &limits)
                        .expect("cheapest")
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("cheapest-cluster native", workloads),
            &native,
            |b, native| b.iter(|| cheapest_cluster::decide(black_box(native)).expect("native")),
        );
        group.finish();
    }
}

/// The wasm/native ratios, measured with the builds run in turn, so that
/// a slow moment of this shared machine falls on all: Criterion's groups
/// above run each build for seconds on its own, and the ratio of their
/// figures moves with the load between them. Each round calls one build
/// three times and times the third, when its data is in the caches again as
/// it is in Criterion's loop, then does the same with the next. The
/// contract v1 build answers the same moves without reasons; both are
/// compared with the one native build.
fn ratio(_: &mut Criterion) {
    const CALLS: usize = 3;
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let v2 = engine
        .load("cheapest-cluster", &module("cheapest_cluster"), None)
        .expect("cheapest-cluster loads");
    let v1_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/policies/cheapest-cluster-contract-v1.wasm");
    let v1_bytes = std::fs::read(&v1_path).expect("the contract v1 build is kept");
    let v1 = engine
        .load("cheapest-cluster-v1", &v1_bytes, None)
        .expect("the contract v1 build loads");
    let limits = Limits::default();
    for (workloads, rounds) in [(1_000, 1_000), (10_000, 200)] {
        let input = snapshot(workloads);
        let native = native_input(&input);
        let timed = |call: &dyn Fn()| {
            for _ in 1..CALLS {
                call();
            }
            let start = Instant::now();
            call();
            start.elapsed().as_secs_f64()
        };
        let wasm_call = |policy: &ferry::policy::Policy| {
            black_box(
                engine
                    .evaluate_blocking(policy, black_box(&input), &limits)
                    .expect("cheapest"),
            );
        };
        let native_call = || {
            black_box(cheapest_cluster::decide(black_box(&native)).expect("native"));
        };
        let mut runs: [Vec<f64>; 5] = Default::default();
        for _ in 0..rounds {
            let w2 = timed(&|| wasm_call(&v2));
            let w1 = timed(&|| wasm_call(&v1));
            let n = timed(&native_call);
            for (run, value) in runs.iter_mut().zip([w2, w1, n, w2 / n, w1 / n]) {
                run.push(value);
            }
        }
        let [wasm2, wasm1, natives, ratio2, ratio1] = &mut runs;
        for (contract, ratios, wasm) in [("v2", ratio2, wasm2), ("v1", ratio1, wasm1)] {
            println!(
                "wasm/native, cheapest-cluster, contract {contract}, {workloads} workloads: \
                 {:.2}x (median of {rounds} rounds run in turn; wasm {:.0} us, native {:.0} us)",
                median(ratios),
                median(wasm) * 1e6,
                median(&mut natives.clone()) * 1e6,
            );
        }
    }
}

/// A hostile module's flood of output is dropped past the caps; this is what
/// the lines cost on the way, per channel, against a quiet evaluation.
fn log_flood(c: &mut Criterion) {
    const LINES: u32 = 20_000;
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let testbed = engine
        .load("testbed", &module("testbed"), None)
        .expect("testbed loads");
    let limits = Limits::default();
    let mut group = c.benchmark_group(format!("log flood, {LINES} lines"));
    group.sample_size(20);
    for via in ["quiet", "host", "stdout", "stderr"] {
        let parameters = if via == "quiet" {
            r#"{"mode": "ok"}"#.to_owned()
        } else {
            format!(r#"{{"mode": "flood-logs", "lines": {LINES}, "via": "{via}"}}"#)
        };
        let input = Snapshot {
            parameters,
            ..snapshot(10)
        };
        let evaluation = engine
            .evaluate_blocking(&testbed, &input, &limits)
            .expect("a flood still evaluates");
        assert!(via == "quiet" || evaluation.logs_dropped > 0);
        group.bench_with_input(BenchmarkId::new("via", via), &input, |b, input| {
            b.iter(|| {
                engine
                    .evaluate_blocking(&testbed, black_box(input), &limits)
                    .expect("flood")
            })
        });
    }
    group.finish();
}

/// Each language's `cheapest-cluster` on the same snapshots: rounds call the
/// three modules in turn (each twice, the second timed), so a slow moment of
/// the machine falls on all of them. Limits wide enough for the interpreters
/// at 10,000 workloads; the peak memory printed is what to set instead.
fn languages(_: &mut Criterion) {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let limits = Limits {
        timeout: Duration::from_secs(60),
        memory_bytes: 1 << 30,
        ..Limits::default()
    };
    let loaded: Vec<_> = LANGUAGES
        .iter()
        .map(|&lang| {
            let bytes = component(lang, "cheapest-cluster");
            let started = Instant::now();
            let policy = engine
                .load(lang, &bytes, None)
                .unwrap_or_else(|err| panic!("{lang} does not load: {err}"));
            println!(
                "languages, cheapest-cluster, {lang}: module {:.1} MiB, compiled once in {:.2} s",
                bytes.len() as f64 / f64::from(1 << 20),
                started.elapsed().as_secs_f64()
            );
            (lang, policy)
        })
        .collect();
    for (workloads, rounds) in [(10, 200), (10_000, 10)] {
        let input = snapshot(workloads);
        let mut times = vec![Vec::new(); loaded.len()];
        let mut peaks = vec![0; loaded.len()];
        for _ in 0..rounds {
            for (i, (lang, policy)) in loaded.iter().enumerate() {
                let run = || {
                    let started = Instant::now();
                    let evaluation = engine
                        .evaluate_blocking(policy, black_box(&input), &limits)
                        .unwrap_or_else(|err| panic!("{lang} fails: {err}"));
                    (started.elapsed().as_secs_f64(), evaluation.memory_bytes)
                };
                run();
                let (seconds, memory) = run();
                times[i].push(seconds);
                peaks[i] = memory;
            }
        }
        let rust = median(&mut times[0]);
        for (i, (lang, _)) in loaded.iter().enumerate() {
            let time = median(&mut times[i]);
            println!(
                "languages, cheapest-cluster, {workloads} workloads, {lang}: \
                 instantiate+evaluate {:.3} ms (median of {rounds}), {:.1}x rust, \
                 peak memory {} MiB",
                time * 1e3,
                time / rust,
                peaks[i] >> 20,
            );
        }
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

criterion_group!(benches, policy, ratio, log_flood, languages);
criterion_main!(benches);
