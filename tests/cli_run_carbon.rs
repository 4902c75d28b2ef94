//! `ferry run --carbon-intensity-metric` against a real Prometheus: the
//! gauge it names reaches the policy's snapshot as the cluster's
//! `carbonIntensity` (the decision journal records the snapshot the policy
//! was handed); a metric Prometheus does not have leaves it null, with a
//! warning that names the query, and the cycle still runs; a name that is
//! not a metric name stops the operator before it starts.

mod support;
use support::cluster as support_cluster;
use support::operator::upload;
use support::prometheus::{OpenMetrics, Prometheus};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use ferry::contract::Snapshot;
use ferry::crd::PolicyMode;

const CLUSTER: &str = "east";
const METRIC: &str = "grid_carbon_intensity";
/// Grams of CO2 per kWh the fixture's gauge holds.
const GRAMS_PER_KWH: f64 = 412.5;

/// Kills the operator if the test fails before it stops it.
struct Operator(Option<Child>);

impl Operator {
    /// Stops the operator and returns what it wrote.
    fn stop(mut self) -> Output {
        let mut child = self.0.take().expect("running");
        let _ = child.kill();
        child.wait_with_output().expect("the operator's output")
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A single-cluster Prometheus (no cluster label) holding what a cycle
/// needs: prices, allocatable and requested resources, and, when
/// `with_carbon`, the carbon intensity gauge. The samples run from an hour
/// before now to two hours after, every 15 s, so they are fresh whenever
/// the operator reads them.
fn prometheus(dir: &Path, with_carbon: bool) -> Prometheus {
    let now = jiff::Timestamp::now().as_second();
    let points = |value: f64| (-240..480).map(move |i| (now + 15 * i, value));
    let mut om = OpenMetrics::default();
    let node = [("node", "node-1")];
    om.gauge("node_cpu_hourly_cost", &node, points(0.03))
        .gauge("node_ram_hourly_cost", &node, points(0.004))
        .gauge(
            "kube_node_status_allocatable",
            &[("node", "node-1"), ("resource", "cpu")],
            points(16.0),
        )
        .gauge(
            "kube_node_status_allocatable",
            &[("node", "node-1"), ("resource", "memory")],
            points(64.0 * 1024.0 * 1024.0 * 1024.0),
        )
        .gauge(
            "kube_pod_container_resource_requests",
            &[("namespace", "shop"), ("pod", "web-1"), ("resource", "cpu")],
            points(0.5),
        )
        .gauge(
            "kube_pod_container_resource_requests",
            &[
                ("namespace", "shop"),
                ("pod", "web-1"),
                ("resource", "memory"),
            ],
            points(1024.0 * 1024.0 * 1024.0),
        );
    if with_carbon {
        om.gauge(METRIC, &[("zone", "eu-west")], points(GRAMS_PER_KWH));
    }
    Prometheus::start(&[&om.write(&dir.join("fixture.om"))])
}

fn operator_command(kubeconfig: &Path, prometheus: &str, journal: &Path, metric: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
    command
        .args(["run", "--cluster-name", CLUSTER, "--identity", "east-0"])
        .args(["--ferry-namespace", "ferry", "--listen", "127.0.0.1:0"])
        .args([
            "--prometheus",
            prometheus,
            "--carbon-intensity-metric",
            metric,
        ])
        .arg("--journal-dir")
        .arg(journal)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Runs `ferry run` on a sandbox cluster with a cheapest-cluster policy in
/// DryRun (a contract v2 module) until the journal has `cycles` entries;
/// returns the snapshot the first holds and what the operator logged.
async fn run_cycles(with_carbon: bool, metric: &str, cycles: usize) -> (Snapshot, String) {
    let dir = tempfile::tempdir().unwrap();
    let prometheus = prometheus(dir.path(), with_carbon);
    let cluster = support_cluster::start_clusters(&[CLUSTER], Duration::from_millis(20))
        .await
        .remove(0);
    support_cluster::apply_deployment(&cluster.client, "shop", "web", 1, (500, 1024), &[], &[])
        .await;
    upload(
        &cluster.client,
        "cheapest_cluster",
        PolicyMode::DryRun,
        None,
    )
    .await;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.ferry_kubeconfig()).unwrap();
    let journal = dir.path().join("journal");
    let operator = Operator(Some(
        operator_command(&kubeconfig, prometheus.url(), &journal, metric)
            .spawn()
            .expect("ferry starts"),
    ));

    let entry: PathBuf =
        support_cluster::eventually("journal entries", support_cluster::WAIT, || {
            let journal = journal.clone();
            async move {
                let mut entries: Vec<PathBuf> = std::fs::read_dir(&journal)
                    .ok()?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect();
                // Named by the cycle's time in ms: the same width for ages.
                entries.sort();
                (entries.len() >= cycles).then(|| entries.swap_remove(0))
            }
        })
        .await;
    let output = tokio::task::spawn_blocking(move || operator.stop())
        .await
        .unwrap();
    let recorded =
        ferry::controller::read_journal(&std::fs::read_to_string(&entry).unwrap()).unwrap();
    cluster.shutdown().await;
    (
        recorded.snapshot,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_named_metric_reaches_the_policy_as_carbon_intensity() {
    let (snapshot, log) = run_cycles(true, METRIC, 1).await;
    let east = snapshot
        .clusters
        .iter()
        .find(|c| c.name == CLUSTER)
        .unwrap_or_else(|| panic!("no cluster {CLUSTER} in {snapshot:?}"));
    assert_eq!(east.carbon_intensity, Some(GRAMS_PER_KWH), "{log}");
    // The rest of the cluster came from the same Prometheus.
    assert_eq!(east.cpu_core_hour_price, Some(0.03));
    assert_eq!(east.allocatable.cpu_millis, 16_000);
    assert!(
        !log.contains("no carbon intensity"),
        "a warning with the value present:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metric_prometheus_lacks_is_no_data_with_a_warning_naming_the_query() {
    // Two cycles, to see that the warning is not repeated.
    let (snapshot, log) = run_cycles(true, "no_such_carbon_metric", 2).await;
    let east = snapshot
        .clusters
        .iter()
        .find(|c| c.name == CLUSTER)
        .unwrap_or_else(|| panic!("no cluster {CLUSTER} in {snapshot:?}"));
    // No data, never a made-up zero; the cluster's other values stand and
    // the cycle ran (it wrote its journal entry).
    assert_eq!(east.carbon_intensity, None);
    assert_eq!(east.cpu_core_hour_price, Some(0.03));
    let warning = log
        .lines()
        .find(|l| l.contains("no carbon intensity"))
        .unwrap_or_else(|| panic!("no warning in:\n{log}"));
    assert!(
        warning.contains("avg(no_such_carbon_metric{})") && warning.contains(CLUSTER),
        "{warning}"
    );
    // Said when the value went missing, not again on the next cycle.
    assert_eq!(log.matches("no carbon intensity").count(), 1, "{log}");
}

#[test]
fn a_name_that_is_not_a_metric_name_stops_the_operator_before_it_connects() {
    // No cluster and no Prometheus at all: the flag is refused when the
    // command line is parsed.
    let dir = tempfile::tempdir().unwrap();
    let out = operator_command(
        Path::new("/nonexistent/kubeconfig"),
        "http://127.0.0.1:9",
        dir.path(),
        "grid carbon{zone=\"x\"}",
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--carbon-intensity-metric")
            && stderr.contains("is not a Prometheus metric name"),
        "{stderr}"
    );
}
