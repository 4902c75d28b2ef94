//! `ferry snapshot`: what Ferry reads from Prometheus, as policy-contract JSON.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use ferry::contract::{Label, Snapshot, Thresholds, Workload};
use ferry::metrics::{self, PrometheusConfig, PrometheusEndpoint, PrometheusSource, Reading};
use ferry::snapshot::{self, Member, Terms};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};

use super::output::{self, Format};

/// Clusters read at once.
const CONCURRENCY: usize = 8;

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Base URL of the Prometheus (or Thanos, Mimir) to read.
    #[arg(long, env = "FERRY_PROMETHEUS", value_name = "URL")]
    prometheus: String,
    /// Label telling clusters apart in a shared Prometheus; without it the
    /// Prometheus is taken to hold one cluster only.
    #[arg(
        long = "prometheus-cluster-label",
        env = "FERRY_PROMETHEUS_CLUSTER_LABEL",
        value_name = "LABEL"
    )]
    prometheus_cluster_label: Option<String>,
    /// A cluster to read; repeat for several. The first is the own cluster
    /// whose workloads `--kubeconfig` adds.
    #[arg(
        long = "cluster",
        env = "FERRY_CLUSTER",
        value_name = "NAME",
        value_delimiter = ',',
        required = true
    )]
    clusters: Vec<String>,
    /// A label of the first (own) cluster shown to policies, `key=value`;
    /// repeatable. The same flag as `ferry run`'s.
    #[arg(long = "cluster-label", env = "FERRY_CLUSTER_LABEL", value_name = "KEY=VALUE", value_delimiter = ',', value_parser = super::run::parse_label)]
    cluster_labels: Vec<(String, String)>,
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
    /// Timeout of one Prometheus query attempt, for example `10s`.
    #[arg(
        long = "prometheus-timeout",
        env = "FERRY_PROMETHEUS_TIMEOUT",
        value_name = "DURATION",
        default_value = "10s",
        value_parser = super::duration::parse_positive
    )]
    prometheus_timeout: Duration,
    /// Prometheus gauge of each cluster's carbon intensity (gCO2/kWh), shown
    /// as carbonIntensity. The same flag as `ferry run`'s; unset, not queried.
    #[arg(long, env = "FERRY_CARBON_INTENSITY_METRIC", value_name = "METRIC", value_parser = super::run::parse_metric_name)]
    carbon_intensity_metric: Option<String>,
    /// Kubeconfig of the first cluster: adds its Deployments as workloads.
    #[arg(long, env = "FERRY_KUBECONFIG", value_name = "PATH")]
    kubeconfig: Option<PathBuf>,
    /// Context of --kubeconfig to use instead of its current one.
    #[arg(
        long,
        env = "FERRY_CONTEXT",
        value_name = "NAME",
        requires = "kubeconfig"
    )]
    context: Option<String>,
    /// Only the Deployments of this namespace; every namespace when absent.
    #[arg(
        short = 'n',
        long,
        env = "FERRY_NAMESPACE",
        value_name = "NAMESPACE",
        requires = "kubeconfig"
    )]
    namespace: Option<String>,
    /// Also list StatefulSets, as a policy with `stateful.enabled` sees
    /// them (a StatefulSet with the name of a Deployment of its namespace
    /// is left out, as the operator does).
    #[arg(long, env = "FERRY_STATEFUL", requires = "kubeconfig")]
    stateful: bool,
    /// Output format: the policy-contract JSON, the same as YAML, or tables.
    #[arg(short = 'o', long = "output", env = "FERRY_OUTPUT", value_enum, default_value_t = Format::Json)]
    output: Format,
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
        cluster_label: args.prometheus_cluster_label.clone(),
        allow_token_over_plain_http: false,
    };
    let mut config = PrometheusConfig {
        timeout: args.prometheus_timeout,
        ..PrometheusConfig::default()
    };
    if let Some(metric) = &args.carbon_intensity_metric {
        config.queries = config
            .queries
            .with_carbon_intensity_metric(metric)
            .map_err(|err| anyhow::anyhow!("--carbon-intensity-metric: {err}"))?;
    }
    let source = PrometheusSource::new(
        config,
        args.clusters.iter().map(|c| (c.clone(), endpoint.clone())),
    )?;
    let own = args.kubeconfig.as_ref().map(|_| args.clusters[0].as_str());
    let reading = metrics::read(&source, &args.clusters, own, args.at, CONCURRENCY).await;

    // A cluster that could not be read makes no snapshot: a policy would
    // otherwise see nulls where prices and capacity should be.
    let mut failed = false;
    for name in &args.clusters {
        if let Err(err) = &reading.clusters[name] {
            failed = true;
            super::exit::print_cause(&format!("cluster {name}"), err);
        }
    }
    if failed {
        return Ok(ExitCode::from(super::exit::ERROR));
    }
    let workloads = match &args.kubeconfig {
        Some(path) => {
            let listed = workloads(&args, path, &reading).await?;
            match listed {
                Some(workloads) => workloads,
                None => return Ok(ExitCode::from(super::exit::ERROR)),
            }
        }
        None => Vec::new(),
    };
    let members = args
        .clusters
        .iter()
        .enumerate()
        .map(|(i, name)| Member {
            name: name.clone(),
            reachable: true,
            labels: if i == 0 {
                Label::from_map(&args.cluster_labels.iter().cloned().collect())
            } else {
                Vec::new()
            },
            ..Member::default()
        })
        .collect();
    let terms = Terms {
        thresholds: Thresholds::default(),
        parameters: "{}".to_owned(),
    };
    let snapshot = snapshot::assemble(reading.at_ms(), members, Some(&reading), workloads, terms);
    output::print(args.output, &snapshot, || tables(&snapshot))?;
    Ok(ExitCode::SUCCESS)
}

/// The snapshot for people: one table of clusters, one of workloads.
fn tables(snapshot: &Snapshot) -> String {
    let price = |p: Option<f64>| p.map_or_else(|| "-".to_owned(), |p| format!("{p:.4}"));
    let clusters: Vec<Vec<String>> = snapshot
        .clusters
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.ready.to_string(),
                format!("{}m", c.allocatable.cpu_millis),
                format!("{}Mi", c.allocatable.memory_bytes >> 20),
                price(c.cpu_core_hour_price),
                price(c.memory_gib_hour_price),
            ]
        })
        .collect();
    let workloads: Vec<Vec<String>> = snapshot
        .workloads
        .iter()
        .map(|w| {
            vec![
                format!("{}/{}", w.namespace, w.name),
                w.cluster.clone(),
                w.replicas.to_string(),
                format!("{}m", w.requests.cpu_millis),
                format!("{}Mi", w.requests.memory_bytes >> 20),
                price(w.hourly_cost),
            ]
        })
        .collect();
    let mut text = output::table(
        &["CLUSTER", "READY", "CPU", "MEMORY", "CORE-HOUR", "GIB-HOUR"],
        &clusters,
    );
    text.push('\n');
    text.push_str(&output::table(
        &[
            "WORKLOAD",
            "CLUSTER",
            "REPLICAS",
            "CPU",
            "MEMORY",
            "HOURLY-COST",
        ],
        &workloads,
    ));
    text
}

/// The Deployments (and with `--stateful` the StatefulSets) of the own
/// cluster, in every namespace, sorted by namespace and name, with usage
/// and cost from Prometheus.
/// `None` when the workload metrics could not be read (said on stderr).
async fn workloads(
    args: &SnapshotArgs,
    path: &Path,
    reading: &Reading,
) -> anyhow::Result<Option<Vec<Workload>>> {
    let cluster = args.clusters[0].as_str();
    let kube_args = super::KubeArgs {
        kubeconfig: Some(path.to_owned()),
        context: args.context.clone(),
    };
    let (client, _) = kube_args.client().await?;
    let usage = match &reading.workloads {
        Some(Ok(map)) => Some(map),
        Some(Err(err)) => {
            super::exit::print_cause(&format!("workload metrics of {cluster}"), err);
            return Ok(None);
        }
        None => None,
    };
    let api = match &args.namespace {
        Some(namespace) => kube::Api::<Deployment>::namespaced(client.clone(), namespace),
        None => kube::Api::<Deployment>::all(client.clone()),
    };
    let deployments = api
        .list(&kube::api::ListParams::default())
        .await
        .context("listing Deployments")?;
    let mut workloads: Vec<Workload> = deployments
        .iter()
        .filter_map(|deployment| ferry::controller::as_workload(deployment, cluster, usage))
        .collect();
    if args.stateful {
        let api = match &args.namespace {
            Some(namespace) => kube::Api::<StatefulSet>::namespaced(client, namespace),
            None => kube::Api::<StatefulSet>::all(client),
        };
        let sets = api
            .list(&kube::api::ListParams::default())
            .await
            .context("listing StatefulSets")?;
        for view in ferry::controller::stateful_set_views(&sets.items, &deployments.items) {
            if let Some(mut workload) = ferry::controller::as_workload(&view, cluster, usage) {
                workload.kind = "StatefulSet".to_owned();
                workloads.push(workload);
            }
        }
    }
    workloads.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(Some(workloads))
}
