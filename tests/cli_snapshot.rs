//! `ferry snapshot` against a real Prometheus holding fixture data and a
//! sandbox cluster running the fixture's Deployment: what a user checks
//! before trusting what Ferry reads.

mod support;
use support::cluster as support_cluster;

use std::time::Duration;

use std::path::Path;

use support::prometheus::{OpenMetrics, Prometheus};

/// 20 minutes into the fixture (its first sample is 2026-01-01T00:00:00Z).
const AT: &str = "2026-01-01T00:20:00Z";
const GIB: u64 = 1 << 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_prints_the_cluster_and_the_deployments_with_their_usage() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/prometheus/single.om"
    );
    let prometheus = Prometheus::start(&[std::path::Path::new(fixture)]);
    let cluster = support_cluster::start_clusters(&["local"], Duration::from_millis(20))
        .await
        .remove(0);
    support_cluster::apply_deployment(
        &cluster.client,
        "default",
        "web",
        2,
        (500, 1024),
        &[("tier", "front")],
        &[],
    )
    .await;
    // Moved to `elsewhere` by Ferry and scaled to zero here: it stays in the
    // snapshot, running where it went with the replicas it had.
    support_cluster::apply_deployment(
        &cluster.client,
        "default",
        "gone",
        0,
        (250, 512),
        &[],
        &[
            ("ferry.dev/migrated-to", "elsewhere"),
            ("ferry.dev/original-replicas", "3"),
        ],
    )
    .await;
    // A StatefulSet: listed only with --stateful, as a policy that enables
    // stateful moves sees it.
    let set: k8s_openapi::api::apps::v1::StatefulSet = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres:17",
                    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]}}},
    }))
    .unwrap();
    kube::Api::<k8s_openapi::api::apps::v1::StatefulSet>::namespaced(
        cluster.client.clone(),
        "default",
    )
    .create(&Default::default(), &set)
    .await
    .unwrap();
    support_cluster::ensure_namespace(&cluster.client, "other").await;
    support_cluster::apply_deployment(&cluster.client, "other", "api", 1, (100, 256), &[], &[])
        .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.sandbox.write_kubeconfig(&kubeconfig).unwrap();

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "snapshot",
            "--prometheus",
            prometheus.url(),
            "--cluster",
            "local",
            "--at",
            AT,
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snapshot: ferry::contract::Snapshot =
        serde_json::from_slice(&out.stdout).expect("contract JSON");

    let local = &snapshot.clusters[0];
    assert_eq!(local.name, "local");
    assert!(local.ready);
    // Two nodes at 0.04 and 0.02 per core-hour: the mean.
    assert!((local.cpu_core_hour_price.unwrap() - 0.03).abs() < 1e-9);
    assert_eq!(local.allocatable.cpu_millis, 12_000);

    let web = snapshot
        .workloads
        .iter()
        .find(|w| w.name == "web")
        .expect("web is listed");
    assert_eq!(
        (
            web.namespace.as_str(),
            web.kind.as_str(),
            web.cluster.as_str()
        ),
        ("default", "Deployment", "local")
    );
    assert_eq!(web.replicas, 2);
    assert_eq!(web.requests.cpu_millis, 1000);
    assert_eq!(web.requests.memory_bytes, 2 * GIB);
    // Usage from cAdvisor through the pod → ReplicaSet → Deployment join.
    assert_eq!(web.cpu_usage_millis, Some(400));
    assert_eq!(web.memory_usage_bytes, Some(GIB));
    assert!(web.hourly_cost.is_some_and(|c| c > 0.0));
    assert!(
        web.labels
            .iter()
            .any(|l| l.key == "tier" && l.value == "front")
    );

    let gone = snapshot
        .workloads
        .iter()
        .find(|w| w.name == "gone")
        .expect("a workload moved away is still listed");
    assert_eq!((gone.cluster.as_str(), gone.replicas), ("elsewhere", 3));
    assert_eq!(gone.requests.cpu_millis, 750);
    assert_eq!(gone.cpu_usage_millis, None);
    assert!(snapshot.workloads.iter().any(|w| w.namespace == "other"));
    assert!(!snapshot.workloads.iter().any(|w| w.name == "db"));

    // -n keeps one namespace; -o yaml is the same snapshot; --cluster-label
    // labels the own cluster as `ferry run --cluster-label` does.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "snapshot",
            "--prometheus",
            prometheus.url(),
            "--cluster",
            "local",
        ])
        .args([
            "--at",
            AT,
            "-n",
            "default",
            "-o",
            "yaml",
            "--cluster-label",
            "tier=gold",
            "--stateful",
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml: ferry::contract::Snapshot =
        serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout)).expect("contract YAML");
    assert!(yaml.workloads.iter().all(|w| w.namespace == "default"));
    assert!(yaml.workloads.iter().any(|w| w.name == "web"));
    let db = yaml
        .workloads
        .iter()
        .find(|w| w.name == "db")
        .expect("--stateful lists the StatefulSet");
    assert_eq!((db.kind.as_str(), db.replicas), ("StatefulSet", 2));
    assert_eq!(db.requests.cpu_millis, 500);
    assert!(
        yaml.clusters[0]
            .labels
            .iter()
            .any(|l| l.key == "tier" && l.value == "gold")
    );

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "snapshot",
            "--prometheus",
            prometheus.url(),
            "--cluster",
            "local",
        ])
        .args(["--at", AT, "--output", "table", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .await
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("CLUSTER"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("default/web") && l.contains("local")),
        "{table}"
    );
    cluster.shutdown().await;
}

/// `--carbon-intensity-metric` shows what `ferry run` with the same flag
/// hands policies as each cluster's `carbonIntensity`; without it the
/// gauge is not queried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_reads_the_carbon_intensity_metric_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/prometheus/single.om"
    ));
    // The fixture's first half hour, every 15 s.
    let start = "2026-01-01T00:00:00Z"
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_second();
    let mut carbon = OpenMetrics::default();
    carbon.gauge(
        "grid_carbon_intensity",
        &[("zone", "eu-west")],
        (0..120).map(|i| (start + 15 * i, 180.5)),
    );
    let carbon = carbon.write(&dir.path().join("carbon.om"));
    let prometheus = Prometheus::start(&[fixture, &carbon]);

    let snapshot = |extra: &'static [&'static str]| {
        let url = prometheus.url().to_owned();
        async move {
            let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
                .args(["snapshot", "--prometheus", &url, "--cluster", "local"])
                .args(["--at", AT])
                .args(extra)
                .output()
                .await
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice::<ferry::contract::Snapshot>(&out.stdout).expect("contract JSON")
        }
    };
    let with = snapshot(&["--carbon-intensity-metric", "grid_carbon_intensity"]).await;
    assert_eq!(with.clusters[0].carbon_intensity, Some(180.5));
    let without = snapshot(&[]).await;
    assert_eq!(without.clusters[0].carbon_intensity, None);
}
