//! What RBAC costs: creates per second and write-to-watch delay for a user
//! bound to `edit` in a namespace, with RBAC on against RBAC off, in the same
//! run. Both clients act as that user through impersonation, so the only
//! difference between the two sandboxes is whether requests are authorized.
//! Other bindings (to other users and groups) are present, so that the cost
//! shown is that of a cluster with some RBAC in it, not of an empty one.
//! Not a timed test: it prints figures. Run with
//! `cargo bench -p ferry-sandbox --bench rbac`.

use std::time::{Duration, Instant};

use ferry_sandbox::{Sandbox, SandboxConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use support::cm;

mod support;

const ROUNDS: usize = 12;
const CREATES_PER_ROUND: usize = 2_000;
const IN_FLIGHT: usize = 16;
const LATENCY_WRITES: usize = 500;
/// Bindings to other subjects, in the namespace and cluster-wide.
const OTHER_BINDINGS: usize = 200;
const NAMESPACE: &str = "bench";
const USER: &str = "bench-user";

async fn client(sandbox: &Sandbox, dir: &std::path::Path, user: Option<&str>) -> kube::Client {
    let path = dir.join(format!("{}.kubeconfig", sandbox.name()));
    sandbox.write_kubeconfig(&path).expect("kubeconfig");
    let mut kubeconfig = Kubeconfig::read_from(&path).expect("kubeconfig parses");
    for named in &mut kubeconfig.auth_infos {
        if let Some(info) = named.auth_info.as_mut() {
            info.impersonate = user.map(str::to_owned);
        }
    }
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// A sandbox with the user bound to `edit` in the namespace, and other
/// bindings around it; answers the user's ConfigMap API.
async fn setup(name: &str, rbac: bool, dir: &std::path::Path) -> (Sandbox, Api<ConfigMap>) {
    let sandbox = Sandbox::start(SandboxConfig {
        rbac,
        ..SandboxConfig::new(name)
    })
    .await
    .expect("sandbox");
    let admin = client(&sandbox, dir, None).await;
    let post = PostParams::default();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let namespace = json!({"metadata": {"name": NAMESPACE}});
    namespaces
        .create(
            &post,
            &serde_json::from_value(namespace).expect("namespace"),
        )
        .await
        .expect("namespace");
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), NAMESPACE);
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(admin);
    for i in 0..OTHER_BINDINGS {
        let user = json!({"kind": "User", "name": format!("other-{i}")});
        let group = json!({"kind": "Group", "name": format!("group-{i}")});
        bindings
            .create(&post, &binding(&format!("other-{i}"), "view", user))
            .await
            .expect("binding");
        cluster_bindings
            .create(&post, &binding(&format!("group-{i}"), "view", group))
            .await
            .expect("cluster binding");
    }
    let user = json!({"kind": "User", "name": USER});
    bindings
        .create(&post, &binding(USER, "edit", user))
        .await
        .expect("binding");
    let api = Api::namespaced(client(&sandbox, dir, Some(USER)).await, NAMESPACE);
    (sandbox, api)
}

/// A RoleBinding or ClusterRoleBinding of a ClusterRole to one subject.
fn binding<K: serde::de::DeserializeOwned>(
    name: &str,
    role: &str,
    subject: serde_json::Value,
) -> K {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }))
    .expect("binding")
}

/// CPU time this process (client and server alike) has used so far, summed
/// over its threads: unlike wall time, it does not grow when other processes
/// take the machine's cores.
fn cpu_time() -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(total)
}

/// One side of a round: creates per second of wall time, CPU time per create.
type Sample = (f64, Duration);
/// A round: RBAC on, RBAC off.
type Round = (Sample, Sample);

/// One round of creates on one side.
async fn creates(api: &Api<ConfigMap>, prefix: &str) -> Sample {
    let start = Instant::now();
    let cpu = cpu_time();
    futures::stream::iter(0..CREATES_PER_ROUND)
        .map(|i| {
            let api = api.clone();
            let name = format!("{prefix}-{i}");
            async move {
                api.create(&PostParams::default(), &cm(name))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .expect("creates succeed");
    let per_second = CREATES_PER_ROUND as f64 / start.elapsed().as_secs_f64();
    (per_second, (cpu_time() - cpu) / CREATES_PER_ROUND as u32)
}

/// Median time from sending a patch to its watch event arriving.
async fn watch_delay(api: &Api<ConfigMap>) -> Duration {
    let delays = support::watch_delays(api, LATENCY_WRITES).await;
    delays[delays.len() / 2]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (on_sandbox, on) = setup("rbac-on", true, dir.path()).await;
    let (off_sandbox, off) = setup("rbac-off", false, dir.path()).await;

    // Each round measures both, in alternating order, so that the machine's
    // load falls on both alike. Wall-time throughput moves with the load of
    // other processes; CPU time per create hardly does, so the cost is
    // judged on it.
    let mut rounds: Vec<Round> = Vec::new();
    for round in 0..ROUNDS {
        let prefix = format!("r{round}");
        if round % 2 == 0 {
            let a = creates(&on, &prefix).await;
            rounds.push((a, creates(&off, &prefix).await));
        } else {
            let b = creates(&off, &prefix).await;
            rounds.push((creates(&on, &prefix).await, b));
        }
    }
    let median_of = |pick: fn(&Round) -> f64| median(rounds.iter().map(pick).collect());
    let (with, without) = (median_of(|r| r.0.0), median_of(|r| r.1.0));
    let cpu_with = median_of(|r| r.0.1.as_secs_f64() * 1e6);
    let cpu_without = median_of(|r| r.1.1.as_secs_f64() * 1e6);
    let wall_ratio = median_of(|r| r.0.0 / r.1.0) * 100.0;
    let cpu_cost = (median_of(|r| r.0.1.as_secs_f64() / r.1.1.as_secs_f64()) - 1.0) * 100.0;
    println!(
        "creates as a user bound to edit ({ROUNDS} rounds of {CREATES_PER_ROUND}, {IN_FLIGHT} in flight, {OTHER_BINDINGS} other RoleBindings and ClusterRoleBindings), medians:"
    );
    println!("  RBAC on:  {with:.0} creates/s, {cpu_with:.1} µs CPU per create");
    println!("  RBAC off: {without:.0} creates/s, {cpu_without:.1} µs CPU per create");
    println!(
        "  cost of RBAC: {cpu_cost:+.1}% CPU per create; throughput on/off {wall_ratio:.1}% (wall time, moves with the machine's load)"
    );

    let delay_on = watch_delay(&on).await;
    let delay_off = watch_delay(&off).await;
    println!(
        "write-to-watch median ({LATENCY_WRITES} patches): RBAC on {delay_on:.2?}, RBAC off {delay_off:.2?}"
    );

    on_sandbox.shutdown().await;
    off_sandbox.shutdown().await;
}
