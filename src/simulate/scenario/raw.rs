//! The scenario file as written: serde types that mirror the YAML, each
//! checked value kept with its location. No meaning is given here (units,
//! defaults beyond serde's, ranges): [`super::compile`] does that, so a
//! value is never checked in two places.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::simulate::series::SeriesSpec;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawScenario {
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) start: Option<Spanned<String>>,
    pub(super) duration: Spanned<String>,
    pub(super) step: Spanned<String>,
    #[serde(default)]
    pub(super) interval: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) seed: Option<u64>,
    #[serde(default)]
    pub(super) thresholds: Option<Spanned<RawThresholds>>,
    #[serde(default)]
    pub(super) selector: Option<LabelSelector>,
    #[serde(default)]
    pub(super) target_clusters: Vec<String>,
    #[serde(default)]
    pub(super) parameters: Option<serde_json::Value>,
    #[serde(default)]
    pub(super) migration: Option<RawMigration>,
    #[serde(default)]
    pub(super) back_and_forth_window: Option<Spanned<String>>,
    pub(super) clusters: Vec<RawCluster>,
    #[serde(default)]
    pub(super) workloads: Vec<RawWorkload>,
}

/// `MigrationPolicy.spec.thresholds`, field for field, with locations.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawThresholds {
    pub(super) min_hourly_savings: Option<Spanned<f64>>,
    pub(super) min_savings_percent: Option<Spanned<f64>>,
    pub(super) max_target_cpu_utilization_percent: Option<Spanned<f64>>,
    pub(super) max_target_memory_utilization_percent: Option<Spanned<f64>>,
    pub(super) cooldown: Option<Spanned<String>>,
    pub(super) max_migrations_per_cycle: Option<Spanned<u32>>,
    pub(super) max_in_flight: Option<Spanned<u32>>,
    pub(super) migration_cost: Option<Spanned<f64>>,
    pub(super) max_payback_hours: Option<Spanned<f64>>,
    pub(super) savings_per_disruption: Option<Spanned<f64>>,
    pub(super) max_moves_per_workload_per_day: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawMigration {
    #[serde(default)]
    pub(super) duration: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) cost: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) failure_probability: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawCluster {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) region: String,
    #[serde(default)]
    pub(super) labels: BTreeMap<String, String>,
    pub(super) allocatable: RawCapacity,
    pub(super) prices: RawPrices,
    /// Grams of CO2 per kWh; optional.
    #[serde(default)]
    pub(super) carbon_intensity: Option<Spanned<SeriesSpec>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawCapacity {
    /// Cores.
    pub(super) cpu: Spanned<SeriesSpec>,
    /// GiB.
    pub(super) memory: Spanned<SeriesSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawPrices {
    pub(super) cpu_core_hour: Spanned<SeriesSpec>,
    pub(super) memory_gib_hour: Spanned<SeriesSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawWorkload {
    pub(super) name: Spanned<String>,
    #[serde(default = "default_namespace")]
    pub(super) namespace: String,
    #[serde(default = "default_kind")]
    pub(super) kind: String,
    pub(super) cluster: Spanned<String>,
    #[serde(default)]
    pub(super) count: Option<Spanned<u32>>,
    #[serde(default)]
    pub(super) labels: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) pinned: bool,
    #[serde(default)]
    pub(super) replicas: Option<Spanned<SeriesSpec>>,
    pub(super) requests: RawRequests,
    #[serde(default)]
    pub(super) usage: Option<RawUsage>,
}

fn default_namespace() -> String {
    "default".to_owned()
}

fn default_kind() -> String {
    "Deployment".to_owned()
}

/// Per pod, read by [`crate::units::scenario`]: a bare number, quoted or not,
/// is cores or GiB; `"500m"`, `"512Mi"`, `"4Gi"` carry their unit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequests {
    pub(super) cpu: Spanned<Quantity>,
    pub(super) memory: Spanned<Quantity>,
}

/// A request as written: YAML's number or string. Both are read as text, so
/// `4` and `"4"` mean the same.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Quantity {
    Number(f64),
    Text(String),
}

impl Quantity {
    pub(super) fn text(&self) -> String {
        match self {
            Quantity::Number(n) => n.to_string(),
            Quantity::Text(t) => t.clone(),
        }
    }
}

/// Per pod, over time: cores and GiB.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUsage {
    #[serde(default)]
    pub(super) cpu: Option<Spanned<SeriesSpec>>,
    #[serde(default)]
    pub(super) memory: Option<Spanned<SeriesSpec>>,
}
