//! The demo's metrics: prices and capacity are step series in a
//! [`MemorySource`] (the spot pool's price spikes part-way through);
//! requests and usage come from the Deployments and StatefulSets each
//! sandbox cluster really runs, so every move shows up in the next cycle's
//! snapshot.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::Api;

use crate::contract::Resources;
use crate::metrics::{
    ClusterMetrics, ClusterValue, Error, MemorySource, MetricsSource, Result, StepSeries,
    WorkloadKey, WorkloadMap, WorkloadMetrics,
};

/// Prices from a point of the timeline on, per core-hour and per GiB-hour.
#[derive(Clone, Copy, Debug)]
pub struct PriceStep {
    pub from: Duration,
    pub core_hour: f64,
    pub gib_hour: f64,
}

/// One sandbox cluster as the demo's metrics see it.
#[derive(Clone)]
pub struct DemoCluster {
    pub client: kube::Client,
    pub allocatable: Resources,
    /// Ordered by `from`; the first starts at zero.
    pub prices: Vec<PriceStep>,
}

/// Observed usage as a share of the requests.
const USAGE_SHARE: f64 = 0.6;

pub struct DemoMetrics {
    /// Prices and allocatable capacity over time.
    scripted: MemorySource,
    clients: BTreeMap<String, kube::Client>,
}

impl DemoMetrics {
    /// Metrics for `clusters`, their price steps counted from `start`.
    pub fn new(start: Timestamp, clusters: BTreeMap<String, DemoCluster>) -> Self {
        let mut scripted = MemorySource::builder();
        let mut clients = BTreeMap::new();
        for (name, cluster) in clusters {
            let at =
                |from: Duration| start + jiff::SignedDuration::try_from(from).unwrap_or_default();
            let steps = |price: fn(&PriceStep) -> f64| {
                StepSeries::new(
                    cluster
                        .prices
                        .iter()
                        .map(|step| (at(step.from), price(step))),
                )
            };
            scripted = scripted
                .cluster_series(
                    &name,
                    ClusterValue::CpuCoreHourPrice,
                    steps(|s| s.core_hour),
                )
                .cluster_series(
                    &name,
                    ClusterValue::MemoryGibHourPrice,
                    steps(|s| s.gib_hour),
                )
                .cluster_series(
                    &name,
                    ClusterValue::AllocatableCpuMillis,
                    StepSeries::constant(cluster.allocatable.cpu_millis as f64),
                )
                .cluster_series(
                    &name,
                    ClusterValue::AllocatableMemoryBytes,
                    StepSeries::constant(cluster.allocatable.memory_bytes as f64),
                );
            clients.insert(name, cluster.client);
        }
        DemoMetrics {
            scripted: scripted.build(),
            clients,
        }
    }

    /// The prices of `cluster` at `at`, per core-hour and per GiB-hour.
    pub fn prices(&self, cluster: &str, at: Timestamp) -> Option<(f64, f64)> {
        let metrics = self.scripted.cluster_at(cluster, at).ok()?;
        Some((metrics.cpu_core_hour_price?, metrics.memory_gib_hour_price?))
    }

    fn client(&self, name: &str) -> Result<&kube::Client> {
        self.clients
            .get(name)
            .ok_or_else(|| Error::UnknownCluster(name.to_owned()))
    }
}

/// Requests of each running Deployment and StatefulSet (per-pod requests
/// times replicas).
pub async fn running(client: &kube::Client) -> kube::Result<BTreeMap<WorkloadKey, Resources>> {
    let mut workloads = Api::<Deployment>::all(client.clone())
        .list(&Default::default())
        .await?
        .items;
    let sets = Api::<StatefulSet>::all(client.clone())
        .list(&Default::default())
        .await?;
    workloads.extend(
        sets.iter()
            .filter_map(|s| serde_json::to_value(s).ok())
            .filter_map(|s| crate::snapshot::deployment_view(&s)),
    );
    Ok(workloads
        .iter()
        .filter_map(|d| crate::snapshot::from_deployment(d, "", None))
        .filter(|w| w.replicas > 0)
        .map(|w| (WorkloadKey::new(w.namespace, w.name), w.requests))
        .collect())
}

fn unavailable(cluster: &str, err: kube::Error) -> Error {
    Error::InvalidEndpoint {
        url: format!("sandbox {cluster}"),
        reason: err.to_string(),
    }
}

impl MetricsSource for DemoMetrics {
    fn cluster<'a>(
        &'a self,
        cluster: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<ClusterMetrics>> {
        Box::pin(async move {
            let scripted = self.scripted.cluster_at(cluster, at)?;
            let workloads = running(self.client(cluster)?)
                .await
                .map_err(|err| unavailable(cluster, err))?;
            let requested = workloads
                .values()
                .fold(Resources::default(), |sum, r| Resources {
                    cpu_millis: sum.cpu_millis + r.cpu_millis,
                    memory_bytes: sum.memory_bytes + r.memory_bytes,
                });
            let share = |used: u64, total: Option<u64>| {
                total
                    .filter(|t| *t > 0)
                    .map(|t| used as f64 * USAGE_SHARE / t as f64)
            };
            Ok(ClusterMetrics {
                requested_cpu_millis: Some(requested.cpu_millis),
                requested_memory_bytes: Some(requested.memory_bytes),
                cpu_utilization: share(requested.cpu_millis, scripted.allocatable_cpu_millis),
                memory_utilization: share(
                    requested.memory_bytes,
                    scripted.allocatable_memory_bytes,
                ),
                fresh: true,
                ..scripted
            })
        })
    }

    fn workloads<'a>(
        &'a self,
        cluster: &'a str,
        _at: Timestamp,
    ) -> BoxFuture<'a, Result<WorkloadMap>> {
        Box::pin(async move {
            let workloads = running(self.client(cluster)?)
                .await
                .map_err(|err| unavailable(cluster, err))?;
            Ok(workloads
                .into_iter()
                .map(|(key, requests)| {
                    let metrics = WorkloadMetrics {
                        cpu_usage_millis: Some((requests.cpu_millis as f64 * USAGE_SHARE) as u64),
                        memory_usage_bytes: Some(
                            (requests.memory_bytes as f64 * USAGE_SHARE) as u64,
                        ),
                        cpu_allocation_millis: Some(requests.cpu_millis),
                        memory_allocation_bytes: Some(requests.memory_bytes),
                        hourly_cost: None,
                    };
                    (key, metrics)
                })
                .collect())
        })
    }
}
