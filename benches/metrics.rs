//! One full metrics snapshot against a real Prometheus: 20 clusters in one
//! shared Prometheus (told apart by a `cluster` label) and 10,000 Deployments
//! in the first. Prints the wall time of a snapshot and the HTTP requests it
//! took per cluster; the budget is 1 s and 10 requests per cluster.
//!
//! Run: `cargo bench -p ferry --bench metrics` (needs `[[bench]] name =
//! "metrics", harness = false`). The fixture is generated into a temporary
//! directory at start and backfilled with promtool, which takes a while.
#![cfg_attr(test, allow(dead_code))]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use ferry::metrics::{self, PrometheusConfig, PrometheusEndpoint, PrometheusSource};
use jiff::Timestamp;
use support::prometheus::{OpenMetrics, Prometheus};

const CLUSTERS: usize = 20;
const WORKLOADS: usize = 10_000;
const NODES_PER_CLUSTER: usize = 10;
const PODS_PER_OTHER_CLUSTER: usize = 100;
const T0: i64 = 1_767_225_600;
/// Three samples a minute apart: enough for `rate()`, little to backfill.
const TIMES: [i64; 3] = [T0, T0 + 60, T0 + 120];
const AT: i64 = T0 + 120;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
const RUNS: usize = 5;

fn cluster_name(i: usize) -> String {
    format!("cluster-{i:02}")
}

fn generate() -> String {
    let mut om = OpenMetrics::default();
    let steady = |v: f64| TIMES.iter().map(move |t| (*t, v));
    for c in 0..CLUSTERS {
        let cluster = cluster_name(c);
        for n in 0..NODES_PER_CLUSTER {
            let node = format!("node-{n}");
            let l = [("cluster", cluster.as_str()), ("node", node.as_str())];
            om.gauge("node_cpu_hourly_cost", &l, steady(0.02 + c as f64 / 1000.0));
            om.gauge("node_ram_hourly_cost", &l, steady(0.003));
            om.gauge("node_total_hourly_cost", &l, steady(0.5));
            for (resource, value) in [("cpu", 16.0), ("memory", 64.0 * GIB)] {
                let l = [l[0], l[1], ("resource", resource)];
                om.gauge("kube_node_status_allocatable", &l, steady(value));
            }
        }
        let pods = if c == 0 {
            WORKLOADS
        } else {
            PODS_PER_OTHER_CLUSTER
        };
        for p in 0..pods {
            let (deployment, rs, pod) = (
                format!("app-{p}"),
                format!("app-{p}-rs"),
                format!("app-{p}-rs-x"),
            );
            let ns = format!("ns-{}", p % 50);
            let base = [
                ("cluster", cluster.as_str()),
                ("namespace", ns.as_str()),
                ("pod", pod.as_str()),
            ];
            let container = [base[0], base[1], base[2], ("container", "app")];
            for (resource, value) in [("cpu", 0.25), ("memory", 0.5 * GIB)] {
                let l = [
                    container[0],
                    container[1],
                    container[2],
                    container[3],
                    ("resource", resource),
                ];
                om.gauge("kube_pod_container_resource_requests", &l, steady(value));
            }
            om.counter(
                "container_cpu_usage_seconds",
                &container,
                TIMES.iter().map(|t| (*t, (t - T0) as f64 * 0.1)),
            );
            om.gauge(
                "container_memory_working_set_bytes",
                &container,
                steady(0.25 * GIB),
            );
            om.gauge("container_cpu_allocation", &container, steady(0.25));
            om.gauge(
                "container_memory_allocation_bytes",
                &container,
                steady(0.5 * GIB),
            );
            let owner = [
                base[0],
                base[1],
                base[2],
                ("owner_kind", "ReplicaSet"),
                ("owner_name", rs.as_str()),
            ];
            om.gauge("kube_pod_owner", &owner, steady(1.0));
            let rs_owner = [
                base[0],
                base[1],
                ("replicaset", rs.as_str()),
                ("owner_kind", "Deployment"),
                ("owner_name", deployment.as_str()),
            ];
            om.gauge("kube_replicaset_owner", &rs_owner, steady(1.0));
        }
    }
    om.render()
}

async fn bench() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("bench.om");
    std::fs::write(&file, generate()).expect("write fixture");
    let prometheus = Prometheus::start(&[&file]);
    eprintln!("fixture generated and served in {:.1?}", started.elapsed());

    let clusters: Vec<String> = (0..CLUSTERS).map(cluster_name).collect();
    let endpoint = PrometheusEndpoint {
        url: prometheus.url().to_owned(),
        cluster_label: Some("cluster".to_owned()),
        ..PrometheusEndpoint::default()
    };
    let config = PrometheusConfig {
        timeout: Duration::from_secs(30),
        ..PrometheusConfig::default()
    };
    let at = Timestamp::from_second(AT).expect("time");
    // The same snapshot with a pod join that reaches Deployments only, in
    // turn with the default one: what joining StatefulSet pods costs.
    let mut deployments_only = config.clone();
    deployments_only.queries.pod_deployment = DEPLOYMENTS_ONLY.to_owned();
    let default = measure(config, &clusters, &endpoint, at).await;
    let narrow = measure(deployments_only, &clusters, &endpoint, at).await;
    println!(
        "default join / Deployments-only join: {:.2}× ({:.1} ms against {:.1} ms)",
        default.as_secs_f64() / narrow.as_secs_f64(),
        default.as_secs_f64() * 1000.0,
        narrow.as_secs_f64() * 1000.0
    );
}

/// The pod join before StatefulSets were joined too.
const DEPLOYMENTS_ONLY: &str = concat!(
    r#"max by (namespace, pod, deployment) ("#,
    r#"label_replace(kube_pod_owner{owner_kind="ReplicaSet",{cluster_selector}}, "replicaset", "$1", "owner_name", "(.+)")"#,
    r#" * on(namespace, replicaset) group_left(deployment) "#,
    r#"max by (namespace, replicaset, deployment) ("#,
    r#"label_replace(kube_replicaset_owner{owner_kind="Deployment",{cluster_selector}}, "deployment", "$1", "owner_name", "(.+)")))"#,
);

/// Takes `RUNS` snapshots with `config`, prints each, and returns the median.
async fn measure(
    config: PrometheusConfig,
    clusters: &[String],
    endpoint: &PrometheusEndpoint,
    at: Timestamp,
) -> Duration {
    let source = PrometheusSource::new(
        config,
        clusters.iter().map(|c| (c.clone(), endpoint.clone())),
    )
    .expect("source");
    let mut times = Vec::new();
    for run in 0..RUNS {
        let before = source.requests_sent();
        let start = Instant::now();
        let snapshot = metrics::read(&source, clusters, Some(&clusters[0]), Some(at), 8).await;
        let elapsed = start.elapsed();
        let requests = source.requests_sent() - before;
        let workloads = snapshot
            .workloads
            .as_ref()
            .and_then(|w| w.as_ref().ok())
            .map_or(0, |w| w.len());
        let usable = snapshot
            .clusters
            .values()
            .filter(|c| c.as_ref().is_ok_and(|m| m.is_usable()))
            .count();
        assert_eq!(workloads, WORKLOADS, "every workload read");
        assert_eq!(usable, CLUSTERS, "every cluster usable");
        assert!(
            snapshot
                .workloads
                .as_ref()
                .unwrap()
                .as_ref()
                .unwrap()
                .values()
                .all(|w| w.hourly_cost.is_some())
        );
        println!(
            "run {run}: full snapshot ({CLUSTERS} clusters, {workloads} workloads) in {:.1} ms, {requests} HTTP requests = {:.2} per cluster",
            elapsed.as_secs_f64() * 1000.0,
            requests as f64 / CLUSTERS as f64
        );
        times.push(elapsed);
    }
    times.sort();
    println!(
        "median {:.1} ms, worst {:.1} ms (budget 1000 ms, 10 requests per cluster)",
        times[RUNS / 2].as_secs_f64() * 1000.0,
        times[RUNS - 1].as_secs_f64() * 1000.0
    );
    times[RUNS / 2]
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(bench());
}
