//! `ferry snapshot`: what Ferry reads from Prometheus, as policy-contract JSON.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use ferry::contract::{Thresholds, Workload};
use ferry::metrics::{self, PrometheusConfig, PrometheusEndpoint, PrometheusSource, Reading};
use ferry::snapshot::{self, Member, Terms};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;

/// Clusters read at once.
const CONCURRENCY: usize = 8;

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Base URL of the Prometheus (or Thanos, Mimir) to read.
    #[arg(long, env = "FERRY_PROMETHEUS", value_name = "URL")]
    prometheus: String,
    /// Label telling clusters apart in a shared Prometheus; without it the
    /// Prometheus is taken to hold one cluster only.
    #[arg(long, env = "FERRY_CLUSTER_LABEL", value_name = "LABEL")]
    cluster_label: Option<String>,
    /// A cluster to read; repeat for several. The first is the own cluster
    /// whose workloads `--kubeconfig` adds.
    #[arg(
        long = "cluster",
        env = "FERRY_CLUSTERS",
        value_name = "NAME",
        value_delimiter = ',',
        required = true
    )]
    clusters: Vec<String>,
    /// Evaluation time: RFC 3339 or Unix seconds; now when absent.
    #[arg(long, env = "FERRY_AT", value_name = "TIME", value_parser = ferry::metrics::parse_time)]
    at: Option<Timestamp>,
    /// Bearer token sent to Prometheus.
    #[arg(
        long,
        env = "FERRY_PROMETHEUS_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    prometheus_token: Option<String>,
    /// CA bundle (PEM) to trust for Prometheus instead of the system's.
    #[arg(long, env = "FERRY_PROMETHEUS_CA", value_name = "PEM")]
    prometheus_ca: Option<PathBuf>,
    /// Timeout of one query attempt, in seconds.
    #[arg(
        long,
        env = "FERRY_PROMETHEUS_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 10
    )]
    timeout: u64,
    /// Kubeconfig of the first cluster: adds its Deployments as workloads.
    #[arg(long, env = "FERRY_KUBECONFIG", value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
}

pub async fn run(args: SnapshotArgs) -> anyhow::Result<ExitCode> {
    let ca_pem = match &args.prometheus_ca {
        Some(path) => {
            Some(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    let endpoint = PrometheusEndpoint {
        url: args.prometheus.clone(),
        bearer_token: args.prometheus_token.clone(),
        ca_pem,
        cluster_label: args.cluster_label.clone(),
    };
    let config = PrometheusConfig {
        timeout: Duration::from_secs(args.timeout.max(1)),
        ..PrometheusConfig::default()
    };
    let source = PrometheusSource::new(
        config,
        args.clusters.iter().map(|c| (c.clone(), endpoint.clone())),
    )?;
    let own = args.kubeconfig.as_ref().map(|_| args.clusters[0].as_str());
    let reading = metrics::read(&source, &args.clusters, own, args.at, CONCURRENCY).await;

    let mut failed = false;
    for name in &args.clusters {
        if let Err(err) = &reading.clusters[name] {
            failed = true;
            eprintln!("error: cluster {name}: {}", error_chain(err));
        }
    }
    let workloads = match &args.kubeconfig {
        Some(path) => workloads(path, &args.clusters[0], &reading).await?,
        None => Vec::new(),
    };
    let members = args
        .clusters
        .iter()
        .map(|name| Member {
            name: name.clone(),
            reachable: true,
            ..Member::default()
        })
        .collect();
    let terms = Terms {
        thresholds: Thresholds::default(),
        parameters: "{}".to_owned(),
    };
    let snapshot = snapshot::assemble(reading.at_ms(), members, Some(&reading), workloads, terms);
    println!("{}", serde_json::to_string_pretty(&snapshot)?);
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The Deployments of the own cluster, in every namespace, sorted by
/// namespace and name, with usage and cost from Prometheus.
async fn workloads(
    path: &PathBuf,
    cluster: &str,
    reading: &Reading,
) -> anyhow::Result<Vec<Workload>> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .context("loading kubeconfig")?;
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    let usage = match &reading.workloads {
        Some(Ok(map)) => Some(map),
        Some(Err(err)) => {
            eprintln!("error: workload metrics of {cluster}: {}", error_chain(err));
            None
        }
        None => None,
    };
    let deployments = kube::Api::<Deployment>::all(client)
        .list(&kube::api::ListParams::default())
        .await
        .context("listing Deployments")?;
    let mut workloads: Vec<Workload> = deployments
        .iter()
        .filter_map(|deployment| ferry::controller::as_workload(deployment, cluster, usage))
        .collect();
    workloads.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(workloads)
}
