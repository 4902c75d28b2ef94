//! Migration protocol throughput and latency on two sandbox clusters with an
//! instant kubelet stand-in (Deployment status follows the spec at once).
//!
//! `cargo bench --bench migration`
//!
//! - latency: the time from the decision (`start_migration` called) to the
//!   local mirror reading `Completed`, one migration at a time;
//! - throughput: completed migrations per second with 100 started at once.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use ferry::crd::{MigrationPhase, WorkloadMigration};
use ferry::migration::{MigrationRequest, StartOutcome, start_migration};
use futures::future::join_all;
use kube::Api;
use kube::api::ListParams;
use support::cluster::world::{NS, World, create_deployment, phase, wait_available};

const LATENCY_RUNS: usize = 40;
const CONCURRENT: usize = 100;

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
    let mirrors: Api<WorkloadMigration> = world.mirrors();

    // Latency, one at a time.
    let mut latencies = Vec::new();
    for i in 0..LATENCY_RUNS {
        let name = format!("lat-{i}");
        create_deployment(&world.a.client, NS, &name, 2, serde_json::json!({})).await;
        wait_available(&world.a.client, &name, 2).await;
        let started = Instant::now();
        let migration = started_name(
            start_migration(
                &world.sender_ctx,
                MigrationRequest::deployment(NS, &name, "b"),
            )
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
        "decision → Completed, {LATENCY_RUNS} sequential migrations: median {:.1} ms, p90 {:.1} ms, max {:.1} ms (target: median < 500 ms)",
        ms(median),
        ms(p90),
        ms(*latencies.last().unwrap())
    );

    // Throughput, 100 at once.
    let names: Vec<String> = (0..CONCURRENT).map(|i| format!("tp-{i}")).collect();
    join_all(
        names
            .iter()
            .map(|n| create_deployment(&world.a.client, NS, n, 2, serde_json::json!({}))),
    )
    .await;
    for n in &names {
        wait_available(&world.a.client, n, 2).await;
    }
    let started = Instant::now();
    let results = join_all(
        names
            .iter()
            .map(|n| start_migration(&world.sender_ctx, MigrationRequest::deployment(NS, n, "b"))),
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
            started.elapsed() < Duration::from_secs(120),
            "only {done} of {CONCURRENT} completed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    println!(
        "{CONCURRENT} migrations at once: all Completed in {:.1} ms = {:.1} migrations/s (target: ≥ 20/s)",
        ms(elapsed),
        CONCURRENT as f64 / elapsed.as_secs_f64()
    );
    world.shutdown().await;
}

fn started_name(outcome: StartOutcome) -> String {
    match outcome {
        StartOutcome::Created { name } | StartOutcome::AlreadyExists { name } => name,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
