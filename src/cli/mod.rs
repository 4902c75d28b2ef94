//! The command line: one file per subcommand, each with its arguments and the
//! glue that calls the library.

mod completion;
mod crds;
mod demo;
mod duration;
mod exit;
mod logging;
mod output;
mod peer;
mod peer_admin;
mod peer_rotate;
mod policy;
mod policy_bench;
mod policy_check;
mod policy_compare;
mod policy_fixture;
mod policy_format;
mod policy_limits;
mod policy_new;
mod policy_oci;
mod policy_templates;
mod policy_test;
mod run;
mod sandbox;
mod simulate;
mod snapshot;
mod upload_output;
mod version;

use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

pub use exit::{USAGE as EXIT_USAGE, print_error};
pub use logging::init_logging;

/// Ferry moves Kubernetes workloads to the cluster that runs them cheaper.
#[derive(Debug, Parser)]
#[command(name = "ferry", version, about, after_help = exit::HELP)]
pub struct Cli {
    #[command(flatten)]
    pub log: logging::LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Watch Ferry work: three local clusters, one operator each, scripted prices.
    Demo(demo::DemoArgs),
    /// Run the operator in this cluster.
    Run(Box<run::RunArgs>),
    /// Write, test, check, time, evaluate and upload policy modules.
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
    /// Print the shell completion script for bash, zsh or fish.
    ///
    /// Load it in the current shell with `source <(ferry completion bash)`,
    /// `source <(ferry completion zsh)` or `ferry completion fish | source`.
    Completion(completion::CompletionArgs),
    /// Print Ferry's version and how it was built.
    Version(version::VersionArgs),
}

impl Command {
    /// Whether the command prints its answer and ends, so that its output
    /// may be read through a pipe that closes early; the operator, the
    /// demo and the sandbox run on and own child processes and sockets.
    pub fn prints_for_a_pipe(&self) -> bool {
        !matches!(
            self,
            Command::Run(_) | Command::Demo(_) | Command::Sandbox(_)
        )
    }
}

/// The command line definition, with the exit codes after every
/// subcommand's help as well as the top-level one.
pub fn command() -> clap::Command {
    with_exit_codes(Cli::command())
}

fn with_exit_codes(command: clap::Command) -> clap::Command {
    command
        .after_help(exit::HELP)
        .mut_subcommands(with_exit_codes)
}

/// Parses the process's arguments; on a usage error prints it and exits 2.
pub fn parse() -> Cli {
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit())
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
        Command::Completion(args) => completion::run(args),
        Command::Version(args) => version::run(args),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn command_line_definition_is_consistent() {
        super::command().debug_assert();
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

    /// Every command's help ends with the same exit codes.
    #[test]
    fn every_command_documents_the_exit_codes() {
        fn check(command: &mut clap::Command, path: &str) {
            let help = command.render_long_help().to_string();
            assert!(help.contains(super::exit::HELP), "{path}: {help}");
            for sub in command.get_subcommands_mut() {
                // clap's own `help` subcommand prints the others' help.
                if sub.get_name() == "help" {
                    continue;
                }
                let path = format!("{path} {}", sub.get_name());
                check(sub, &path);
            }
        }
        let mut command = super::command();
        command.build();
        check(&mut command, "ferry");
    }

    /// Every flag of every command can be set from the environment, as
    /// `FERRY_` and its long name upper-snake-cased (`--log-level` is
    /// `FERRY_LOG_LEVEL`), so one flag has one variable everywhere.
    #[test]
    fn every_flag_has_its_ferry_environment_variable() {
        let mut wrong = Vec::new();
        visit(&super::command(), "ferry", &mut wrong);
        assert!(
            wrong.is_empty(),
            "flags without their variable:\n{}",
            wrong.join("\n")
        );
    }

    fn visit(command: &clap::Command, path: &str, wrong: &mut Vec<String>) {
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "help" | "version") {
                continue;
            }
            let expected = format!("FERRY_{}", long.to_uppercase().replace('-', "_"));
            let env = arg.get_env().map(|env| env.to_string_lossy().into_owned());
            if env.as_deref() != Some(expected.as_str()) {
                wrong.push(format!("{path} --{long}: {env:?}, expected {expected}"));
            }
        }
        for sub in command.get_subcommands() {
            visit(sub, &format!("{path} {}", sub.get_name()), wrong);
        }
    }
}
