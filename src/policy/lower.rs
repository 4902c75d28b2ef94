//! Conversions between the contract's Rust values and the types generated
//! from the WIT, plus the input-size estimate checked before lowering.

use super::bindings::ferry::policy::types as wit;
use super::contract;

fn resources(r: contract::Resources) -> wit::Resources {
    wit::Resources {
        cpu_millis: r.cpu_millis,
        memory_bytes: r.memory_bytes,
    }
}

fn labels(labels: &[contract::Label]) -> Vec<wit::Label> {
    labels
        .iter()
        .map(|l| wit::Label {
            key: l.key.clone(),
            value: l.value.clone(),
        })
        .collect()
}

pub(crate) fn snapshot(s: &contract::Snapshot) -> wit::Snapshot {
    wit::Snapshot {
        timestamp_ms: s.timestamp_ms,
        clusters: s
            .clusters
            .iter()
            .map(|c| wit::Cluster {
                name: c.name.clone(),
                region: c.region.clone(),
                labels: labels(&c.labels),
                ready: c.ready,
                allocatable: resources(c.allocatable),
                requested: resources(c.requested),
                cpu_utilization: c.cpu_utilization,
                memory_utilization: c.memory_utilization,
                cpu_core_hour_price: c.cpu_core_hour_price,
                memory_gib_hour_price: c.memory_gib_hour_price,
            })
            .collect(),
        workloads: s
            .workloads
            .iter()
            .map(|w| wit::Workload {
                namespace: w.namespace.clone(),
                name: w.name.clone(),
                kind: w.kind.clone(),
                cluster: w.cluster.clone(),
                replicas: w.replicas,
                requests: resources(w.requests),
                cpu_usage_millis: w.cpu_usage_millis,
                memory_usage_bytes: w.memory_usage_bytes,
                hourly_cost: w.hourly_cost,
                labels: labels(&w.labels),
                seconds_since_migration: w.seconds_since_migration,
            })
            .collect(),
        thresholds: wit::Thresholds {
            min_hourly_savings: s.thresholds.min_hourly_savings,
            min_savings_ratio: s.thresholds.min_savings_ratio,
            max_target_cpu_utilization: s.thresholds.max_target_cpu_utilization,
            max_target_memory_utilization: s.thresholds.max_target_memory_utilization,
            cooldown_seconds: s.thresholds.cooldown_seconds,
            max_migrations_per_cycle: s.thresholds.max_migrations_per_cycle,
        },
        parameters: s.parameters.clone(),
    }
}

pub(crate) fn decision(d: wit::Decision) -> contract::Decision {
    contract::Decision {
        namespace: d.namespace,
        name: d.name,
        from_cluster: d.from_cluster,
        to_cluster: d.to_cluster,
        hourly_savings: d.hourly_savings,
        reason: d.reason,
    }
}

/// Roughly the bytes the snapshot occupies once lowered into guest memory:
/// every string plus the fixed part of every record.
pub(crate) fn input_size(s: &contract::Snapshot) -> usize {
    const CLUSTER_FIXED: usize = 112;
    const WORKLOAD_FIXED: usize = 120;
    const LABEL_FIXED: usize = 16;
    let labels = |labels: &[contract::Label]| -> usize {
        labels
            .iter()
            .map(|l| LABEL_FIXED + l.key.len() + l.value.len())
            .sum()
    };
    let clusters: usize = s
        .clusters
        .iter()
        .map(|c| CLUSTER_FIXED + c.name.len() + c.region.len() + labels(&c.labels))
        .sum();
    let workloads: usize = s
        .workloads
        .iter()
        .map(|w| {
            WORKLOAD_FIXED
                + w.namespace.len()
                + w.name.len()
                + w.kind.len()
                + w.cluster.len()
                + labels(&w.labels)
        })
        .sum();
    64 + clusters + workloads + s.parameters.len()
}
