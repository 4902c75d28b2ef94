//! What one reading of the metrics holds: per cluster its prices, capacity
//! and load, and the usage and cost of the own cluster's workloads. Turning
//! a reading into the policy's input is [`crate::snapshot`]'s job.

use std::collections::BTreeMap;
use std::fmt;

use futures::stream::{self, StreamExt};
use jiff::Timestamp;

use super::{MetricsSource, Result, WorkloadMap};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Prices, capacity and load of one cluster. `None` means no usable data.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterMetrics {
    /// Price of one CPU core for one hour.
    pub cpu_core_hour_price: Option<f64>,
    /// Price of one GiB of memory for one hour.
    pub memory_gib_hour_price: Option<f64>,
    pub allocatable_cpu_millis: Option<u64>,
    pub allocatable_memory_bytes: Option<u64>,
    pub requested_cpu_millis: Option<u64>,
    pub requested_memory_bytes: Option<u64>,
    /// Used CPU over allocatable CPU, as a fraction.
    pub cpu_utilization: Option<f64>,
    /// Used memory over allocatable memory, as a fraction.
    pub memory_utilization: Option<f64>,
    /// Grams of CO2 per kWh where the cluster runs.
    pub carbon_intensity: Option<f64>,
    /// At least one value was read and none was dropped for being older than
    /// the freshness window.
    pub fresh: bool,
}

impl ClusterMetrics {
    /// The metrics are fresh and hold everything the contract cannot do
    /// without (allocatable and requested CPU and memory). When the
    /// operator's own cluster is not usable the cycle is skipped and the
    /// policy reports `Degraded`.
    pub fn is_usable(&self) -> bool {
        self.fresh
            && self.allocatable_cpu_millis.is_some()
            && self.allocatable_memory_bytes.is_some()
            && self.requested_cpu_millis.is_some()
            && self.requested_memory_bytes.is_some()
    }
}

/// A Deployment, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadKey {
    pub namespace: String,
    pub name: String,
}

impl WorkloadKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        WorkloadKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Observed usage of one Deployment, summed over its pods.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadMetrics {
    pub cpu_usage_millis: Option<u64>,
    pub memory_usage_bytes: Option<u64>,
    /// What the workload is charged for: OpenCost's allocation, per
    /// container `max(request, usage)`, summed.
    pub cpu_allocation_millis: Option<u64>,
    pub memory_allocation_bytes: Option<u64>,
    /// `cpu_allocation × cpu price + memory_allocation × memory price`, per
    /// hour; `None` when any of the four is missing. Filled by
    /// [`read`] (or [`WorkloadMetrics::with_cost`]).
    pub hourly_cost: Option<f64>,
}

impl WorkloadMetrics {
    /// Fills `hourly_cost` from the prices of the workload's cluster.
    pub fn with_cost(mut self, cluster: &ClusterMetrics) -> Self {
        self.hourly_cost = (|| {
            let cpu = self.cpu_allocation_millis? as f64 / 1000.0 * cluster.cpu_core_hour_price?;
            let memory =
                self.memory_allocation_bytes? as f64 / GIB * cluster.memory_gib_hour_price?;
            Some(cpu + memory)
        })();
        self
    }
}

/// One reading of every cluster, at one evaluation time.
#[derive(Debug)]
pub struct Reading {
    /// The evaluation time shared by every query of this reading.
    pub at: Timestamp,
    /// Per requested cluster: its metrics, or why they could not be read.
    pub clusters: BTreeMap<String, Result<ClusterMetrics>>,
    /// The name of the cluster whose workloads were read, if any.
    pub own_cluster: Option<String>,
    /// The workloads of `own_cluster`, with costs filled in; `None` when no
    /// own cluster was asked for.
    pub workloads: Option<Result<WorkloadMap>>,
}

impl Reading {
    /// The metrics of `cluster` when they could be read.
    pub fn cluster(&self, cluster: &str) -> Option<&ClusterMetrics> {
        self.clusters.get(cluster)?.as_ref().ok()
    }

    /// The evaluation time, in milliseconds since the Unix epoch.
    pub fn at_ms(&self) -> u64 {
        u64::try_from(self.at.as_millisecond()).unwrap_or(0)
    }

    /// The own cluster was read, is usable, and its workloads were read.
    /// When false the cycle should be skipped with a `Degraded` condition.
    pub fn own_cluster_is_usable(&self) -> bool {
        let Some(own) = &self.own_cluster else {
            return false;
        };
        self.cluster(own).is_some_and(ClusterMetrics::is_usable)
            && matches!(self.workloads, Some(Ok(_)))
    }
}

/// Reads `clusters` (and the workloads of `own_cluster`) from `source`, at
/// most `concurrency` requests of the source at a time, all at one
/// evaluation time (`at`, or now).
///
/// A failure of one cluster does not fail the others: each cluster carries
/// its own result.
pub async fn read(
    source: &dyn MetricsSource,
    clusters: &[String],
    own_cluster: Option<&str>,
    at: Option<Timestamp>,
    concurrency: usize,
) -> Reading {
    let at = at.unwrap_or_else(Timestamp::now);
    enum Answer {
        Cluster(String, Result<ClusterMetrics>),
        Workloads(Result<WorkloadMap>),
    }
    // Built in a loop rather than with iterator closures: a closure over
    // `&String` kept in the future makes it fail the `Send` check of
    // callers such as kube-runtime's reconcile.
    let mut reads: Vec<futures::future::BoxFuture<'_, Answer>> =
        Vec::with_capacity(clusters.len() + 1);
    // The workloads query is the heaviest: start it first.
    if let Some(own) = own_cluster {
        reads.push(Box::pin(async move {
            Answer::Workloads(source.workloads(own, at).await)
        }));
    }
    for name in clusters {
        reads.push(Box::pin(async move {
            Answer::Cluster(name.clone(), source.cluster(name, at).await)
        }));
    }
    let answers: Vec<Answer> = stream::iter(reads)
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;

    let mut reading = Reading {
        at,
        clusters: BTreeMap::new(),
        own_cluster: own_cluster.map(str::to_owned),
        workloads: None,
    };
    for answer in answers {
        match answer {
            Answer::Cluster(name, result) => {
                reading.clusters.insert(name, result);
            }
            Answer::Workloads(result) => reading.workloads = Some(result),
        }
    }
    if let (Some(own), Some(Ok(workloads))) = (own_cluster, reading.workloads.as_mut()) {
        let prices = reading.clusters.get(own).and_then(|r| r.as_ref().ok());
        let none = ClusterMetrics::default();
        let prices = prices.unwrap_or(&none);
        for metrics in workloads.values_mut() {
            *metrics = std::mem::take(metrics).with_cost(prices);
        }
    }
    reading
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> ClusterMetrics {
        ClusterMetrics {
            cpu_core_hour_price: Some(0.03),
            memory_gib_hour_price: Some(0.004),
            allocatable_cpu_millis: Some(12_000),
            allocatable_memory_bytes: Some(48 << 30),
            requested_cpu_millis: Some(2_000),
            requested_memory_bytes: Some(4 << 30),
            cpu_utilization: Some(0.1),
            memory_utilization: Some(0.05),
            carbon_intensity: None,
            fresh: true,
        }
    }

    #[test]
    fn cost_is_allocation_times_price_and_needs_all_inputs() {
        let w = WorkloadMetrics {
            cpu_allocation_millis: Some(1_500),
            memory_allocation_bytes: Some(3 << 30),
            ..WorkloadMetrics::default()
        };
        let cost = w.clone().with_cost(&full()).hourly_cost.unwrap();
        assert!((cost - (1.5 * 0.03 + 3.0 * 0.004)).abs() < 1e-12);
        let mut no_price = full();
        no_price.memory_gib_hour_price = None;
        assert_eq!(w.with_cost(&no_price).hourly_cost, None);
    }
}
