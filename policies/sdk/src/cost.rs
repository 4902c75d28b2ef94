//! Prices and capacity, in the contract's units.

use crate::{Cluster, Resources, Workload};

const MILLIS_PER_CORE: f64 = 1000.0;
const BYTES_PER_GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// What `workload` would cost per hour at `cluster`'s prices, from its
/// requests. `None` when the cluster has no price for CPU or memory: an
/// unknown price is never taken for a free one.
pub fn hourly_cost_at(workload: &Workload, cluster: &Cluster) -> Option<f64> {
    let cpu = cluster.cpu_core_hour_price.get()?;
    let memory = cluster.memory_gib_hour_price.get()?;
    let cores = workload.requests.cpu_millis as f64 / MILLIS_PER_CORE;
    let gib = workload.requests.memory_bytes as f64 / BYTES_PER_GIB;
    Some(cores * cpu + gib * memory)
}

/// Requested-over-allocatable after adding `extra`, as (cpu, memory)
/// fractions. A cluster with nothing allocatable is full.
pub fn projected_utilization(
    requested: Resources,
    extra: Resources,
    allocatable: Resources,
) -> (f64, f64) {
    let ratio = |used: u64, add: u64, total: u64| {
        if total == 0 {
            f64::INFINITY
        } else {
            (used.saturating_add(add)) as f64 / total as f64
        }
    };
    (
        ratio(
            requested.cpu_millis,
            extra.cpu_millis,
            allocatable.cpu_millis,
        ),
        ratio(
            requested.memory_bytes,
            extra.memory_bytes,
            allocatable.memory_bytes,
        ),
    )
}

/// Capacity bookkeeping across the moves one evaluation proposes, so two
/// moves never both count on the same free room.
#[derive(Clone, Debug)]
pub struct Capacity {
    requested: Vec<Resources>,
}

impl Capacity {
    pub fn new(clusters: &[Cluster]) -> Self {
        Capacity {
            requested: clusters.iter().map(|c| c.requested).collect(),
        }
    }

    /// Whether `extra` fits in cluster `index` under the given limits.
    pub fn fits(
        &self,
        clusters: &[Cluster],
        index: usize,
        extra: Resources,
        max_cpu: f64,
        max_memory: f64,
    ) -> bool {
        let (cpu, memory) =
            projected_utilization(self.requested[index], extra, clusters[index].allocatable);
        cpu <= max_cpu && memory <= max_memory
    }

    /// Records a move of `amount` from cluster `from` to cluster `to`.
    pub fn record_move(&mut self, from: usize, to: usize, amount: Resources) {
        let source = &mut self.requested[from];
        source.cpu_millis = source.cpu_millis.saturating_sub(amount.cpu_millis);
        source.memory_bytes = source.memory_bytes.saturating_sub(amount.memory_bytes);
        let target = &mut self.requested[to];
        target.cpu_millis = target.cpu_millis.saturating_add(amount.cpu_millis);
        target.memory_bytes = target.memory_bytes.saturating_add(amount.memory_bytes);
    }

    /// Current requested-over-allocatable of cluster `index`.
    pub fn utilization(&self, clusters: &[Cluster], index: usize) -> (f64, f64) {
        projected_utilization(
            self.requested[index],
            Resources {
                cpu_millis: 0,
                memory_bytes: 0,
            },
            clusters[index].allocatable,
        )
    }
}
