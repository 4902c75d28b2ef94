//! What the operator tells the people who run it: its log lines, its
//! `/metrics` as Prometheus scrapes them, and the columns `kubectl get`
//! shows for Ferry's objects. Sandbox clusters with RBAC, the operator in
//! this process, a real compiled policy, and the pinned kubectl.

mod support;
use support::cluster;
use support::operator::{NS, config, pair, start, upload};

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use ferry::crd::{DecisionOutcome, MigrationPhase, MigrationPolicy, PolicyMode, WorkloadMigration};
use ferry::demo::DemoMetrics;
use kube::api::{Api, ListParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Everything logged in this test process, as the operator's `info`
/// filter would let it through, without colour.
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .init();
        logs
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log_lines() -> Vec<String> {
    let logs = captured_logs();
    let text = String::from_utf8_lossy(&logs.lock().expect("log buffer")).into_owned();
    text.lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_without_metrics_logs_its_reason_at_info_level() {
    captured_logs();
    let lone = cluster::start_clusters(&["lone"], std::time::Duration::from_millis(50))
        .await
        .remove(0);
    cluster::ensure_namespace(&lone.client, NS).await;
    upload(&lone.client, "cheapest_cluster", PolicyMode::DryRun, None).await;
    // Metrics for no cluster at all: this one's prices are unknown.
    let metrics = Arc::new(DemoMetrics::new(jiff::Timestamp::now(), BTreeMap::new()));
    let _operator = start(&lone.ferry, config("lone", "lone-1"), metrics);

    let line = cluster::eventually(
        "a log line for the skipped cycle",
        cluster::WAIT,
        || async {
            log_lines()
                .into_iter()
                .find(|l| l.contains("cycle skipped") && l.contains("policy=\"shop/cost\""))
        },
    )
    .await;
    // Shown at the default level, with the condition's reason, the error
    // class and the cause.
    assert!(line.contains(" WARN ") || line.contains(" INFO "), "{line}");
    assert!(line.contains("reason=\"MetricsUnavailable\""), "{line}");
    assert!(line.contains("class=\"metrics\""), "{line}");
    assert!(
        line.contains("no usable metrics for this cluster (lone): "),
        "{line}"
    );
}

/// One sample of the exposition text: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the Prometheus text format's samples (comments left out).
fn parse_exposition(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a value");
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|l| !l.is_empty())
                .map(|pair| {
                    let (key, value) = pair.split_once('=').expect("label=value");
                    (key.to_owned(), value.trim_matches('"').to_owned())
                })
                .collect();
            (name.to_owned(), labels, value.parse().expect("a number"))
        })
        .collect()
}

/// GET `path` from the operator's own HTTP server.
async fn scrape(address: std::net::SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("the metrics endpoint accepts");
    let request = format!("GET {path} HTTP/1.1\r\nHost: ferry\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("response");
    let (head, body) = response.split_once("\r\n\r\n").expect("HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
        })
        .map(|(_, _, v)| *v)
}

/// Runs `kubectl get` against `cluster` as its admin; the table it prints.
fn kubectl_get(cluster: &cluster::TestCluster, args: &[&str]) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig()).expect("kubeconfig");
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(support::tools::kubectl())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("get")
            .args(args)
            .output()
            .expect("kubectl runs")
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Columns are separated by at least two spaces (or one before a value
    // under a wider header); split on runs of two or more.
    stdout
        .lines()
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|cell| !cell.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// The cell of `column` in the row of `name`.
fn cell(table: &[Vec<String>], name: &str, column: &str) -> String {
    let header = &table[0];
    let index = header
        .iter()
        .position(|h| h == column)
        .unwrap_or_else(|| panic!("no column {column} in {header:?}"));
    let row = table
        .iter()
        .find(|row| row.first().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in {table:?}"));
    row.get(index)
        .cloned()
        .unwrap_or_else(|| panic!("no {column} in {row:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_move_shows_in_logs_metrics_and_kubectl_columns() {
    captured_logs();
    let pair = pair().await;
    cluster::apply_deployment(&pair.dear.client, NS, "web", 2, (1000, 2048), &[], &[]).await;
    upload(
        &pair.dear.client,
        "cheapest_cluster",
        PolicyMode::Enforce,
        None,
    )
    .await;
    let dear = start(
        &pair.dear.ferry,
        config("dear", "dear-1"),
        pair.metrics.clone(),
    );
    let _cheap = start(
        &pair.cheap.ferry,
        config("cheap", "cheap-1"),
        pair.metrics.clone(),
    );

    let client = pair.dear.client.clone();
    let mirror = cluster::eventually("the move of web to complete", cluster::WAIT, || {
        let client = client.clone();
        async move {
            Api::<WorkloadMigration>::namespaced(client, NS)
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|m| {
                    m.status
                        .as_ref()
                        .is_some_and(|s| s.phase == MigrationPhase::Completed)
                })
        }
    })
    .await;
    let expected = mirror.spec.hourly_savings.expect("the decision's saving");
    let policy = Api::<MigrationPolicy>::namespaced(pair.dear.client.clone(), NS)
        .get("cost")
        .await
        .expect("policy");
    assert!(
        policy.status.as_ref().is_some_and(|s| s
            .last_decisions
            .iter()
            .any(|d| d.outcome == DecisionOutcome::Accepted)),
        "{policy:?}"
    );

    // Logs: the cycle that decided it, and each side's phase changes.
    let logs = cluster::eventually(
        "the sender's Completed in the log",
        cluster::WAIT,
        || async {
            let logs = log_lines();
            let done = logs.iter().any(|l| {
                l.contains("migration phase changed")
                    && l.contains("side=\"sender\"")
                    && l.contains("to=Completed")
            });
            done.then_some(logs)
        },
    )
    .await;
    let phase_change = |side: &str, to: &str| {
        logs.iter().any(|l| {
            l.contains("migration phase changed")
                && l.contains(&format!("side=\"{side}\""))
                && l.contains("workload=shop/web")
                && l.contains("source=dear target=cheap")
                && l.contains(&format!("to={to} "))
        })
    };
    for to in ["Accepted", "Progressing", "Ready"] {
        assert!(
            phase_change("receiver", to),
            "receiver {to}:\n{}",
            logs.join("\n")
        );
    }
    assert!(phase_change("sender", "Completed"), "{}", logs.join("\n"));
    assert!(
        logs.iter().any(|l| l.contains("cycle completed")
            && l.contains("policy=\"shop/cost\"")
            && l.contains("accepted=1")
            && l.contains("shop/web dear -> cheap saves")),
        "{}",
        logs.join("\n")
    );

    // Metrics, as Prometheus would scrape them.
    let address = dear
        .telemetry
        .address()
        .expect("the operator serves metrics");
    let samples = cluster::eventually(
        "the realised saving in /metrics",
        cluster::WAIT,
        || async move {
            let samples = parse_exposition(&scrape(address, "/metrics").await);
            let saving = value(
                &samples,
                "ferry_realised_hourly_savings",
                &[("namespace", NS), ("name", "cost")],
            )?;
            ((saving - expected).abs() < 1e-9).then_some(samples)
        },
    )
    .await;
    let build = samples
        .iter()
        .find(|(n, _, _)| n == "ferry_build_info")
        .expect("ferry_build_info");
    assert_eq!(build.2, 1.0);
    assert_eq!(
        build.1.get("version").map(String::as_str),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert!(
        build.1.contains_key("commit") && build.1.contains_key("rustc"),
        "{build:?}"
    );
    assert!(value(&samples, "process_resident_memory_bytes", &[]).is_some_and(|b| b > 1e6));
    assert!(value(&samples, "process_cpu_seconds_total", &[]).is_some_and(|s| s > 0.0));
    assert!(value(&samples, "process_open_fds", &[]).is_some_and(|n| n >= 3.0));
    let now = jiff::Timestamp::now().as_second() as f64;
    assert!(
        value(&samples, "process_start_time_seconds", &[])
            .is_some_and(|t| t <= now && t > now - 86_400.0)
    );
    let accepted = [
        ("namespace", NS),
        ("name", "cost"),
        ("outcome", "accepted"),
        ("mode", "Enforce"),
    ];
    assert!(value(&samples, "ferry_decisions_total", &accepted).is_some_and(|n| n >= 1.0));
    assert!(
        value(
            &samples,
            "ferry_cycle_duration_seconds_count",
            &[("namespace", NS), ("name", "cost")]
        )
        .is_some_and(|n| n >= 1.0)
    );
    assert!(
        samples
            .iter()
            .all(|(_, labels, _)| !labels.contains_key("policy")),
        "a policy label is left"
    );

    // kubectl get: the columns render with values.
    let moves = kubectl_get(&pair.dear, &["workloadmigrations", "-n", NS]);
    let name = kube::ResourceExt::name_any(&mirror);
    assert_eq!(cell(&moves, &name, "WORKLOAD"), "shop/web");
    assert_eq!(cell(&moves, &name, "PHASE"), "Completed");
    assert_eq!(cell(&moves, &name, "SOURCE"), "dear");
    assert_eq!(cell(&moves, &name, "TARGET"), "cheap");
    assert!(moves[0].contains(&"AGE".to_owned()), "{moves:?}");
    let peers = cluster::eventually("the peer to show Ready", cluster::WAIT, || {
        let peers = kubectl_get(&pair.dear, &["clusterpeers"]);
        let ready = cell(&peers, "cheap", "READY") == "True";
        async move { ready.then_some(peers) }
    })
    .await;
    assert_eq!(cell(&peers, "cheap", "CONNECTED"), "True", "{peers:?}");
    let policies = kubectl_get(&pair.dear, &["migrationpolicies", "-n", NS]);
    assert_eq!(cell(&policies, "cost", "DEGRADED"), "False", "{policies:?}");
    let saving: f64 = cell(&policies, "cost", "SAVING/H")
        .parse()
        .unwrap_or_else(|_| panic!("SAVING/H is a number: {policies:?}"));
    assert!(saving >= 0.0, "{policies:?}");
}
