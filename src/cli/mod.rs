//! The command line: one file per subcommand, each with its arguments and the
//! glue that calls the library.

mod crds;
mod policy;
mod sandbox;
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
    /// Check, evaluate and upload policy modules.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Print the cluster part of the snapshot a policy would see, read from Prometheus.
    Snapshot(snapshot::SnapshotArgs),
    /// Print Ferry's CustomResourceDefinitions as YAML.
    Crds(crds::CrdsArgs),
    /// Run a local in-memory Kubernetes API server.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
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
        Command::Policy(command) => policy::run(command).await,
        Command::Snapshot(args) => snapshot::run(args).await,
        Command::Crds(args) => crds::run(args),
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
}
