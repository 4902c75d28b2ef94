//! Builders for snapshots in native unit tests of policy logic.

use crate::{Cluster, Label, List, Maybe, Resources, Snapshot, Thresholds, Workload};

pub const GIB: u64 = 1024 * 1024 * 1024;

/// A ready cluster with 100 cores and 400 GiB allocatable, nothing requested.
pub fn cluster(name: &str, core_hour: f64, gib_hour: f64) -> Cluster {
    Cluster {
        name: name.into(),
        region: "region-1".into(),
        labels: List::new(),
        ready: true,
        allocatable: Resources {
            cpu_millis: 100_000,
            memory_bytes: 400 * GIB,
        },
        requested: Resources {
            cpu_millis: 0,
            memory_bytes: 0,
        },
        cpu_utilization: Maybe::Some(0.0),
        memory_utilization: Maybe::Some(0.0),
        cpu_core_hour_price: Maybe::Some(core_hour),
        memory_gib_hour_price: Maybe::Some(gib_hour),
        carbon_intensity: Maybe::None,
    }
}

/// A Deployment in `cluster` requesting `cpu_millis` and `memory_gib` in all.
pub fn workload(name: &str, cluster: &str, cpu_millis: u64, memory_gib: u64) -> Workload {
    Workload {
        namespace: "shop".into(),
        name: name.into(),
        kind: "Deployment".into(),
        cluster: cluster.into(),
        replicas: 2,
        requests: Resources {
            cpu_millis,
            memory_bytes: memory_gib * GIB,
        },
        cpu_usage_millis: Maybe::None,
        memory_usage_bytes: Maybe::None,
        hourly_cost: Maybe::None,
        labels: List::new(),
        seconds_since_migration: Maybe::None,
        last_move_ms: Maybe::None,
        moves_last_day: 0,
        moves_last_week: 0,
        disruption_cost: Maybe::None,
    }
}

pub fn label(key: &str, value: &str) -> Label {
    Label {
        key: key.into(),
        value: value.into(),
    }
}

/// Permissive thresholds: any saving counts, up to 10 moves, no cooldown.
pub fn thresholds() -> Thresholds {
    Thresholds {
        min_hourly_savings: 0.0,
        min_savings_ratio: 0.0,
        max_target_cpu_utilization: 0.8,
        max_target_memory_utilization: 0.8,
        cooldown_seconds: 0,
        max_migrations_per_cycle: 10,
    }
}

pub fn snapshot(clusters: Vec<Cluster>, workloads: Vec<Workload>) -> Snapshot {
    Snapshot {
        timestamp_ms: 1_767_225_600_000,
        clusters: clusters.into(),
        workloads: workloads.into(),
        thresholds: thresholds(),
        parameters: "{}".into(),
    }
}
