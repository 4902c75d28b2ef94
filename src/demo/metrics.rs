//! The demo's metrics: prices follow a scripted timeline (the spot pool's
//! price spikes part-way through); requests and usage come from the
//! Deployments each sandbox cluster really runs, so every move shows up in
//! the next cycle's snapshot.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;

use crate::metrics::{
    ClusterMetrics, Error, MetricsSource, Result, WorkloadKey, WorkloadMap, WorkloadMetrics,
};
use crate::policy::contract::Resources;

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
    start: Timestamp,
    clusters: BTreeMap<String, DemoCluster>,
}

impl DemoMetrics {
    pub fn new(start: Timestamp, clusters: BTreeMap<String, DemoCluster>) -> Self {
        DemoMetrics { start, clusters }
    }

    /// The prices of `cluster` at `at`.
    pub fn prices(&self, cluster: &str, at: Timestamp) -> Option<(f64, f64)> {
        let since: Duration = at
            .duration_since(self.start)
            .try_into()
            .unwrap_or(Duration::ZERO);
        self.clusters.get(cluster).and_then(|c| {
            c.prices
                .iter()
                .rev()
                .find(|step| step.from <= since)
                .map(|step| (step.core_hour, step.gib_hour))
        })
    }

    fn cluster_of(&self, name: &str) -> Result<&DemoCluster> {
        self.clusters
            .get(name)
            .ok_or_else(|| Error::UnknownCluster(name.to_owned()))
    }
}

/// Requests of each running Deployment (per-pod requests times replicas).
pub async fn running(client: &kube::Client) -> kube::Result<BTreeMap<WorkloadKey, Resources>> {
    let deployments = Api::<Deployment>::all(client.clone())
        .list(&Default::default())
        .await?;
    Ok(deployments
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
            let demo = self.cluster_of(cluster)?;
            let workloads = running(&demo.client)
                .await
                .map_err(|err| unavailable(cluster, err))?;
            let requested = workloads
                .values()
                .fold(Resources::default(), |sum, r| Resources {
                    cpu_millis: sum.cpu_millis + r.cpu_millis,
                    memory_bytes: sum.memory_bytes + r.memory_bytes,
                });
            let (core_hour, gib_hour) = self.prices(cluster, at).unzip();
            let share = |used: u64, total: u64| {
                (total > 0).then(|| used as f64 * USAGE_SHARE / total as f64)
            };
            Ok(ClusterMetrics {
                cpu_core_hour_price: core_hour,
                memory_gib_hour_price: gib_hour,
                allocatable_cpu_millis: Some(demo.allocatable.cpu_millis),
                allocatable_memory_bytes: Some(demo.allocatable.memory_bytes),
                requested_cpu_millis: Some(requested.cpu_millis),
                requested_memory_bytes: Some(requested.memory_bytes),
                cpu_utilization: share(requested.cpu_millis, demo.allocatable.cpu_millis),
                memory_utilization: share(requested.memory_bytes, demo.allocatable.memory_bytes),
                fresh: true,
            })
        })
    }

    fn workloads<'a>(
        &'a self,
        cluster: &'a str,
        _at: Timestamp,
    ) -> BoxFuture<'a, Result<WorkloadMap>> {
        Box::pin(async move {
            let demo = self.cluster_of(cluster)?;
            let workloads = running(&demo.client)
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
