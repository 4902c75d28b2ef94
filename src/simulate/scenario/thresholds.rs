//! A scenario's thresholds, checked and converted by the same code as a
//! `MigrationPolicy`'s ([`crate::crd::validate_policy`]), so the simulator
//! never accepts thresholds the operator would refuse. An error points at
//! the field in the file.

use serde_saphyr::Location;

use super::invalid;
use super::raw::{RawScenario, RawThresholds};
use crate::contract::Thresholds;
use crate::crd::{Duration, Guardrails, MigrationPolicySpec, ThresholdsSpec, validate_policy};
use crate::simulate::error::Result;

/// The thresholds as the CRD has them, checked and converted by the same code
/// as a `MigrationPolicy` (`crd::validate_policy`).
pub(super) fn thresholds(
    raw: &RawScenario,
    file: &str,
) -> Result<(Thresholds, Guardrails, String)> {
    let empty = RawThresholds::default();
    let t = raw.thresholds.as_ref().map_or(&empty, |t| &t.value);
    let block = raw
        .thresholds
        .as_ref()
        .map_or(Location::UNKNOWN, |t| t.referenced);
    let spec = spec_of(t);
    let policy: MigrationPolicySpec = serde_json::from_value(serde_json::json!({
        "module": {"url": "https://simulation.invalid/policy.wasm", "sha256": "0".repeat(64)},
        "thresholds": spec,
        "selector": raw.selector,
        "targetClusters": raw.target_clusters,
        "parameters": raw.parameters.clone().unwrap_or_else(|| serde_json::json!({})),
    }))
    .map_err(|e| {
        invalid(
            file,
            Location::UNKNOWN,
            "parameters",
            format!("must be a map ({e})"),
        )
    })?;
    match validate_policy(&policy) {
        Ok(v) => Ok((v.thresholds, v.guardrails, v.parameters_json)),
        Err(errors) => {
            let first = &errors[0];
            let field = first.path.trim_start_matches("spec.").to_owned();
            let loc = match field.strip_prefix("thresholds.") {
                Some(name) => threshold_location(t, name).unwrap_or(block),
                None => Location::UNKNOWN,
            };
            Err(invalid(file, loc, &field, first.message.clone()))
        }
    }
}

/// The file's thresholds over the CRD's defaults. `cooldown` keeps its text:
/// it is read in the CRD's grammar, as a `MigrationPolicy` would.
fn spec_of(t: &RawThresholds) -> ThresholdsSpec {
    let d = ThresholdsSpec::default();
    ThresholdsSpec {
        min_hourly_savings: t
            .min_hourly_savings
            .as_ref()
            .map_or(d.min_hourly_savings, |v| v.value),
        min_savings_percent: t
            .min_savings_percent
            .as_ref()
            .map_or(d.min_savings_percent, |v| v.value),
        max_target_cpu_utilization_percent: t
            .max_target_cpu_utilization_percent
            .as_ref()
            .map_or(d.max_target_cpu_utilization_percent, |v| v.value),
        max_target_memory_utilization_percent: t
            .max_target_memory_utilization_percent
            .as_ref()
            .map_or(d.max_target_memory_utilization_percent, |v| v.value),
        cooldown: t
            .cooldown
            .as_ref()
            .map_or(d.cooldown.clone(), |v| Duration::new(v.value.clone())),
        max_migrations_per_cycle: t
            .max_migrations_per_cycle
            .as_ref()
            .map_or(d.max_migrations_per_cycle, |v| v.value),
        max_in_flight: t
            .max_in_flight
            .as_ref()
            .map_or(d.max_in_flight, |v| v.value),
        migration_cost: t
            .migration_cost
            .as_ref()
            .map_or(d.migration_cost, |v| v.value),
        max_payback_hours: t
            .max_payback_hours
            .as_ref()
            .map_or(d.max_payback_hours, |v| v.value),
        savings_per_disruption: t
            .savings_per_disruption
            .as_ref()
            .map_or(d.savings_per_disruption, |v| v.value),
        max_moves_per_workload_per_day: t
            .max_moves_per_workload_per_day
            .as_ref()
            .map_or(d.max_moves_per_workload_per_day, |v| v.value),
    }
}

fn threshold_location(t: &RawThresholds, name: &str) -> Option<Location> {
    match name {
        "minHourlySavings" => t.min_hourly_savings.as_ref().map(|v| v.referenced),
        "minSavingsPercent" => t.min_savings_percent.as_ref().map(|v| v.referenced),
        "maxTargetCpuUtilizationPercent" => t
            .max_target_cpu_utilization_percent
            .as_ref()
            .map(|v| v.referenced),
        "maxTargetMemoryUtilizationPercent" => t
            .max_target_memory_utilization_percent
            .as_ref()
            .map(|v| v.referenced),
        "cooldown" => t.cooldown.as_ref().map(|v| v.referenced),
        "migrationCost" => t.migration_cost.as_ref().map(|v| v.referenced),
        "maxPaybackHours" => t.max_payback_hours.as_ref().map(|v| v.referenced),
        "savingsPerDisruption" => t.savings_per_disruption.as_ref().map(|v| v.referenced),
        _ => None,
    }
}
