//! `ferry demo`: three local clusters, one operator each, scripted prices.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Leave the clusters up afterwards and print their kubeconfig paths;
    /// Ctrl-C ends the demo.
    #[arg(long, env = "FERRY_KEEP")]
    keep: bool,
    /// How long the scripted prices run, in seconds (the spot price spikes
    /// a little before half-way); the demo then waits, at most 60 seconds
    /// more, for the clusters to settle, and its summary says whether they
    /// did.
    #[arg(long, env = "FERRY_SECONDS", default_value_t = 40, value_parser = clap::value_parser!(u64).range(10..=600))]
    seconds: u64,
    /// Where `--keep` writes the kubeconfig files.
    #[arg(
        long,
        env = "FERRY_DIR",
        value_name = "DIR",
        default_value = "ferry-demo"
    )]
    dir: PathBuf,
    /// How requests travel between the clusters: `kube` (their API servers)
    /// or `nats` (a local NATS JetStream broker the demo starts; needs
    /// nats-server on PATH).
    #[arg(long, env = "FERRY_TRANSPORT", default_value = "kube", value_parser = ["kube", "nats"])]
    transport: String,
}

pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let duration = Duration::from_secs(args.seconds);
    let options = ferry::demo::Options {
        color: std::io::stdout().is_terminal(),
        transport: if args.transport == "nats" {
            ferry::crd::Transport::Nats
        } else {
            ferry::crd::Transport::Kube
        },
        ..ferry::demo::Options::for_duration(duration)
    };
    let (demo, _summary) = ferry::demo::run(options).await?;
    if args.keep {
        std::fs::create_dir_all(&args.dir)?;
        let paths = demo.write_kubeconfigs(&args.dir)?;
        println!("\nThe clusters stay up until Ctrl-C; the operators keep running. Try:");
        for path in &paths {
            println!(
                "  KUBECONFIG={} kubectl get deployments,workloadmigrations -A",
                path.display()
            );
        }
        tokio::signal::ctrl_c().await?;
    }
    demo.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
