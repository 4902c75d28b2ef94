//! `ferry demo`: the whole job on an embedded default, with no cluster and
//! no configuration.
//!
//! Three sandbox clusters (an expensive on-demand one, a cheaper one, and a
//! spot pool whose price spikes part-way through) become peers of each
//! other through kubeconfig Secrets; the `spot-aware` policy is uploaded to
//! each; workloads start on the on-demand cluster; and one operator per
//! cluster runs on scripted prices. The terminal shows each decision, each
//! migration's phases, refused decisions with their reasons, and a closing
//! summary of cost per hour.

mod broker;
mod metrics;
mod narrate;
mod observe;
mod rbac;
mod setup;
mod summary;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

pub use metrics::{DemoCluster, DemoMetrics, PriceStep};
pub use narrate::Narrator;

use crate::contract::Resources;
use crate::controller::{self, Config, Context, Telemetry};
use crate::sandbox::Sandbox;

/// The policy every demo cluster runs.
pub const POLICY_MODULE: &[u8] =
    include_bytes!("../../policies/target/wasm32-wasip2/release/spot_aware.wasm");

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting sandbox cluster {name}")]
    Sandbox {
        name: String,
        #[source]
        source: crate::sandbox::Error,
    },
    #[error("setting up cluster {cluster}: {step}")]
    Setup {
        cluster: String,
        step: String,
        #[source]
        source: kube::Error,
    },
    #[error("building a client for {cluster}: {reason}")]
    Client { cluster: String, reason: String },
    #[error("uploading the policy to {cluster}")]
    Upload {
        cluster: String,
        #[source]
        source: crate::modules::upload::UploadError,
    },
    #[error("ferry demo --transport nats needs nats-server: {hint}", hint = broker::INSTALL_HINT)]
    NatsServerMissing,
    #[error("starting the local nats-server")]
    NatsServerStart(#[source] std::io::Error),
    #[error("starting the operator of {cluster}")]
    Operator {
        cluster: String,
        #[source]
        source: controller::Error,
    },
    #[error("writing kubeconfig files to {dir}")]
    Kubeconfig {
        dir: PathBuf,
        #[source]
        source: crate::sandbox::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How long the demo runs and how it looks.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long the price script runs before the demo starts to wrap up:
    /// it then waits, at most [`Options::settle_limit`] more, for the
    /// clusters to settle, so the summary shows where the moves led rather
    /// than a move half made.
    pub duration: Duration,
    /// When the spot pool's price spikes.
    pub spike_at: Duration,
    /// The policies' cycle interval.
    pub interval: Duration,
    /// How long a moved workload stays put before it may move again.
    pub cooldown: Duration,
    /// The longest wait for the clusters to settle after `duration`.
    pub settle_limit: Duration,
    /// Colour the terminal output.
    pub color: bool,
    /// Print as things happen (off in tests, which read the lines).
    pub echo: bool,
    /// How requests travel between the clusters: through their API servers,
    /// or through a local NATS JetStream broker the demo starts.
    pub transport: crate::crd::Transport,
}

impl Options {
    /// The script for a run of `duration`: the spike comes a little before
    /// half-way, and the cooldown is an eighth of the run (3 to 20 seconds),
    /// so that workloads that moved onto spot before the spike may move off
    /// it again well before the end.
    pub fn for_duration(duration: Duration) -> Self {
        Options {
            duration,
            // A whole second, so a decision stamped in the spike's second
            // was made at the new prices.
            spike_at: Duration::from_secs((duration * 9 / 20).as_secs()),
            cooldown: (duration / 8).clamp(Duration::from_secs(3), Duration::from_secs(20)),
            ..Options::default()
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            duration: Duration::from_secs(40),
            spike_at: Duration::from_secs(18),
            interval: Duration::from_secs(3),
            cooldown: Duration::from_secs(5),
            settle_limit: Duration::from_secs(60),
            color: false,
            echo: true,
            transport: crate::crd::Transport::Kube,
        }
    }
}

/// One demo cluster's script: where it is, what it has, what it costs.
pub(crate) struct ClusterPlan {
    pub name: &'static str,
    pub region: &'static str,
    pub capacity_type: &'static str,
    pub allocatable: Resources,
    pub prices: Vec<PriceStep>,
}

const GIB: u64 = 1 << 30;

pub(crate) fn plan(options: &Options) -> Vec<ClusterPlan> {
    let at = |from: Duration, core_hour: f64, gib_hour: f64| PriceStep {
        from,
        core_hour,
        gib_hour,
    };
    vec![
        ClusterPlan {
            name: "on-demand",
            region: "eu-west-1",
            capacity_type: "on-demand",
            allocatable: Resources {
                cpu_millis: 32_000,
                memory_bytes: 128 * GIB,
            },
            prices: vec![at(Duration::ZERO, 0.048, 0.0064)],
        },
        ClusterPlan {
            name: "budget",
            region: "eu-west-1",
            capacity_type: "on-demand",
            allocatable: Resources {
                cpu_millis: 16_000,
                memory_bytes: 64 * GIB,
            },
            prices: vec![at(Duration::ZERO, 0.031, 0.0042)],
        },
        ClusterPlan {
            name: "spot",
            region: "eu-west-1",
            capacity_type: "spot",
            allocatable: Resources {
                cpu_millis: 12_000,
                memory_bytes: 48 * GIB,
            },
            prices: vec![
                at(Duration::ZERO, 0.013, 0.0018),
                at(options.spike_at, 0.095, 0.0125),
            ],
        },
    ]
}

/// What the demo measured, for its summary and its test.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Cost per hour of the starting placement at the starting prices.
    pub before: f64,
    /// Cost per hour of the final placement at the final prices.
    pub after: f64,
    /// Cost per hour had nothing moved, at the final prices.
    pub unmoved: f64,
    /// `namespace/name` → cluster, at the end.
    pub placement: BTreeMap<String, String>,
    pub completed_migrations: usize,
    pub refused_decisions: usize,
    /// Whether the clusters settled before the demo stopped.
    pub settled: bool,
    /// Every line the demo printed.
    pub lines: Vec<String>,
}

/// A running demo: its clusters stay up until it is dropped.
pub struct Demo {
    pub sandboxes: Vec<Sandbox>,
    stop: watch::Sender<bool>,
    operators: Vec<tokio::task::JoinHandle<()>>,
    /// The local broker of `--transport nats`, stopped last.
    broker: Option<broker::LocalBroker>,
}

impl Demo {
    /// Writes one kubeconfig per cluster into `dir` and returns their paths.
    pub fn write_kubeconfigs(&self, dir: &std::path::Path) -> Result<Vec<PathBuf>> {
        let mut paths = Vec::new();
        for sandbox in &self.sandboxes {
            let path = dir.join(format!("{}.kubeconfig", sandbox.name()));
            sandbox
                .write_kubeconfig(&path)
                .map_err(|source| Error::Kubeconfig {
                    dir: dir.to_owned(),
                    source,
                })?;
            paths.push(path);
        }
        Ok(paths)
    }

    /// Stops the operators and then the clusters.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for operator in self.operators {
            let _ = tokio::time::timeout(Duration::from_secs(5), operator).await;
        }
        for sandbox in self.sandboxes {
            sandbox.shutdown().await;
        }
        drop(self.broker);
    }
}

/// Runs the demo and returns it (clusters still up) with its summary.
pub async fn run(options: Options) -> Result<(Demo, Summary)> {
    let mut narrator = Narrator::new(options.color, options.echo);
    let plans = plan(&options);
    let broker = match options.transport {
        crate::crd::Transport::Nats => {
            let broker = broker::LocalBroker::start().await?;
            narrator.headline(&format!(
                "Started a local NATS JetStream broker at {}: requests travel through it",
                broker.url
            ));
            Some(broker)
        }
        crate::crd::Transport::Kube => None,
    };
    narrator.headline("Starting three sandbox clusters");
    let clusters = setup::clusters(&plans, &mut narrator).await?;
    setup::peer_up(&clusters, &plans, options.transport).await?;
    let seeded = setup::seed_workloads(&clusters[0]).await?;
    narrator.say(&format!(
        "seeded {} Deployments in namespace shop on {} (payments is pinned)",
        seeded, plans[0].name
    ));
    setup::upload_policies(&clusters, &options, &mut narrator).await?;

    // A whole second, as Kubernetes stamps its times: the narration counts
    // whole seconds from here.
    let now = jiff::Timestamp::now();
    let start = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
    let demo_clusters: BTreeMap<String, DemoCluster> = clusters
        .iter()
        .zip(&plans)
        .map(|(c, plan)| {
            (
                plan.name.to_owned(),
                DemoCluster {
                    client: c.client.clone(),
                    allocatable: plan.allocatable,
                    prices: plan.prices.clone(),
                },
            )
        })
        .collect();
    let metrics = Arc::new(DemoMetrics::new(start, demo_clusters));
    let initial = summary::placement(&clusters).await;

    let (stop, stopped) = watch::channel(false);
    let mut operators = Vec::new();
    for (cluster, plan) in clusters.iter().zip(&plans) {
        let operator_error = |source| Error::Operator {
            cluster: plan.name.to_owned(),
            source,
        };
        let mut config = operator_config(plan);
        config.nats = broker.as_ref().map(|b| {
            // A loopback broker without TLS, for the demo only.
            let mut nats = controller::NatsConfig::new(b.url.clone());
            nats.allow_plaintext = true;
            nats
        });
        let mut ctx = Context::new(
            cluster.operator.clone(),
            config,
            metrics.clone(),
            Arc::new(Telemetry::new()),
        )
        .map_err(operator_error)?;
        ctx.connect_nats().await.map_err(operator_error)?;
        let mut stopped = stopped.clone();
        let name = plan.name;
        operators.push(tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            };
            if let Err(err) = controller::run(Arc::new(ctx), shutdown).await {
                tracing::error!(cluster = name, error = %err, "operator stopped");
            }
        }));
    }
    narrator.headline(
        "Operators running: one per cluster, cycling every few seconds (times count from here, \
         printed in the order things happened)",
    );

    let watched = observe::watch(&clusters, &plans, &options, &metrics, start, &mut narrator).await;

    let final_placement = summary::placement(&clusters).await;
    let summary = summary::summarize(
        &plans,
        &metrics,
        &options,
        (start, &initial),
        &watched,
        &final_placement,
        narrator,
    );
    let demo = Demo {
        sandboxes: clusters.into_iter().map(|c| c.sandbox).collect(),
        stop,
        operators,
        broker,
    };
    Ok((demo, summary))
}

fn operator_config(plan: &ClusterPlan) -> Config {
    let mut config = Config::new(plan.name);
    config.region = plan.region.to_owned();
    config.labels = [(
        "ferry.dev/capacity-type".to_owned(),
        plan.capacity_type.to_owned(),
    )]
    .into();
    config.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    config.migration_deadline = Duration::from_secs(30);
    config.error_requeue = Duration::from_secs(2);
    config.leader.identity = format!("demo-{}", plan.name);
    config.leader.renew_interval = Duration::from_secs(1);
    config.leader.lease_duration = Duration::from_secs(5);
    config.sender.poll_interval = Duration::from_millis(200);
    config.receiver.poll_interval = Duration::from_millis(200);
    config
}
