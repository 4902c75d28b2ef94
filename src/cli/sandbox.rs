//! `ferry sandbox serve`: one local cluster for trying Ferry and kubectl.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use ferry::sandbox::{ServeOptions, serve_until_signal};

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Serve one in-memory Kubernetes API server on 127.0.0.1 until SIGTERM.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Name of the cluster, also its kubeconfig context.
    #[arg(long, env = "FERRY_SANDBOX_NAME", default_value = "sandbox")]
    name: String,
    /// Port on 127.0.0.1; 0 picks a free one.
    #[arg(long, env = "FERRY_SANDBOX_PORT", default_value_t = 0)]
    port: u16,
    /// Where to write a kubeconfig that kubectl and Ferry use without flags.
    #[arg(long, env = "FERRY_SANDBOX_KUBECONFIG", value_name = "PATH")]
    kubeconfig_out: Option<PathBuf>,
}

pub async fn run(command: SandboxCommand) -> anyhow::Result<ExitCode> {
    match command {
        SandboxCommand::Serve(args) => {
            let kubeconfig = args.kubeconfig_out.clone();
            let options = ServeOptions {
                name: args.name,
                port: args.port,
                kubeconfig_out: args.kubeconfig_out,
            };
            serve_until_signal(options, |sandbox| {
                println!("sandbox {} serving at {}", sandbox.name(), sandbox.url());
                if let Some(path) = &kubeconfig {
                    println!(
                        "kubeconfig: {}  (KUBECONFIG={} kubectl get ns)",
                        path.display(),
                        path.display()
                    );
                }
            })
            .await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
