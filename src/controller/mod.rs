//! The operator: the `MigrationPolicy` control loop and everything `ferry
//! run` starts beside it.
//!
//! Every replica serves `/metrics`, `/healthz` and `/readyz`. Only the
//! leader (a coordination.k8s.io Lease) runs policy cycles, probes peers,
//! sends and receives migrations; a replica that loses the lease stops them
//! before another can take over.

mod cycle;
mod cycle_log;
mod error;
mod gauges;
mod in_flight;
mod journal;
mod leader;
pub mod module;
pub mod pod_memory;
mod process;
pub mod prometheus;
mod reconcile;
mod status;
pub mod telemetry;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::{Mutex, watch};

/// How many requests one peer's inbox stores unless `ferry run` says otherwise.
pub use crate::migration::DEFAULT_MAX_REQUESTS_PER_PEER;
pub use cycle::{Outcome, Skipped, as_workload, stateful_set_views};
pub use journal::{DEFAULT_KEEP as DEFAULT_JOURNAL_KEEP, JournalEntry, read_journal};
pub use leader::LeaderConfig;
use module::{ModuleSlot, ModuleStates};
pub use telemetry::{BUILD, BuildInfo, Telemetry};

use crate::metrics::MetricsSource;
pub use crate::migration::nats::{NatsConfig, NatsTiming};
use crate::migration::{GateMetrics, ReceiverConfig, ReceiverContext, SenderConfig, SenderContext};
use crate::peers::{PeerConfig, PeerContext, PeerSet};
use crate::policy::{Engine, EngineConfig};

/// The field manager of everything the operator writes.
pub const FIELD_MANAGER: &str = "ferry";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the policy engine did not start: {0}")]
    Engine(#[from] crate::policy::PolicyError),
    #[error("cannot serve probes and metrics on {address}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "Ferry's CRDs are not installed in this cluster ({0}); install them with `ferry crds | kubectl apply -f -`"
    )]
    MissingCrds(String),
    #[error("the NATS transport cannot start")]
    Nats(#[source] crate::migration::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How one operator instance runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// This cluster's name, as its peers know it.
    pub cluster_name: String,
    pub region: String,
    pub labels: BTreeMap<String, String>,
    /// The operator's own namespace: never a migration target by default,
    /// home of the leader Lease.
    pub namespace: String,
    /// Never write to a peer or a workload, whatever the policies say.
    pub dry_run: bool,
    /// Where each cycle's snapshot, module digest and answer are written.
    pub journal_dir: Option<PathBuf>,
    /// Entries of each policy the journal keeps; older ones are removed.
    pub journal_keep: usize,
    /// How often the key Secret is re-read, so a rotation is picked up.
    pub key_refresh: Duration,
    /// Probes and metrics.
    pub listen: SocketAddr,
    pub max_module_bytes: usize,
    /// How long a migration may take before it is rolled back.
    pub migration_deadline: Duration,
    /// Retry delay after a transient failure of a cycle.
    pub error_requeue: Duration,
    pub leader: LeaderConfig,
    pub engine: EngineConfig,
    pub sender: SenderConfig,
    pub receiver: ReceiverConfig,
    pub peers: PeerConfig,
    /// The fleet's NATS broker, for ClusterPeers with transport `Nats`.
    pub nats: Option<NatsConfig>,
}

impl Config {
    pub fn new(cluster_name: impl Into<String>) -> Self {
        Config {
            cluster_name: cluster_name.into(),
            region: String::new(),
            labels: BTreeMap::new(),
            namespace: "ferry-system".to_owned(),
            dry_run: false,
            journal_dir: None,
            journal_keep: journal::DEFAULT_KEEP,
            key_refresh: Duration::from_secs(30),
            listen: SocketAddr::from(([0, 0, 0, 0], 8080)),
            max_module_bytes: EngineConfig::default().max_module_bytes,
            migration_deadline: Duration::from_secs(600),
            error_requeue: Duration::from_secs(30),
            leader: LeaderConfig::default(),
            engine: EngineConfig::default(),
            sender: SenderConfig::default(),
            receiver: ReceiverConfig::default(),
            peers: PeerConfig::default(),
            nats: None,
        }
    }
}

/// What every reconcile of a policy shares.
pub struct Context {
    pub client: kube::Client,
    pub config: Config,
    pub engine: Engine,
    pub peers: PeerSet,
    pub metrics: Arc<dyn MetricsSource>,
    pub sender: SenderContext,
    pub recorder: Recorder,
    pub telemetry: Arc<Telemetry>,
    /// Each policy's module, by `namespace/name`. Each slot has its own
    /// lock: loading one policy's module (a fetch, a compile) never holds up
    /// another policy's cycle.
    pub(crate) modules: Mutex<HashMap<String, Arc<Mutex<ModuleSlot>>>>,
    /// What each policy's last module reload said, for `ModuleLoaded`.
    pub(crate) module_states: ModuleStates,
    /// Held from counting the moves in flight to starting a cycle's moves,
    /// so that cycles of several policies never fill a target together.
    pub(crate) moves: Mutex<()>,
}

impl Context {
    /// The policies holding a module slot, as `namespace/name`, sorted: what
    /// the operator keeps in memory for them (for diagnostics and tests).
    pub async fn held_policies(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.modules.lock().await.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// Forgets what the operator holds for policies not in `live` (deleted
    /// ones): their module slots, their last reload state and compiled
    /// modules no remaining policy runs. A slot busy with a cycle is kept
    /// until the next call, and so is every compiled module then.
    pub(crate) async fn forget_deleted(&self, live: &std::collections::HashSet<String>) {
        let mut digests = Vec::new();
        let mut all_seen = true;
        {
            let mut modules = self.modules.lock().await;
            modules.retain(|key, _| live.contains(key));
            for slot in modules.values() {
                match slot.try_lock() {
                    Ok(slot) => digests.extend(slot.active().map(|a| a.sha256.clone())),
                    Err(_) => all_seen = false,
                }
            }
        }
        self.module_states.retain(live).await;
        if all_seen {
            let keep: Vec<&str> = digests.iter().map(String::as_str).collect();
            self.engine.retain(&keep);
        }
    }

    /// Connects to the fleet's NATS broker when the configuration names
    /// one (in the background: the operator starts while the broker is
    /// down). Refuses a duplicate window shorter than a request's deadline,
    /// which would let a late repeat through the stream's deduplication.
    pub async fn connect_nats(&mut self) -> Result<()> {
        let Some(nats) = self.config.nats.clone() else {
            return Ok(());
        };
        if nats.timing.duplicate_window < self.config.migration_deadline {
            return Err(Error::Nats(crate::migration::Error::NatsConfig {
                message: format!(
                    "the duplicate window ({:?}) is shorter than a request's deadline ({:?})",
                    nats.timing.duplicate_window, self.config.migration_deadline
                ),
            }));
        }
        let client =
            crate::migration::nats::connect_in_background(&nats, &self.config.cluster_name)
                .await
                .map_err(Error::Nats)?;
        let link = crate::migration::nats::NatsLink::new(
            client,
            self.config.cluster_name.clone(),
            nats.timing,
        );
        self.sender = self.sender.clone().with_nats(link);
        Ok(())
    }

    /// The module slot of the policy `key`, created when first asked for.
    pub(crate) async fn module_slot(&self, key: &str) -> Arc<Mutex<ModuleSlot>> {
        self.modules
            .lock()
            .await
            .entry(key.to_owned())
            .or_default()
            .clone()
    }

    pub fn new(
        client: kube::Client,
        config: Config,
        metrics: Arc<dyn MetricsSource>,
        telemetry: Arc<Telemetry>,
    ) -> Result<Self> {
        Self::with_peers(client, config, metrics, telemetry, PeerSet::new())
    }

    /// As [`Context::new`], sharing `peers` with, for example, a metrics
    /// source that follows them.
    pub fn with_peers(
        client: kube::Client,
        config: Config,
        metrics: Arc<dyn MetricsSource>,
        telemetry: Arc<Telemetry>,
        peers: PeerSet,
    ) -> Result<Self> {
        let engine = Engine::new(config.engine.clone())?;
        let sender = SenderContext::with_config(
            client.clone(),
            config.cluster_name.clone(),
            peers.clone(),
            config.sender.clone(),
        )
        .with_gate_metrics(Arc::new(GateReader(metrics.clone())));
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "ferry".to_owned(),
                instance: Some(config.leader.identity.clone()),
            },
        );
        Ok(Context {
            client,
            config,
            engine,
            peers,
            metrics,
            sender,
            recorder,
            telemetry,
            modules: Mutex::new(HashMap::new()),
            module_states: ModuleStates::default(),
            moves: Mutex::new(()),
        })
    }
}

/// Runs the operator until `shutdown` resolves: probes and metrics always,
/// controllers while leader.
pub async fn run(ctx: Arc<Context>, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
    ensure_crds(&ctx.client).await?;
    let listener = telemetry::bind(ctx.config.listen)
        .await
        .map_err(|source| Error::Bind {
            address: ctx.config.listen,
            source,
        })?;
    if let Ok(address) = listener.local_addr() {
        ctx.telemetry.set_address(address);
    }
    let probes = tokio::spawn(telemetry::serve(listener, ctx.telemetry.clone()));
    ctx.telemetry.set_ready(true);

    let (stop, stopped) = watch::channel(false);
    let leading = leader::run_while_leader(
        ctx.client.clone(),
        ctx.config.leader.clone(),
        ctx.telemetry.clone(),
        {
            let ctx = ctx.clone();
            let stopped = stopped.clone();
            move || controllers(ctx.clone(), stopped.clone())
        },
        stopped,
    );
    tokio::pin!(leading);
    tokio::select! {
        () = &mut leading => {}
        () = shutdown => {
            tracing::info!("shutting down: finishing running cycles");
            let _ = stop.send(true);
            leading.await;
        }
    }
    probes.abort();
    Ok(())
}

/// Refuses to start without the CRDs, naming what to install.
async fn ensure_crds(client: &kube::Client) -> Result<()> {
    let policies: kube::Api<crate::crd::MigrationPolicy> = kube::Api::all(client.clone());
    match policies
        .list(&kube::api::ListParams::default().limit(1))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            Err(Error::MissingCrds(status.message))
        }
        // Any other failure is the API server's, not a missing CRD: the
        // controllers retry it.
        Err(_) => Ok(()),
    }
}

/// Everything only the leader runs; it ends when any of them ends, or when
/// `stop` turns true once the policy cycles in progress have finished. The
/// migration loops are dropped then: each of their steps is idempotent and
/// written to status first, so the next leader resumes them.
async fn controllers(ctx: Arc<Context>, stop: watch::Receiver<bool>) {
    // ClusterPeers may reference Secrets only in the operator's namespace.
    let mut peer_config = ctx.config.peers.clone();
    peer_config
        .namespace
        .get_or_insert_with(|| ctx.config.namespace.clone());
    let peers = crate::peers::run_peer_controller(PeerContext {
        client: ctx.client.clone(),
        peers: ctx.peers.clone(),
        config: peer_config,
    });
    let mut receiver_config = ctx.config.receiver.clone();
    receiver_config
        .operator_namespace
        .get_or_insert_with(|| ctx.config.namespace.clone());
    let receiver = crate::migration::run_receiver(
        ReceiverContext::new(ctx.client.clone(), ctx.peers.clone(), receiver_config)
            .with_metrics(ctx.telemetry.receiver.clone())
            .with_keys(ctx.sender.keys.clone()),
    );
    let keys = load_keys(ctx.clone());
    let sender = crate::migration::run_sender(ctx.sender.clone());
    let nats = run_nats(ctx.clone());
    let policies = reconcile::run_policies(ctx.clone(), stop);
    let refresh =
        gauges::refresh_gauges(ctx.client.clone(), ctx.peers.clone(), ctx.telemetry.clone());
    tokio::select! {
        () = peers => tracing::warn!("the peer controller stopped"),
        () = receiver => tracing::warn!("the migration receiver stopped"),
        () = sender => tracing::warn!("the migration sender stopped"),
        () = policies => tracing::info!("the policy controller stopped"),
        () = refresh => {}
        () = keys => {}
        () = nats => tracing::warn!("the NATS transport stopped"),
    }
}

/// The NATS transport's loops, when the operator has a broker: the streams
/// (created if missing and allowed), the sender's status feed and the
/// receiver's bridge. Without a broker, never returns.
async fn run_nats(ctx: Arc<Context>) {
    let Some(link) = ctx.sender.nats.clone() else {
        return std::future::pending().await;
    };
    if let Err(error) = crate::migration::nats::ensure_streams(link.client(), link.timing()).await {
        tracing::warn!(%error, "the NATS streams are not there yet; the transport retries");
    }
    let receiver = crate::migration::nats::NatsReceiverContext::new(
        ctx.client.clone(),
        ctx.peers.clone(),
        link.clone(),
        ctx.sender.keys.clone(),
    )
    .with_metrics(ctx.telemetry.receiver.clone());
    tokio::join!(
        link.run_status_feed(),
        crate::migration::nats::run_nats_receiver(receiver)
    );
}

/// Loads this cluster's keys into the ring the sender and the receiver
/// share (creating the key Secret on first start), retrying until it
/// succeeds; until then both sign nothing and act on nothing. Then re-reads
/// the Secret every `key_refresh`, so a `ferry peer rotate` takes effect
/// without a restart (the previous key keeps verifying what was signed
/// before). Never returns.
async fn load_keys(ctx: Arc<Context>) {
    let (client, namespace) = (&ctx.client, &ctx.config.namespace);
    loop {
        let wait = match crate::peers::keys::load_or_create(
            client,
            namespace,
            crate::peers::keys::KEY_SECRET_NAME,
        )
        .await
        {
            Ok(keys) => {
                let held = ctx.sender.keys.get().map(|k| k.key_id().to_owned());
                if held.as_deref() != Some(keys.key_id()) {
                    tracing::info!(key_id = keys.key_id(), "cluster keys loaded");
                    ctx.sender.keys.set(keys);
                }
                ctx.config.key_refresh
            }
            Err(error) => {
                tracing::warn!(%error, "cannot load this cluster's keys; retrying");
                ctx.config.error_requeue
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// A progressive move's health gate, read through the operator's metrics
/// source: the target cluster's Prometheus, found as the control loop finds
/// it for prices.
struct GateReader(Arc<dyn MetricsSource>);

impl GateMetrics for GateReader {
    fn values<'a>(
        &'a self,
        cluster: &'a str,
        query: &'a str,
    ) -> futures::future::BoxFuture<'a, std::result::Result<Vec<f64>, String>> {
        Box::pin(async move {
            self.0
                .instant_values(cluster, query)
                .await
                .map_err(|e| e.with_root_cause())
        })
    }
}
