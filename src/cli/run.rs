//! `ferry run`: the operator.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use ferry::controller::prometheus::ClusterPrometheus;
use ferry::controller::{Config, Context, Telemetry};
use ferry::metrics::{PrometheusConfig, PrometheusEndpoint, Queries};
use ferry::modules::DiskCache;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// This cluster's name, as its peers' ClusterPeer objects call it.
    #[arg(long, env = "FERRY_CLUSTER_NAME")]
    cluster_name: String,
    /// This cluster's region, shown to policies.
    #[arg(long, env = "FERRY_REGION", default_value = "")]
    region: String,
    /// A label of this cluster shown to policies, `key=value`; repeatable.
    #[arg(long = "cluster-label", env = "FERRY_CLUSTER_LABEL", value_name = "KEY=VALUE", value_delimiter = ',', value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// The namespace Ferry runs in: home of its leader Lease and of the
    /// Secrets ClusterPeers may name, never a migration target.
    #[arg(
        long = "ferry-namespace",
        env = "FERRY_FERRY_NAMESPACE",
        value_name = "NAMESPACE",
        alias = "namespace",
        default_value = "ferry-system"
    )]
    namespace: String,
    /// Write nothing to peers or workloads whatever the policies say.
    #[arg(long, env = "FERRY_DRY_RUN")]
    dry_run: bool,
    /// Write each cycle's snapshot, module digest and answer here.
    #[arg(long, env = "FERRY_JOURNAL_DIR", value_name = "DIR")]
    journal_dir: Option<PathBuf>,
    /// Entries of each policy the journal keeps; the oldest are removed.
    #[arg(long, env = "FERRY_JOURNAL_KEEP", value_name = "N", default_value_t = ferry::controller::DEFAULT_JOURNAL_KEEP)]
    journal_keep: usize,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "FERRY_LISTEN", default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// This cluster's Prometheus (or the shared Thanos, Mimir).
    #[arg(long, env = "FERRY_PROMETHEUS", value_name = "URL")]
    prometheus: String,
    /// Label telling clusters apart in a shared Prometheus.
    #[arg(
        long = "prometheus-cluster-label",
        env = "FERRY_PROMETHEUS_CLUSTER_LABEL",
        value_name = "LABEL"
    )]
    prometheus_cluster_label: Option<String>,
    /// Bearer token for this cluster's Prometheus. Sent only over https
    /// unless --prometheus-allow-token-over-http is given.
    #[arg(long, env = "FERRY_PROMETHEUS_TOKEN", hide_env_values = true)]
    prometheus_token: Option<String>,
    /// Send --prometheus-token to a plain-http --prometheus URL, where anyone
    /// on the path can read it. Off by default.
    #[arg(long, env = "FERRY_PROMETHEUS_ALLOW_TOKEN_OVER_HTTP")]
    prometheus_allow_token_over_http: bool,
    /// Let ClusterPeers that set spec.insecure.credentialPlugins use exec and
    /// auth-provider credential plugins, which run programs inside this
    /// process's pod. Off by default: no peer may use one.
    #[arg(long, env = "FERRY_ALLOW_CREDENTIAL_PLUGINS")]
    allow_credential_plugins: bool,
    /// CA bundle (PEM) for this cluster's Prometheus.
    #[arg(long, env = "FERRY_PROMETHEUS_CA", value_name = "PEM")]
    prometheus_ca: Option<PathBuf>,
    /// PromQL overrides (YAML or JSON; the defaults are listed in docs/install.md).
    #[arg(long, env = "FERRY_QUERIES", value_name = "FILE")]
    queries: Option<PathBuf>,
    /// Prometheus gauge of each cluster's carbon intensity (gCO2/kWh), which
    /// contract v2 policies see as carbonIntensity. Unset: not queried.
    #[arg(long, env = "FERRY_CARBON_INTENSITY_METRIC", value_name = "METRIC", value_parser = parse_metric_name)]
    carbon_intensity_metric: Option<String>,
    /// Keep compiled policy modules here across restarts.
    #[arg(long, env = "FERRY_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Most MiB the compiled modules in --cache-dir take; the least
    /// recently used are removed.
    #[arg(long, env = "FERRY_CACHE_MAX_MIB", value_name = "MIB", default_value_t = ferry::modules::DEFAULT_CACHE_MAX_BYTES >> 20)]
    cache_max_mib: u64,
    /// Linear memory all policy evaluations in flight may hold together, in
    /// MiB. Default: half the pod's memory limit (its cgroup), or 1024 when
    /// it has none. A policy whose memory limit is over it is refused.
    #[arg(long, env = "FERRY_EVALUATION_MEMORY_MIB", value_name = "MIB")]
    evaluation_memory_mib: Option<u64>,
    /// How long a finished WorkloadMigration (a request from a peer, or
    /// this cluster's own record of a move) stays before it is deleted; the
    /// journal and Events keep the history.
    #[arg(long, env = "FERRY_FINISHED_TTL", value_name = "DURATION", value_parser = super::duration::parse_positive, default_value = "24h")]
    finished_ttl: std::time::Duration,
    /// Most requests one peer's inbox stores. Beyond it the oldest finished
    /// requests are deleted first; a new request is refused (InboxFull)
    /// only when the requests in flight alone fill it.
    #[arg(long, env = "FERRY_MAX_REQUESTS_PER_PEER", value_name = "N", default_value_t = ferry::controller::DEFAULT_MAX_REQUESTS_PER_PEER as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_requests_per_peer: u64,
    /// Identity in the leader election; the pod name in a cluster.
    #[arg(long, env = "FERRY_IDENTITY")]
    identity: Option<String>,
    /// The leader-election Lease, in the operator's namespace: one per
    /// installation, so two installations in a namespace never share one.
    #[arg(
        long,
        env = "FERRY_LEADER_LEASE_NAME",
        value_name = "NAME",
        default_value = "ferry-leader"
    )]
    leader_lease_name: String,
    /// How long a leader that stops renewing keeps the Lease (`15s`, `1m`).
    #[arg(long, env = "FERRY_LEADER_LEASE_DURATION", value_name = "DURATION", default_value = "15s", value_parser = super::duration::parse_positive)]
    leader_lease_duration: std::time::Duration,
    /// How often the leader renews the Lease; under --leader-lease-duration.
    #[arg(long, env = "FERRY_LEADER_RENEW_INTERVAL", value_name = "DURATION", default_value = "5s", value_parser = super::duration::parse_positive)]
    leader_renew_interval: std::time::Duration,
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    kube: super::KubeArgs,
}

/// The leader-election settings from the flags; the leader must renew well
/// within the Lease's duration, or it would lose the Lease between renewals.
fn leader_timing(args: &RunArgs) -> anyhow::Result<(std::time::Duration, std::time::Duration)> {
    if args.leader_renew_interval.is_zero()
        || args.leader_renew_interval >= args.leader_lease_duration
    {
        anyhow::bail!(
            "--leader-renew-interval ({:?}) must be above zero and under --leader-lease-duration ({:?})",
            args.leader_renew_interval,
            args.leader_lease_duration
        );
    }
    Ok((args.leader_lease_duration, args.leader_renew_interval))
}

/// The fleet's NATS broker, for ClusterPeers with `transport: Nats`.
#[derive(Debug, Args)]
struct NatsArgs {
    /// The broker: tls://host:port, or nats://host:port (TLS is still
    /// required); comma-separated for a cluster of servers. Absent: no
    /// peer may use transport Nats.
    #[arg(long, env = "FERRY_NATS_URL", value_name = "URL")]
    nats_url: Option<String>,
    /// CA bundle (PEM) that signs the broker's certificate.
    #[arg(
        long,
        env = "FERRY_NATS_CA_FILE",
        value_name = "PEM",
        requires = "nats_url"
    )]
    nats_ca_file: Option<PathBuf>,
    /// This cluster's NATS credentials file (user JWT and nkey seed).
    #[arg(
        long,
        env = "FERRY_NATS_CREDS_FILE",
        value_name = "FILE",
        requires = "nats_url",
        conflicts_with = "nats_nkey_seed_file"
    )]
    nats_creds_file: Option<PathBuf>,
    /// A file holding this cluster's NATS nkey seed (mount it from a Secret).
    #[arg(
        long,
        env = "FERRY_NATS_NKEY_SEED_FILE",
        value_name = "FILE",
        requires = "nats_url"
    )]
    nats_nkey_seed_file: Option<PathBuf>,
    /// Talk to the broker without TLS: anyone on the path reads every
    /// request, workload manifests included. Off by default.
    #[arg(long, env = "FERRY_NATS_ALLOW_PLAINTEXT")]
    nats_allow_plaintext: bool,
    /// Replicas of each stream Ferry creates (3 on a three-server JetStream cluster).
    #[arg(
        long,
        env = "FERRY_NATS_STREAM_REPLICAS",
        value_name = "N",
        default_value_t = 1
    )]
    nats_stream_replicas: usize,
    /// How long the streams drop a repeated message id: at least a
    /// request's deadline.
    #[arg(long, env = "FERRY_NATS_DUPLICATE_WINDOW", value_name = "DURATION", default_value = "1h", value_parser = ferry::units::duration::parse)]
    nats_duplicate_window: std::time::Duration,
}

impl NatsArgs {
    /// The broker's settings, if a URL was given.
    fn config(&self) -> Option<ferry::controller::NatsConfig> {
        let url = self.nats_url.clone()?;
        let mut config = ferry::controller::NatsConfig::new(url);
        config.ca_file = self.nats_ca_file.clone();
        config.creds_file = self.nats_creds_file.clone();
        config.nkey_seed_file = self.nats_nkey_seed_file.clone();
        config.allow_plaintext = self.nats_allow_plaintext;
        config.timing.stream_replicas = self.nats_stream_replicas.max(1);
        config.timing.duplicate_window = self.nats_duplicate_window;
        config.timing.max_age = config.timing.max_age.max(self.nats_duplicate_window);
        Some(config)
    }
}

pub(super) fn parse_label(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))
}

/// This cluster's Prometheus from the flags; refused when its token would
/// travel over plain http without `--prometheus-allow-token-over-http`.
fn own_prometheus(args: &RunArgs) -> anyhow::Result<PrometheusEndpoint> {
    let ca_pem = match &args.prometheus_ca {
        Some(path) => {
            Some(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    let own = PrometheusEndpoint {
        url: args.prometheus.clone(),
        bearer_token: args.prometheus_token.clone(),
        ca_pem,
        cluster_label: args.prometheus_cluster_label.clone(),
        allow_token_over_plain_http: args.prometheus_allow_token_over_http,
    };
    if own.check_token_transport().is_err() {
        anyhow::bail!(
            "--prometheus-token would be sent in clear to the plain-http --prometheus {}: use an https URL, or pass --prometheus-allow-token-over-http",
            own.url
        );
    }
    Ok(own)
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // The flags are checked before anything connects.
    let own = own_prometheus(&args)?;
    let (lease_duration, renew_interval) = leader_timing(&args)?;
    let (client, _) = args.kube.client().await?;
    let mut config = Config::new(&args.cluster_name);
    config.region = args.region;
    config.labels = args.labels.into_iter().collect::<BTreeMap<_, _>>();
    config.namespace = args.namespace.clone();
    config.dry_run = args.dry_run;
    config.journal_dir = args.journal_dir;
    config.journal_keep = args.journal_keep.max(1);
    config.listen = args.listen;
    if let Some(dir) = &args.cache_dir {
        let cache = DiskCache::with_max_bytes(dir, args.cache_max_mib.saturating_mul(1 << 20))
            .with_context(|| format!("cannot use cache directory {}", dir.display()))?;
        config.engine.cache = Some(Arc::new(cache));
    }
    config.engine.memory_budget = ferry::controller::pod_memory::evaluation_budget(
        args.evaluation_memory_mib,
        ferry::controller::pod_memory::cgroup_memory_limit(),
    )
    .map_err(anyhow::Error::msg)?;
    // ClusterPeers may reference Secrets only in this namespace.
    config.peers.namespace = Some(args.namespace.clone());
    config.peers.allow_credential_plugins = args.allow_credential_plugins;
    config.sender.finished_ttl = args.finished_ttl;
    config.receiver.finished_ttl = args.finished_ttl;
    config.receiver.max_requests_per_peer =
        usize::try_from(args.max_requests_per_peer).unwrap_or(usize::MAX);
    config.leader.namespace = args.namespace.clone();
    config.leader.lease_name = args.leader_lease_name;
    config.leader.lease_duration = lease_duration;
    config.leader.renew_interval = renew_interval;
    config.nats = args.nats.config();
    if let Some(identity) = args.identity {
        config.leader.identity = identity;
    }

    let queries = match &args.queries {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_saphyr::from_str::<Queries>(&text)
                .with_context(|| format!("{} holds invalid queries", path.display()))?
        }
        None => Queries::default(),
    };
    let queries = match &args.carbon_intensity_metric {
        Some(metric) => queries
            .with_carbon_intensity_metric(metric)
            .map_err(|err| anyhow::anyhow!("--carbon-intensity-metric: {err}"))?,
        None => queries,
    };
    let telemetry = Arc::new(Telemetry::new());
    let prometheus_config = PrometheusConfig {
        queries,
        ..PrometheusConfig::default()
    };
    // The metrics source follows the peers the controller discovers.
    let peers = ferry::peers::PeerSet::new();
    let metrics = Arc::new(ClusterPrometheus::new(
        client.clone(),
        &args.namespace,
        &args.cluster_name,
        own,
        peers.clone(),
        prometheus_config,
    ));
    let mut ctx = Context::with_peers(client, config, metrics, telemetry, peers)?;
    ctx.connect_nats().await?;
    let ctx = Arc::new(ctx);
    ferry::controller::run(ctx, shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// A Prometheus metric name, refused when parsing the flags (before any
/// connection) by the same rule the queries apply.
pub(super) fn parse_metric_name(text: &str) -> Result<String, String> {
    Queries::default()
        .with_carbon_intensity_metric(text)
        .map(|_| text.to_owned())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    fn run_args(extra: &[&str]) -> super::RunArgs {
        let mut argv = vec![
            "ferry",
            "run",
            "--cluster-name=east",
            "--prometheus=http://p:9090",
        ];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::try_parse_from(&argv).unwrap().command {
            crate::cli::Command::Run(args) => *args,
            _ => unreachable!("`run` parses as the run command"),
        }
    }

    #[test]
    fn the_leader_lease_defaults_to_ferry_leader_and_takes_durations() {
        let args = run_args(&[]);
        assert_eq!(args.leader_lease_name, "ferry-leader");
        let (duration, renew) = super::leader_timing(&args).unwrap();
        assert_eq!((duration.as_secs(), renew.as_secs()), (15, 5));

        let args = run_args(&[
            "--leader-lease-name=west-leader",
            "--leader-lease-duration=1m",
            "--leader-renew-interval=500ms",
        ]);
        assert_eq!(args.leader_lease_name, "west-leader");
        let (duration, renew) = super::leader_timing(&args).unwrap();
        assert_eq!((duration.as_secs(), renew.as_millis()), (60, 500));
    }

    #[test]
    fn a_renewal_slower_than_the_lease_is_refused() {
        let args = run_args(&["--leader-lease-duration=5s", "--leader-renew-interval=5s"]);
        let err = super::leader_timing(&args).unwrap_err().to_string();
        assert!(err.contains("--leader-renew-interval"), "{err}");
        let bad = [
            "ferry",
            "run",
            "--cluster-name=e",
            "--prometheus=x",
            "--leader-lease-duration=15",
        ];
        assert!(
            crate::cli::Cli::try_parse_from(bad).is_err(),
            "a duration needs a unit"
        );
    }
}
