//! The command line: one file per subcommand, each with its arguments and the
//! glue that calls the library.

mod crds;
mod demo;
mod peer;
mod peer_admin;
mod peer_rotate;
mod policy;
mod run;
mod sandbox;
mod simulate;
mod snapshot;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Ferry moves Kubernetes workloads to the cluster that runs them cheaper.
#[derive(Debug, Parser)]
#[command(name = "ferry", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Watch Ferry work: three local clusters, one operator each, scripted prices.
    Demo(demo::DemoArgs),
    /// Run the operator in this cluster.
    Run(Box<run::RunArgs>),
    /// Check, evaluate and upload policy modules.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Peer clusters (join) and rotate their keys and tokens.
    #[command(subcommand)]
    Peer(peer::PeerCommand),
    /// Print the cluster part of the snapshot a policy would see, read from Prometheus.
    Snapshot(snapshot::SnapshotArgs),
    /// Print Ferry's CustomResourceDefinitions as YAML.
    Crds(crds::CrdsArgs),
    /// Run a local in-memory Kubernetes API server.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
    /// Replay a scenario or recorded history through policies, offline.
    Simulate(simulate::SimulateArgs),
}

/// Which cluster to talk to, shared by the subcommands that use one.
#[derive(Debug, Args)]
pub struct KubeArgs {
    /// Kubeconfig file; `KUBECONFIG` or `~/.kube/config` when absent.
    #[arg(long, env = "FERRY_KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Context of the kubeconfig to use instead of its current one.
    #[arg(long, env = "FERRY_CONTEXT", value_name = "NAME")]
    pub context: Option<String>,
}

impl KubeArgs {
    /// A client for the chosen cluster and its context's default namespace.
    pub async fn client(&self) -> anyhow::Result<(kube::Client, String)> {
        use anyhow::Context as _;
        let options = kube::config::KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        };
        let config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await
            }
            None => kube::Config::from_kubeconfig(&options).await,
        }
        .context("loading the kubeconfig")?;
        let namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
        Ok((client, namespace))
    }
}

/// Logging, shared by every subcommand.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log filter in `tracing` syntax, for example `info,ferry=debug`.
    #[arg(
        long = "log-level",
        env = "FERRY_LOG",
        default_value = "warn",
        global = true
    )]
    pub level: String,
    /// Log line format.
    #[arg(long = "log-format", env = "FERRY_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub format: LogFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Logs go to stderr so that stdout carries only a command's result.
pub fn init_logging(args: &LogArgs) {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Demo(args) => demo::run(args).await,
        Command::Run(args) => run::run(*args).await,
        Command::Policy(command) => policy::run(command).await,
        Command::Peer(command) => peer::run(command).await,
        Command::Snapshot(args) => snapshot::run(args).await,
        Command::Crds(args) => crds::run(args),
        Command::Simulate(args) => simulate::run(args).await,
        Command::Sandbox(command) => sandbox::run(command).await,
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// The arguments the deployment manifest passes to `ferry run` parse.
    #[test]
    fn deployment_manifest_arguments_parse() {
        use clap::Parser;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/manifests/08-deployment.yaml"
        );
        let manifest = std::fs::read_to_string(path).expect("the rendered Deployment exists");
        let mut argv = vec!["ferry".to_owned()];
        let mut in_args = false;
        for line in manifest.lines() {
            let trimmed = line.trim();
            if trimmed == "args:" {
                in_args = true;
            } else if in_args && let Some(arg) = trimmed.strip_prefix("- ") {
                argv.push(
                    arg.trim_matches('"')
                        .replace("$(CLUSTER_NAME)", "east")
                        .replace("$(POD_NAMESPACE)", "ferry-system")
                        .replace("$(POD_NAME)", "ferry-0"),
                );
            } else if in_args {
                break;
            }
        }
        assert_eq!(argv.get(1).map(String::as_str), Some("run"), "{argv:?}");
        let cli = super::Cli::try_parse_from(&argv).unwrap_or_else(|err| panic!("{argv:?}: {err}"));
        assert!(matches!(cli.command, super::Command::Run(_)));
    }

    /// The chart's NATS arguments parse; two credentials at once do not.
    #[test]
    fn nats_arguments_parse_and_take_one_credential() {
        use clap::Parser;
        let base = [
            "ferry",
            "run",
            "--cluster-name=east",
            "--prometheus=http://p:9090",
            "--nats-url=tls://nats:4222",
            "--nats-ca-file=/etc/ferry/nats/ca/ca.crt",
            "--nats-duplicate-window=2h",
            "--nats-stream-replicas=3",
        ];
        let mut one = base.to_vec();
        one.push("--nats-nkey-seed-file=/etc/ferry/nats/credentials/seed");
        super::Cli::try_parse_from(&one).expect("NATS arguments parse");
        let mut two = one.clone();
        two.push("--nats-creds-file=/etc/ferry/nats/credentials/user.creds");
        assert!(super::Cli::try_parse_from(&two).is_err());
        // The CA without a broker means nothing: refused.
        let orphan = [
            "ferry",
            "run",
            "--cluster-name=e",
            "--prometheus=http://p",
            "--nats-ca-file=/c",
        ];
        assert!(super::Cli::try_parse_from(orphan).is_err());
    }
}
