//! `ferry peer join` and `ferry peer rotate`: peer two clusters (or
//! refresh a cluster's keys and tokens) with admin access to them, or in
//! two halves through a grant file. The steps are `ferry::peers::join`'s.
//!
//! Grant files hold a bearer token: they are written mode 0600 and the
//! token is never printed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use ferry::peers::join::{self, AcceptOptions, Change, Grant, GrantRequest, Install};

use super::peer_admin::{Admin, admin, print_changes, write_grant};

#[derive(Debug, Subcommand)]
pub enum PeerCommand {
    /// Peer two clusters: each gets an inbox for the other, a ServiceAccount
    /// bound to the chart's peer role there, a time-bound token, and the
    /// other's kubeconfig Secret, ClusterPeer and public keys.
    ///
    /// With both admin kubeconfigs it does everything, both ways unless
    /// --one-way. For clusters no one machine reaches both of, use the two
    /// halves: `join grant` against the receiving cluster, then `join
    /// accept` of the file against the sending one. Re-running is safe: it
    /// refreshes tokens and keys and changes nothing else.
    ///
    /// Example: ferry peer join --from west.kubeconfig --from-name west
    /// --from-region eu-west-1 --to east.kubeconfig --to-name east
    /// --to-region us-east-1 --accept-from true --allowed-namespace apps
    Join(Box<JoinArgs>),
    /// Rotate this cluster's keys (the previous ones keep verifying) and
    /// re-issue every peer's token, then update the peers' ClusterPeers and
    /// kubeconfig Secrets (--peer-kubeconfig) or write grant files for their
    /// operators to accept (--out-dir). Old tokens stay valid until they expire.
    Rotate(Box<RotateArgs>),
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct JoinArgs {
    #[command(subcommand)]
    half: Option<JoinHalf>,
    /// Admin kubeconfig of the sending cluster (the one that moves workloads away).
    #[arg(long, env = "FERRY_FROM", value_name = "PATH", required = true)]
    from: Option<PathBuf>,
    /// Context of --from to use instead of its current one.
    #[arg(long, env = "FERRY_FROM_CONTEXT", value_name = "NAME")]
    from_context: Option<String>,
    /// The name the sending cluster goes by (its --cluster-name).
    #[arg(long, env = "FERRY_FROM_NAME", value_name = "NAME", required = true)]
    from_name: Option<String>,
    #[command(flatten)]
    from_describe: FromDescription,
    /// Admin kubeconfig of the receiving cluster.
    #[arg(long, env = "FERRY_TO", value_name = "PATH", required = true)]
    to: Option<PathBuf>,
    /// Context of --to to use instead of its current one.
    #[arg(long, env = "FERRY_TO_CONTEXT", value_name = "NAME")]
    to_context: Option<String>,
    /// The name the receiving cluster goes by (its --cluster-name).
    #[arg(long, env = "FERRY_TO_NAME", value_name = "NAME", required = true)]
    to_name: Option<String>,
    #[command(flatten)]
    to_describe: ToDescription,
    /// Only the first direction: the sending cluster gets credentials to
    /// the receiving one, not back. The receiving cluster then has no
    /// ClusterPeer for the sender (so no keys to verify it by) until the
    /// reverse is joined too.
    #[arg(long, env = "FERRY_ONE_WAY")]
    one_way: bool,
    #[command(flatten)]
    settings: ReceiveSettings,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Subcommand)]
enum JoinHalf {
    /// In the receiving cluster: create the sending peer's inbox, account,
    /// binding and token, and write them with this cluster's public keys to
    /// a grant file (mode 0600: it holds the token).
    Grant(GrantArgs),
    /// In the sending cluster: store a grant file as the kubeconfig Secret
    /// and ClusterPeer of the cluster that granted it.
    Accept(AcceptArgs),
}

/// How the sending cluster describes itself to the receiving one.
#[derive(Debug, Args)]
struct FromDescription {
    /// The sending cluster's API server URL as the receiving one reaches it
    /// (default: the one in --from).
    #[arg(long, env = "FERRY_FROM_SERVER", value_name = "URL")]
    from_server: Option<String>,
    /// The sending cluster's region, for the receiving cluster's ClusterPeer.
    #[arg(long, env = "FERRY_FROM_REGION", value_name = "REGION")]
    from_region: Option<String>,
    /// The sending cluster's Prometheus URL, for the receiving cluster's ClusterPeer.
    #[arg(long, env = "FERRY_FROM_PROMETHEUS", value_name = "URL")]
    from_prometheus: Option<String>,
}

/// How the receiving cluster describes itself to the sending one.
#[derive(Debug, Args)]
struct ToDescription {
    /// The receiving cluster's API server URL as the sending one reaches it
    /// (default: the one in --to).
    #[arg(long, env = "FERRY_TO_SERVER", value_name = "URL")]
    to_server: Option<String>,
    /// The receiving cluster's region, for the sending cluster's ClusterPeer.
    #[arg(long, env = "FERRY_TO_REGION", value_name = "REGION")]
    to_region: Option<String>,
    /// The receiving cluster's Prometheus URL, for the sending cluster's ClusterPeer.
    #[arg(long, env = "FERRY_TO_PROMETHEUS", value_name = "URL")]
    to_prometheus: Option<String>,
}

/// What a cluster accepts from the peer, set only when given.
#[derive(Debug, Args)]
struct ReceiveSettings {
    /// Set `acceptFrom` on the ClusterPeer written (true: that peer may
    /// send workloads here). Left as it is when absent.
    #[arg(long, env = "FERRY_ACCEPT_FROM", value_name = "BOOL")]
    accept_from: Option<bool>,
    /// Set `allowedNamespaces` on the ClusterPeer written (repeat for
    /// several). Left as it is when absent.
    #[arg(
        long = "allowed-namespace",
        env = "FERRY_ALLOWED_NAMESPACE",
        value_name = "NAMESPACE",
        value_delimiter = ','
    )]
    allowed_namespaces: Vec<String>,
    /// Trust the grant's keys even if they share none with the keys already
    /// trusted for that cluster (after two rotations without an accept).
    #[arg(long, env = "FERRY_REPLACE_KEYS")]
    replace_keys: bool,
}

/// Flags every peer command shares.
#[derive(Debug, Args)]
pub(super) struct Common {
    /// Ferry's Helm release in the clusters (names the peer role and accounts).
    #[arg(
        long,
        env = "FERRY_RELEASE",
        default_value = "ferry",
        value_name = "NAME"
    )]
    pub(super) release: String,
    /// The namespace Ferry runs in, in the clusters (its `ferry run
    /// --ferry-namespace`): the ClusterPeers, Secrets and accounts written
    /// go there.
    #[arg(
        short = 'n',
        long = "ferry-namespace",
        env = "FERRY_FERRY_NAMESPACE",
        visible_alias = "namespace",
        default_value = "ferry-system",
        value_name = "NAMESPACE"
    )]
    pub(super) namespace: String,
    /// Lifetime asked for the peer tokens, for example `720h` or `30d`; the
    /// API server may grant less, and the real expiry is printed.
    #[arg(long, env = "FERRY_TOKEN_TTL", default_value = "30d", value_name = "DURATION", value_parser = super::duration::parse_positive)]
    pub(super) token_ttl: Duration,
    /// Print what would be created or updated, and write nothing.
    #[arg(long, env = "FERRY_DRY_RUN")]
    pub(super) dry_run: bool,
    /// Permit plain-http servers (local test clusters only).
    #[arg(long, env = "FERRY_ALLOW_INSECURE")]
    pub(super) allow_insecure: bool,
    #[command(flatten)]
    pub(super) output: super::output::OutputArgs,
}

#[derive(Debug, Args)]
struct GrantArgs {
    /// Admin kubeconfig of the receiving cluster (the one granting).
    #[arg(long, env = "FERRY_TO", value_name = "PATH")]
    to: PathBuf,
    /// Context of --to to use instead of its current one.
    #[arg(long, env = "FERRY_TO_CONTEXT", value_name = "NAME")]
    to_context: Option<String>,
    /// The name the receiving cluster goes by.
    #[arg(long, env = "FERRY_TO_NAME", value_name = "NAME")]
    to_name: String,
    /// The name the sending cluster goes by.
    #[arg(long, env = "FERRY_FROM_NAME", value_name = "NAME")]
    from_name: String,
    #[command(flatten)]
    describe: ToDescription,
    /// Labels of the receiving cluster for the sender's ClusterPeer (repeatable).
    #[arg(long = "label", env = "FERRY_LABEL", value_name = "KEY=VALUE", value_delimiter = ',', value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// Where to write the grant file (mode 0600).
    #[arg(long, env = "FERRY_OUT", value_name = "PATH")]
    out: PathBuf,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
struct AcceptArgs {
    #[command(flatten)]
    kube: super::KubeArgs,
    /// The name the accepting (sending) cluster goes by; must be the grant's peer.
    #[arg(long, env = "FERRY_CLUSTER_NAME", value_name = "NAME")]
    cluster_name: String,
    /// The grant file written by `ferry peer join grant`.
    #[arg(long, env = "FERRY_FILE", value_name = "PATH")]
    file: PathBuf,
    /// The granting cluster's region (overrides the grant's).
    #[arg(long, env = "FERRY_REGION", value_name = "REGION")]
    region: Option<String>,
    /// The granting cluster's Prometheus URL (overrides the grant's).
    #[arg(long, env = "FERRY_PROMETHEUS", value_name = "URL")]
    prometheus: Option<String>,
    /// Labels of the granting cluster (added to the grant's; repeatable).
    #[arg(long = "label", env = "FERRY_LABEL", value_name = "KEY=VALUE", value_delimiter = ',', value_parser = parse_label)]
    labels: Vec<(String, String)>,
    #[command(flatten)]
    settings: ReceiveSettings,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, Args)]
pub struct RotateArgs {
    #[command(flatten)]
    pub(super) kube: super::KubeArgs,
    /// The name this cluster goes by.
    #[arg(long, env = "FERRY_CLUSTER_NAME", value_name = "NAME")]
    pub(super) cluster_name: String,
    /// This cluster's API server URL as its peers reach it (default: the
    /// one in the kubeconfig).
    #[arg(long, env = "FERRY_SERVER", value_name = "URL")]
    pub(super) server: Option<String>,
    /// Admin kubeconfig of a peer, whose ClusterPeer and kubeconfig Secret
    /// for this cluster are updated (repeatable).
    #[arg(long = "peer-kubeconfig", env = "FERRY_PEER_KUBECONFIG", value_name = "PEER=PATH", value_delimiter = ',', value_parser = parse_peer_path)]
    pub(super) peer_kubeconfigs: Vec<(String, PathBuf)>,
    /// Where to write a grant file (mode 0600) for each peer without a
    /// --peer-kubeconfig, for its operator to `ferry peer join accept`.
    #[arg(long, env = "FERRY_OUT_DIR", value_name = "DIR")]
    pub(super) out_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(super) common: Common,
}

fn parse_label(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))
}

fn parse_peer_path(text: &str) -> Result<(String, PathBuf), String> {
    parse_label(text).map(|(peer, path)| (peer, PathBuf::from(path)))
}

pub async fn run(command: PeerCommand) -> anyhow::Result<ExitCode> {
    match command {
        PeerCommand::Join(args) => match args.half {
            Some(JoinHalf::Grant(half)) => grant_half(half).await,
            Some(JoinHalf::Accept(half)) => accept_half(half).await,
            None => join_both(*args).await,
        },
        PeerCommand::Rotate(args) => super::peer_rotate::run(*args).await,
    }
}

impl Common {
    pub(super) fn install(&self) -> anyhow::Result<Install> {
        join::check_label("--release", &self.release)?;
        join::check_label("--ferry-namespace", &self.namespace)?;
        Ok(Install {
            release: self.release.clone(),
            namespace: self.namespace.clone(),
        })
    }
}

async fn join_both(args: JoinArgs) -> anyhow::Result<ExitCode> {
    let install = args.common.install()?;
    let (Some(from), Some(from_name), Some(to), Some(to_name)) =
        (&args.from, &args.from_name, &args.to, &args.to_name)
    else {
        anyhow::bail!("--from, --from-name, --to and --to-name are required");
    };
    join::check_peer_name("--from-name", from_name)?;
    join::check_peer_name("--to-name", to_name)?;
    anyhow::ensure!(
        from_name != to_name,
        "--from-name and --to-name are the same cluster"
    );
    let sender = admin(from, args.from_context.as_deref()).await?;
    let receiver = admin(to, args.to_context.as_deref()).await?;
    // Both clusters are checked before either is written, so a missing
    // chart leaves both untouched.
    join::check_installed(&receiver.client, &install, to_name).await?;
    join::check_installed(&sender.client, &install, from_name).await?;
    let settings = receive_options(&args.settings, &args.common);
    let to_side = Side {
        admin: &receiver,
        name: to_name,
        server: args.to_describe.to_server.clone(),
        region: args.to_describe.to_region.clone(),
        prometheus: args.to_describe.to_prometheus.clone(),
    };
    let from_side = Side {
        admin: &sender,
        name: from_name,
        server: args.from_describe.from_server.clone(),
        region: args.from_describe.from_region.clone(),
        prometheus: args.from_describe.from_prometheus.clone(),
    };
    let mut changes =
        one_direction(&install, &to_side, &from_side, &settings, &args.common).await?;
    if !args.one_way {
        changes
            .extend(one_direction(&install, &from_side, &to_side, &settings, &args.common).await?);
    }
    print_changes(&changes, &args.common)?;
    Ok(ExitCode::SUCCESS)
}

/// One cluster in a join, as the other sees it.
struct Side<'a> {
    admin: &'a Admin,
    name: &'a str,
    server: Option<String>,
    region: Option<String>,
    prometheus: Option<String>,
}

/// `receiver` grants `sender`, and `sender` accepts.
async fn one_direction(
    install: &Install,
    receiver: &Side<'_>,
    sender: &Side<'_>,
    settings: &AcceptOptions,
    common: &Common,
) -> anyhow::Result<Vec<Change>> {
    let request = GrantRequest {
        cluster: receiver.name.to_owned(),
        peer: sender.name.to_owned(),
        server: receiver
            .server
            .clone()
            .unwrap_or_else(|| receiver.admin.server.clone()),
        certificate_authority_data: receiver.admin.ca_data.clone(),
        token_ttl: common.token_ttl,
        region: receiver.region.clone(),
        labels: BTreeMap::new(),
        prometheus: receiver.prometheus.clone(),
    };
    let (grant, mut changes) =
        join::grant(&receiver.admin.client, install, &request, common.dry_run).await?;
    let options = AcceptOptions {
        cluster: sender.name.to_owned(),
        ..settings.clone()
    };
    changes.extend(
        join::accept(
            &sender.admin.client,
            install,
            &grant,
            &options,
            common.dry_run,
        )
        .await?,
    );
    Ok(changes)
}

fn receive_options(settings: &ReceiveSettings, common: &Common) -> AcceptOptions {
    AcceptOptions {
        accept_from: settings.accept_from,
        allowed_namespaces: (!settings.allowed_namespaces.is_empty())
            .then(|| settings.allowed_namespaces.clone()),
        replace_keys: settings.replace_keys,
        allow_insecure: common.allow_insecure,
        ..AcceptOptions::default()
    }
}

async fn grant_half(args: GrantArgs) -> anyhow::Result<ExitCode> {
    let install = args.common.install()?;
    let receiver = admin(&args.to, args.to_context.as_deref()).await?;
    let request = GrantRequest {
        cluster: args.to_name.clone(),
        peer: args.from_name.clone(),
        server: args
            .describe
            .to_server
            .clone()
            .unwrap_or_else(|| receiver.server.clone()),
        certificate_authority_data: receiver.ca_data.clone(),
        token_ttl: args.common.token_ttl,
        region: args.describe.to_region.clone(),
        labels: args.labels.into_iter().collect(),
        prometheus: args.describe.to_prometheus.clone(),
    };
    let (grant, changes) =
        join::grant(&receiver.client, &install, &request, args.common.dry_run).await?;
    print_changes(&changes, &args.common)?;
    if !args.common.dry_run {
        grant.validate(args.common.allow_insecure)?;
        write_grant(&args.out, &grant, args.common.output.output)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn accept_half(args: AcceptArgs) -> anyhow::Result<ExitCode> {
    let install = args.common.install()?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading the grant file {}", args.file.display()))?;
    let grant = Grant::from_file_text(&text, args.common.allow_insecure)
        .with_context(|| format!("the grant file {}", args.file.display()))?;
    anyhow::ensure!(
        grant.peer == args.cluster_name,
        "the grant file {} is for cluster {:?}, not {:?} (--cluster-name)",
        args.file.display(),
        grant.peer,
        args.cluster_name
    );
    let (client, _) = args.kube.client().await?;
    let options = AcceptOptions {
        cluster: args.cluster_name.clone(),
        region: args.region,
        labels: args.labels.into_iter().collect(),
        prometheus: args.prometheus,
        ..receive_options(&args.settings, &args.common)
    };
    let changes = join::accept(&client, &install, &grant, &options, args.common.dry_run).await?;
    print_changes(&changes, &args.common)?;
    Ok(ExitCode::SUCCESS)
}
