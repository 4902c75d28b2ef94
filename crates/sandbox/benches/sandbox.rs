//! Sandbox throughput, watch latency and memory. Not a timed test: it prints
//! figures. Run with `cargo bench -p ferry-sandbox --bench sandbox`.

use std::time::{Duration, Instant};

use ferry_sandbox::{Sandbox, SandboxConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use support::cm;

mod support;

const CREATES: usize = 10_000;
const IN_FLIGHT: usize = 16;
const LATENCY_WRITES: usize = 1_000;
const MEMORY_OBJECTS: usize = 100_000;

async fn client(sandbox: &Sandbox, dir: &std::path::Path) -> kube::Client {
    let path = dir.join(format!("{}.kubeconfig", sandbox.name()));
    sandbox.write_kubeconfig(&path).expect("kubeconfig");
    let kubeconfig = Kubeconfig::read_from(&path).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

async fn create_many(api: &Api<ConfigMap>, prefix: &str, n: usize, in_flight: usize) -> Duration {
    let start = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let name = format!("{prefix}-{i}");
            async move {
                api.create(&PostParams::default(), &cm(name))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(in_flight)
        .try_collect::<Vec<()>>()
        .await
        .expect("creates succeed");
    start.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn proc_status(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .map(|l| l[field.len() + 1..].trim().to_string())
        })
        .unwrap_or_else(|| "n/a".into())
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sandbox = Sandbox::start(SandboxConfig::new("bench"))
        .await
        .expect("sandbox");
    let client = client(&sandbox, dir.path()).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    // 1. Creates over HTTPS from one client.
    let took = create_many(&api, "create", CREATES, IN_FLIGHT).await;
    println!(
        "creates: {CREATES} in {:.2?} with {IN_FLIGHT} in flight = {:.0} creates/s",
        took,
        CREATES as f64 / took.as_secs_f64()
    );

    // 2. Write-to-watch delay.
    let delays = support::watch_delays(&api, LATENCY_WRITES).await;
    println!(
        "write-to-watch: {} events, median {:.2?}, p99 {:.2?}",
        delays.len(),
        percentile(&delays, 0.5),
        percentile(&delays, 0.99)
    );

    // 3. Memory with 100,000 small objects (in a fresh sandbox).
    drop(api);
    sandbox.shutdown().await;
    let before = proc_status("VmRSS:");
    let sandbox = Sandbox::start(SandboxConfig::new("memory"))
        .await
        .expect("sandbox");
    let client = self::client(&sandbox, dir.path()).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let took = create_many(&api, "obj", MEMORY_OBJECTS, 32).await;
    let count = api
        .list(&ListParams::default().limit(1))
        .await
        .expect("list")
        .metadata
        .resource_version;
    println!(
        "memory: {MEMORY_OBJECTS} objects created in {:.1?} (rv {}); VmRSS before {before}, after {}; VmHWM {}",
        took,
        count.unwrap_or_default(),
        proc_status("VmRSS:"),
        proc_status("VmHWM:")
    );
    sandbox.shutdown().await;
}
