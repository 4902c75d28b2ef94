//! The operator as the control-loop tests run it: two sandbox clusters
//! (`dear` and `cheap`) that are peers of each other, scripted prices, an
//! operator per cluster in this process, and the policy upload.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferry::contract::Resources;
use ferry::controller::{Config, Context, Telemetry};
use ferry::crd::{MigrationPolicy, PolicyMode};
use ferry::demo::{DemoCluster, DemoMetrics, PriceStep};
use kube::api::Api;
use tokio::sync::watch;

use super::cluster;
use super::modules::module;

pub const GIB: u64 = 1 << 30;
pub const NS: &str = "shop";

/// Two clusters that know each other: `dear` and `cheap`.
pub struct Pair {
    pub dear: cluster::TestCluster,
    pub cheap: cluster::TestCluster,
    pub metrics: Arc<DemoMetrics>,
}

pub async fn pair() -> Pair {
    let mut clusters = cluster::start_clusters(&["dear", "cheap"], Duration::from_millis(50)).await;
    let cheap = clusters.pop().expect("cheap");
    let dear = clusters.pop().expect("dear");
    // Workloads move only into namespaces the target already has.
    cluster::ensure_namespace(&cheap.client, NS).await;
    let mut cheap_in_dear = cluster::peer_spec("cheap", true);
    cheap_in_dear.public_keys = cheap.public_keys().await;
    cluster::add_peer(
        &dear.client,
        "cheap",
        &cheap.peer_kubeconfig("dear"),
        cheap_in_dear,
    )
    .await;
    let mut dear_in_cheap = cluster::peer_spec("dear", true);
    dear_in_cheap.public_keys = dear.public_keys().await;
    cluster::add_peer(
        &cheap.client,
        "dear",
        &dear.peer_kubeconfig("cheap"),
        dear_in_cheap,
    )
    .await;
    let price = |core_hour, gib_hour| {
        vec![PriceStep {
            from: Duration::ZERO,
            core_hour,
            gib_hour,
        }]
    };
    let room = Resources {
        cpu_millis: 32_000,
        memory_bytes: 128 * GIB,
    };
    let clusters = BTreeMap::from([
        (
            "dear".to_owned(),
            DemoCluster {
                client: dear.client.clone(),
                allocatable: room,
                prices: price(0.05, 0.006),
            },
        ),
        (
            "cheap".to_owned(),
            DemoCluster {
                client: cheap.client.clone(),
                allocatable: room,
                prices: price(0.02, 0.003),
            },
        ),
    ]);
    let metrics = Arc::new(DemoMetrics::new(jiff::Timestamp::now(), clusters));
    Pair {
        dear,
        cheap,
        metrics,
    }
}

pub fn config(cluster: &str, identity: &str) -> Config {
    let mut config = Config::new(cluster);
    config.namespace = cluster::FERRY_NAMESPACE.to_owned();
    config.leader.namespace = cluster::FERRY_NAMESPACE.to_owned();
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    config.error_requeue = Duration::from_secs(1);
    // Deadlines and leases far longer than a busy machine needs: no test
    // here is about either running out.
    config.migration_deadline = cluster::WAIT;
    config.leader.identity = identity.to_owned();
    config.leader.renew_interval = Duration::from_millis(300);
    config.leader.lease_duration = Duration::from_secs(30);
    config.sender.poll_interval = Duration::from_millis(100);
    config.receiver.poll_interval = Duration::from_millis(100);
    config
}

/// A running operator; dropping it aborts it, [`Operator::stop`] stops it
/// as SIGTERM would.
pub struct Operator {
    pub ctx: Arc<Context>,
    pub telemetry: Arc<Telemetry>,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Operator {
    /// Asks the operator to stop and waits until it has: a leader hands its
    /// lease back on the way out.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.await.expect("the operator stops cleanly");
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

pub fn start(client: &kube::Client, config: Config, metrics: Arc<DemoMetrics>) -> Operator {
    let telemetry = Arc::new(Telemetry::new());
    let ctx = Arc::new(
        Context::new(client.clone(), config, metrics, telemetry.clone()).expect("context"),
    );
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn({
        let ctx = ctx.clone();
        async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            ferry::controller::run(ctx, shutdown)
                .await
                .expect("operator runs");
        }
    });
    Operator {
        ctx,
        telemetry,
        stop,
        task: Some(task),
    }
}

pub async fn upload(
    client: &kube::Client,
    module_name: &str,
    mode: PolicyMode,
    selector: Option<serde_json::Value>,
) {
    let request = ferry::modules::upload::UploadRequest {
        namespace: NS.to_owned(),
        name: "cost".to_owned(),
        module: module(module_name),
        mode: Some(mode),
        thresholds: None,
        parameters: None,
    };
    ferry::modules::upload::upload(client, request)
        .await
        .expect("upload");
    let mut spec = serde_json::json!({"interval": "2s", "thresholds": {"cooldown": "1h"}});
    if let Some(selector) = selector {
        spec["selector"] = selector;
    }
    Api::<MigrationPolicy>::namespaced(client.clone(), NS)
        .patch(
            "cost",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&serde_json::json!({"spec": spec})),
        )
        .await
        .expect("policy patch");
}
