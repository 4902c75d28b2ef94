//! The policy contract as plain Rust values with their JSON form: contract v2
//! (`policies/wit/v2/policy.wit`, package `ferry:policy@2.0.0`), which holds
//! every field of contract v1 (`policies/wit/policy.wit`,
//! `ferry:policy@0.1.0`) and adds move history, disruption cost, carbon
//! intensity, partial moves, strategy hints and structured reasons. The host
//! serves modules of either contract; a v1 module sees the v1 fields only,
//! and its decisions carry none of the v2 additions.
//!
//! These are the types the rest of Ferry speaks: the metrics layer fills a
//! [`Snapshot`], the host lowers it into the component, and the answer comes
//! back as [`Decision`]s. The JSON form (camelCase field names, labels as
//! `[{"key", "value"}]`, `option` fields absent or `null`) is what
//! `ferry policy eval --input` reads and what `ferry snapshot` prints.
//!
//! Units: CPU in millicores, memory in bytes, prices per core-hour and per
//! GiB-hour in the operator's currency, utilisations and ratios as fractions.
//! An `Option` that is `None` means "no data"; it never stands for zero.

use serde::{Deserialize, Serialize};
// The same values are lowered into policy components as they are: the
// derives check them against the WIT and lay them out; workloads and
// clusters are lowered by hand in `policy/lower/`, where their layout is tested.
use wasmtime::component::{ComponentType, Lift, Lower};

/// CPU and memory, as requested or allocatable.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ComponentType, Lift, Lower,
)]
#[component(record)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resources {
    #[component(name = "cpu-millis")]
    pub cpu_millis: u64,
    #[component(name = "memory-bytes")]
    pub memory_bytes: u64,
}

/// One label of a cluster or workload.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ComponentType, Lift, Lower,
)]
#[component(record)]
#[serde(deny_unknown_fields)]
pub struct Label {
    pub key: String,
    pub value: String,
}

impl Label {
    /// Labels as Kubernetes keeps them, a map, in the contract's form: a
    /// list ordered by key.
    pub fn from_map(map: &std::collections::BTreeMap<String, String>) -> Vec<Label> {
        map.iter()
            .map(|(key, value)| Label {
                key: key.clone(),
                value: value.clone(),
            })
            .collect()
    }
}

/// A cluster the policy may move workloads from or to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ComponentType, Lift)]
#[component(record)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    pub name: String,
    pub region: String,
    #[serde(default)]
    pub labels: Vec<Label>,
    /// Reachable, connected, and with fresh metrics.
    pub ready: bool,
    pub allocatable: Resources,
    pub requested: Resources,
    #[serde(default)]
    #[component(name = "cpu-utilization")]
    pub cpu_utilization: Option<f64>,
    #[serde(default)]
    #[component(name = "memory-utilization")]
    pub memory_utilization: Option<f64>,
    #[serde(default)]
    #[component(name = "cpu-core-hour-price")]
    pub cpu_core_hour_price: Option<f64>,
    #[serde(default)]
    #[component(name = "memory-gib-hour-price")]
    pub memory_gib_hour_price: Option<f64>,
    /// Grams of CO2 per kWh where the cluster runs (contract v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[component(name = "carbon-intensity")]
    pub carbon_intensity: Option<f64>,
}

/// A workload that runs in one of the clusters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ComponentType, Lift)]
#[component(record)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workload {
    pub namespace: String,
    pub name: String,
    pub kind: String,
    pub cluster: String,
    pub replicas: u32,
    /// Requests of the whole workload (per-pod requests times replicas).
    pub requests: Resources,
    #[serde(default)]
    #[component(name = "cpu-usage-millis")]
    pub cpu_usage_millis: Option<u64>,
    #[serde(default)]
    #[component(name = "memory-usage-bytes")]
    pub memory_usage_bytes: Option<u64>,
    #[serde(default)]
    #[component(name = "hourly-cost")]
    pub hourly_cost: Option<f64>,
    #[serde(default)]
    pub labels: Vec<Label>,
    #[serde(default)]
    #[component(name = "seconds-since-migration")]
    pub seconds_since_migration: Option<u64>,
    /// When the workload last arrived by a move, in ms since the epoch
    /// (contract v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[component(name = "last-move-ms")]
    pub last_move_ms: Option<u64>,
    /// Moves within the last 24 hours (contract v2).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[component(name = "moves-last-day")]
    pub moves_last_day: u32,
    /// Moves within the last 7 days (contract v2).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[component(name = "moves-last-week")]
    pub moves_last_week: u32,
    /// What one move of the workload costs, in the cost currency (contract v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[component(name = "disruption-cost")]
    pub disruption_cost: Option<f64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The thresholds of the `MigrationPolicy`, converted to fractions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ComponentType, Lift, Lower)]
#[component(record)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Thresholds {
    #[component(name = "min-hourly-savings")]
    pub min_hourly_savings: f64,
    #[component(name = "min-savings-ratio")]
    pub min_savings_ratio: f64,
    #[component(name = "max-target-cpu-utilization")]
    pub max_target_cpu_utilization: f64,
    #[component(name = "max-target-memory-utilization")]
    pub max_target_memory_utilization: f64,
    #[component(name = "cooldown-seconds")]
    pub cooldown_seconds: u64,
    #[component(name = "max-migrations-per-cycle")]
    pub max_migrations_per_cycle: u32,
}

impl Default for Thresholds {
    /// The defaults of `MigrationPolicy.spec.thresholds`, as fractions.
    fn default() -> Self {
        Thresholds {
            min_hourly_savings: 0.0,
            min_savings_ratio: 0.10,
            max_target_cpu_utilization: 0.80,
            max_target_memory_utilization: 0.80,
            cooldown_seconds: 3600,
            max_migrations_per_cycle: 5,
        }
    }
}

/// Everything a policy sees in one evaluation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ComponentType, Lift, Lower)]
#[component(record)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Snapshot {
    #[component(name = "timestamp-ms")]
    pub timestamp_ms: u64,
    #[serde(default)]
    pub clusters: Vec<Cluster>,
    #[serde(default)]
    pub workloads: Vec<Workload>,
    #[serde(default)]
    pub thresholds: Thresholds,
    /// `MigrationPolicy.spec.parameters` as JSON text, handed over untouched.
    #[serde(default = "empty_object")]
    pub parameters: String,
}

fn empty_object() -> String {
    "{}".to_owned()
}

/// One move proposed by a policy. A contract v1 module's decisions have no
/// `replicas`, `strategy` or `reasons`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ComponentType, Lift, Lower)]
#[component(record)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Decision {
    pub namespace: String,
    pub name: String,
    #[component(name = "from-cluster")]
    pub from_cluster: String,
    #[component(name = "to-cluster")]
    pub to_cluster: String,
    #[component(name = "hourly-savings")]
    pub hourly_savings: f64,
    pub reason: String,
    /// Move only this many of the workload's replicas: a partial move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Reasons>,
}

/// How a move's replicas should arrive (contract v2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ComponentType, Lift, Lower)]
#[component(enum)]
#[repr(u8)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    #[component(name = "all-at-once")]
    AllAtOnce,
    #[component(name = "progressive")]
    Progressive,
}

impl Strategy {
    /// The WIT name, as the CLI and Events show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::AllAtOnce => "all-at-once",
            Strategy::Progressive => "progressive",
        }
    }
}

/// Why a move pays, as the policy compared it (contract v2).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ComponentType, Lift, Lower)]
#[component(record)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reasons {
    #[component(name = "source-hourly-cost")]
    pub source_hourly_cost: f64,
    #[component(name = "target-hourly-cost")]
    pub target_hourly_cost: f64,
    #[component(name = "hourly-savings")]
    pub hourly_savings: f64,
    /// Hours until the savings repay the disruption cost, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[component(name = "payback-hours")]
    pub payback_hours: Option<f64>,
    #[serde(default)]
    pub detail: String,
}

impl Reasons {
    /// One line for people: the prices compared, the payback, the text.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{:.4}/h -> {:.4}/h, saves {:.4}/h",
            self.source_hourly_cost, self.target_hourly_cost, self.hourly_savings
        );
        if let Some(hours) = self.payback_hours {
            line.push_str(&format!(", pays back in {hours:.1} h"));
        }
        if !self.detail.is_empty() {
            line.push_str("; ");
            line.push_str(&self.detail);
        }
        line
    }
}

impl Snapshot {
    pub fn cluster(&self, name: &str) -> Option<&Cluster> {
        self.clusters.iter().find(|c| c.name == name)
    }

    pub fn workload(&self, namespace: &str, name: &str) -> Option<&Workload> {
        self.workloads
            .iter()
            .find(|w| w.namespace == namespace && w.name == name)
    }
}
