//! Contract v2's records (`ferry:policy@2.0.0`), field for field as the WIT declares them and in
//! the same order, since the canonical ABI lays them out in that order (see
//! `layout`). They must never gain, lose or reorder a field unless the WIT
//! does.

use super::{List, Maybe, Text};

/// CPU in millicores, memory in bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Label {
    pub key: Text,
    pub value: Text,
}

/// A cluster Ferry may move workloads to. Utilisations are fractions;
/// prices are per core-hour and per GiB-hour.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cluster {
    pub name: Text,
    pub region: Text,
    pub labels: List<Label>,
    pub ready: bool,
    pub allocatable: Resources,
    pub requested: Resources,
    pub cpu_utilization: Maybe<f64>,
    pub memory_utilization: Maybe<f64>,
    pub cpu_core_hour_price: Maybe<f64>,
    pub memory_gib_hour_price: Maybe<f64>,
    /// Grams of CO2 per kWh where the cluster runs.
    pub carbon_intensity: Maybe<f64>,
}

/// A workload, with its requests summed over its replicas.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workload {
    pub namespace: Text,
    pub name: Text,
    pub kind: Text,
    pub cluster: Text,
    pub replicas: u32,
    pub requests: Resources,
    pub cpu_usage_millis: Maybe<u64>,
    pub memory_usage_bytes: Maybe<u64>,
    pub hourly_cost: Maybe<f64>,
    pub labels: List<Label>,
    pub seconds_since_migration: Maybe<u64>,
    /// When the workload last arrived by a move, in ms since the epoch.
    pub last_move_ms: Maybe<u64>,
    /// Moves within the last 24 hours and the last 7 days.
    pub moves_last_day: u32,
    pub moves_last_week: u32,
    /// What one move of the workload costs, in the cost currency.
    pub disruption_cost: Maybe<f64>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Thresholds {
    pub min_hourly_savings: f64,
    pub min_savings_ratio: f64,
    pub max_target_cpu_utilization: f64,
    pub max_target_memory_utilization: f64,
    pub cooldown_seconds: u64,
    pub max_migrations_per_cycle: u32,
}

/// What a policy sees in one cycle.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub timestamp_ms: u64,
    pub clusters: List<Cluster>,
    pub workloads: List<Workload>,
    pub thresholds: Thresholds,
    pub parameters: Text,
}

/// How a move's replicas should arrive.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    AllAtOnce,
    Progressive,
}

/// Why a move pays: the prices compared, and free text.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reasons {
    pub source_hourly_cost: f64,
    pub target_hourly_cost: f64,
    pub hourly_savings: f64,
    /// Hours until the savings repay the disruption cost, when known.
    pub payback_hours: Maybe<f64>,
    pub detail: Text,
}

/// One proposed move. `hourly_savings` is the plain price difference.
/// `replicas` asks for a partial move; `None` moves the whole workload.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    pub namespace: Text,
    pub name: Text,
    pub from_cluster: Text,
    pub to_cluster: Text,
    pub hourly_savings: f64,
    pub reason: Text,
    pub replicas: Maybe<u32>,
    pub strategy: Maybe<Strategy>,
    pub reasons: Maybe<Reasons>,
}
