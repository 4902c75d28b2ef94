//! `ferry sandbox serve`: one local cluster for trying Ferry and kubectl.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use ferry::sandbox::{Identity, KubeletRules, ServeOptions, serve_until_signal};

use super::exit::{USAGE, fail};

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Serve one in-memory Kubernetes API server on 127.0.0.1 until SIGTERM.
    ///
    /// The kubeconfig written by --kubeconfig-out is the administrator's.
    /// --user and --service-account write one more kubeconfig per identity
    /// beside it (STEM-user-NAME[.EXT], STEM-sa-NAMESPACE-NAME[.EXT]) and
    /// print their paths. Requests without a valid credential get 401.
    ///
    /// Example: ferry sandbox serve --kubeconfig-out trial.kubeconfig
    /// --user alice:dev,ops --service-account team/bot
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Name of the cluster, also its kubeconfig context.
    #[arg(long, env = "FERRY_NAME", default_value = "sandbox")]
    name: String,
    /// Port on 127.0.0.1; 0 picks a free one.
    #[arg(long, env = "FERRY_PORT", default_value_t = 0)]
    port: u16,
    /// Where to write the administrator's kubeconfig, which kubectl and
    /// Ferry use without flags.
    #[arg(long, env = "FERRY_KUBECONFIG_OUT", value_name = "PATH")]
    kubeconfig_out: Option<PathBuf>,
    /// Also write a kubeconfig for this user, with a client certificate
    /// naming the user (CN) and groups (O). Repeatable; the environment
    /// variable takes several separated by spaces.
    #[arg(
        long = "user",
        env = "FERRY_USER",
        value_name = "NAME[:GROUP,...]",
        value_parser = Identity::parse_user,
        value_delimiter = ' ',
        requires = "kubeconfig_out"
    )]
    users: Vec<Identity>,
    /// Also write a kubeconfig for this ServiceAccount, with a token;
    /// the ServiceAccount and its namespace are created if missing.
    /// Repeatable; the environment variable takes several separated by spaces.
    #[arg(
        long = "service-account",
        env = "FERRY_SERVICE_ACCOUNT",
        value_name = "NAMESPACE/NAME",
        value_parser = Identity::parse_service_account,
        value_delimiter = ' ',
        requires = "kubeconfig_out"
    )]
    service_accounts: Vec<Identity>,
    /// Lifetime of the ServiceAccount tokens in those kubeconfigs, for
    /// example `1h` or `1d`.
    #[arg(
        long,
        env = "FERRY_TOKEN_TTL",
        value_name = "DURATION",
        default_value = "1d",
        value_parser = super::duration::parse_positive
    )]
    token_ttl: Duration,
    /// How the stand-in kubelet runs workloads: `instant` sets Deployment
    /// status after a short delay and makes no Pods; `realistic` makes
    /// Pods for Deployments and StatefulSets that start after a delay,
    /// EndpointSlices for Services, runs Jobs to their end and binds
    /// PersistentVolumeClaims. Default: instant, or realistic with
    /// --kubelet-rules.
    #[arg(long, env = "FERRY_KUBELET", value_enum)]
    kubelet: Option<KubeletMode>,
    /// Rules of the realistic kubelet (YAML or JSON): per image pattern,
    /// the start delay, readiness (ready, flaky, never), pull (ok, fail)
    /// and a Job's exit (success, fail). Implies `--kubelet realistic`.
    #[arg(long, env = "FERRY_KUBELET_RULES", value_name = "FILE")]
    kubelet_rules: Option<PathBuf>,
}

/// How the sandbox's kubelet stand-in runs workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum KubeletMode {
    /// Deployment status follows the spec after a delay; no Pods.
    Instant,
    /// Pods, EndpointSlices, Jobs and volume claims that behave as rules say.
    Realistic,
}

pub async fn run(command: SandboxCommand) -> anyhow::Result<ExitCode> {
    match command {
        SandboxCommand::Serve(args) => {
            let kubelet_rules = match (args.kubelet, &args.kubelet_rules) {
                (Some(KubeletMode::Instant), Some(_)) => {
                    return Ok(fail(
                        USAGE,
                        "--kubelet-rules needs --kubelet realistic, not instant",
                    ));
                }
                (_, Some(path)) => match KubeletRules::from_file(path) {
                    Ok(rules) => Some(rules),
                    Err(error) => return Ok(fail(USAGE, &error.to_string())),
                },
                (Some(KubeletMode::Realistic), None) => Some(KubeletRules::default()),
                (Some(KubeletMode::Instant) | None, None) => None,
            };
            let kubeconfig = args.kubeconfig_out.clone();
            let options = ServeOptions {
                name: args.name,
                port: args.port,
                kubeconfig_out: args.kubeconfig_out,
                identities: args
                    .users
                    .into_iter()
                    .chain(args.service_accounts)
                    .collect(),
                token_ttl: args.token_ttl,
                kubelet_rules,
            };
            serve_until_signal(options, |sandbox, identities| {
                println!("sandbox {} serving at {}", sandbox.name(), sandbox.url());
                if let Some(path) = &kubeconfig {
                    println!(
                        "kubeconfig: {}  (KUBECONFIG={} kubectl get ns)",
                        path.display(),
                        path.display()
                    );
                }
                for (identity, path) in identities {
                    println!("kubeconfig for {}: {}", identity.username(), path.display());
                }
            })
            .await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
