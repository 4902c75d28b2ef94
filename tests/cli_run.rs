//! `ferry run` as a process against a sandbox cluster: it becomes the
//! leader, stops on SIGTERM with exit 0 and hands its lease back, and it
//! refuses to start where Ferry's CRDs are missing, saying what to install.

mod support;
use support::cluster as support_cluster;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ferry::sandbox::{Sandbox, SandboxConfig};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

/// Kills the operator if the test fails before it stops it.
struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run_operator(kubeconfig: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
    command
        .args([
            "run",
            "--cluster-name",
            "east",
            "--identity",
            "east-0",
            "--ferry-namespace",
            "ferry",
        ])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--prometheus",
            "http://127.0.0.1:9",
        ])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

async fn holder(client: &kube::Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), "ferry")
        .get_opt("ferry-leader")
        .await
        .ok()
        .flatten()
        .and_then(|lease| lease.spec)
        .and_then(|spec| spec.holder_identity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_operator_cleanly_and_releases_the_lease() {
    let cluster = support_cluster::start_clusters(&["east"], Duration::from_millis(20))
        .await
        .remove(0);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // The operator runs as the chart's ServiceAccount, not the admin.
    std::fs::write(&kubeconfig, cluster.ferry_kubeconfig()).unwrap();
    let mut operator = Operator(run_operator(&kubeconfig).spawn().expect("ferry starts"));

    let client = cluster.client.clone();
    support_cluster::until(
        "the operator to take the lease",
        support_cluster::WAIT,
        || {
            let client = client.clone();
            async move { holder(&client).await.as_deref() == Some("east-0") }
        },
    )
    .await;

    let pid = operator.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::task::spawn_blocking(move || {
        let status = operator.0.wait();
        (status, operator)
    })
    .await
    .unwrap()
    .0
    .unwrap();
    assert!(status.success(), "exit after SIGTERM: {status}");
    assert_eq!(
        holder(&cluster.client).await,
        None,
        "the lease is handed back"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_crds_the_operator_says_what_to_install() {
    let sandbox = Sandbox::start(SandboxConfig::new("bare")).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sandbox.write_kubeconfig(&kubeconfig).unwrap();
    let out = tokio::task::spawn_blocking(move || run_operator(&kubeconfig).output().unwrap())
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("CRDs are not installed") && stderr.contains("ferry crds"),
        "{stderr}"
    );
    sandbox.shutdown().await;
}

#[test]
fn a_token_for_a_plain_http_prometheus_stops_the_operator_before_it_connects() {
    // No cluster at all: the flags are refused before any connection.
    let missing = std::path::Path::new("/nonexistent/kubeconfig");
    let out = run_operator(missing)
        .args(["--prometheus-token", "tok-5ecret"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--prometheus-allow-token-over-http") && !stderr.contains("tok-5ecret"),
        "{stderr}"
    );
}
