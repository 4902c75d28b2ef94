//! Migration protocol throughput and latency on two sandbox clusters with an
//! instant kubelet stand-in (Deployment status follows the spec at once).
//!
//! `cargo bench --bench migration`
//!
//! - latency: the time from the decision (`start_migration` called) to the
//!   local mirror reading `Completed`, one migration at a time;
//! - throughput: completed migrations per second with 100 started at once;
//!
//! each for an all-at-once move and for a progressive one in three steps
//! with no pause, in the same run, with their ratio.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use ferry::crd::{
    MigrationPhase, MigrationStrategy, ReplicaCount, StrategyType, WorkloadMigration,
};
use ferry::migration::{MigrationRequest, StartOutcome, start_migration};
use futures::future::join_all;
use kube::Api;
use kube::api::ListParams;
use support::cluster::world::{NS, World, create_deployment, phase, wait_available};

const LATENCY_RUNS: usize = 40;
const CONCURRENT: usize = 100;
/// Replicas of every moved Deployment: three steps of one for a progressive move.
const REPLICAS: i32 = 3;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let mut world = World::start(Duration::ZERO).await;
    world.sender_ctx.config.poll_interval = Duration::from_millis(10);
    world.start_sender();
    world.start_receiver();
    let all_at_once = measure(&world, "all", None).await;
    let progressive = measure(
        &world,
        "prog",
        Some(MigrationStrategy {
            type_: StrategyType::Progressive,
            step: Some(ReplicaCount::Count(1)),
            pause: None,
            min_available: None,
            gate: Vec::new(),
        }),
    )
    .await;
    println!(
        "Progressive (3 steps, no pause) against AllAtOnce in this run: {:.2}× the median latency, {:.2}× the throughput",
        progressive.median_ms / all_at_once.median_ms,
        progressive.per_second / all_at_once.per_second
    );
    world.shutdown().await;
}

/// What one strategy measured.
struct Figures {
    median_ms: f64,
    per_second: f64,
}

/// Latency one move at a time, then throughput with [`CONCURRENT`] moves
/// at once, of Deployments with [`REPLICAS`] replicas moved with `strategy`.
async fn measure(world: &World, prefix: &str, strategy: Option<MigrationStrategy>) -> Figures {
    let label = match &strategy {
        None => "AllAtOnce".to_owned(),
        Some(_) => format!("Progressive, {REPLICAS} steps of one replica, no pause"),
    };
    let request = |name: &str| MigrationRequest {
        strategy: strategy.clone(),
        ..MigrationRequest::deployment(NS, name, "b")
    };
    let mirrors: Api<WorkloadMigration> = world.mirrors();
    let mut latencies = Vec::new();
    for i in 0..LATENCY_RUNS {
        let name = format!("{prefix}-lat-{i}");
        create_deployment(&world.a.client, NS, &name, REPLICAS, serde_json::json!({})).await;
        wait_available(&world.a.client, &name, REPLICAS).await;
        let started = Instant::now();
        let migration = started_name(
            start_migration(&world.sender_ctx, request(&name))
                .await
                .expect("migration starts"),
        );
        loop {
            let wm = mirrors.get(&migration).await.expect("mirror");
            match phase(&wm) {
                MigrationPhase::Completed => break,
                p if p.is_terminal() => panic!("{migration} ended {p:?}"),
                _ => tokio::time::sleep(Duration::from_millis(2)).await,
            }
        }
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    let p90 = latencies[latencies.len() * 9 / 10];
    println!(
        "{label}: decision → Completed, {LATENCY_RUNS} sequential migrations: median {:.1} ms, p90 {:.1} ms, max {:.1} ms (target: median < 500 ms)",
        ms(median),
        ms(p90),
        ms(*latencies.last().unwrap())
    );

    let names: Vec<String> = (0..CONCURRENT)
        .map(|i| format!("{prefix}-tp-{i}"))
        .collect();
    join_all(
        names
            .iter()
            .map(|n| create_deployment(&world.a.client, NS, n, REPLICAS, serde_json::json!({}))),
    )
    .await;
    for n in &names {
        wait_available(&world.a.client, n, REPLICAS).await;
    }
    let started = Instant::now();
    let results = join_all(
        names
            .iter()
            .map(|n| start_migration(&world.sender_ctx, request(n))),
    )
    .await;
    let migrations: std::collections::BTreeSet<String> = results
        .into_iter()
        .map(|r| started_name(r.expect("migration starts")))
        .collect();
    loop {
        let list = mirrors
            .list(&ListParams::default())
            .await
            .expect("list mirrors");
        let done = list
            .items
            .iter()
            .filter(|m| migrations.contains(&m.metadata.name.clone().unwrap_or_default()))
            .filter(|m| phase(m) == MigrationPhase::Completed)
            .count();
        if done == CONCURRENT {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "only {done} of {CONCURRENT} completed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    let per_second = CONCURRENT as f64 / elapsed.as_secs_f64();
    println!(
        "{label}: {CONCURRENT} migrations at once: all Completed in {:.1} ms = {per_second:.1} migrations/s (target: ≥ 20/s)",
        ms(elapsed),
    );
    Figures {
        median_ms: ms(median),
        per_second,
    }
}

fn started_name(outcome: StartOutcome) -> String {
    match outcome {
        StartOutcome::Created { name } | StartOutcome::AlreadyExists { name } => name,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
