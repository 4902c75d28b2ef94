//! Moves each workload to the ready cluster with the lowest carbon
//! intensity, when it is cleaner by a margin, costs at most a set amount
//! more per hour, and has room; workloads that moved recently stay put.
//!
//! Written against contract v2 (`ferry:policy@2.0.0`) with plain
//! `wit-bindgen` bindings: it reads the clusters' carbon intensity and the
//! workloads' move history and disruption cost, and answers with strategy
//! hints and structured reasons.

#[allow(clippy::too_many_arguments)] // Generated code: WIT records lowered flat.
mod bindings {
    wit_bindgen::generate!({
        path: "../wit/v2",
        world: "migration-policy",
    });
}

use bindings::ferry::policy::types::{Cluster, Decision, Reasons, Snapshot, Strategy, Workload};

/// `MigrationPolicy.spec.parameters`, all optional.
#[derive(Debug, serde::Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Parameters {
    /// How much cleaner the target must be, as a fraction of the source's
    /// intensity (0.2 = 20 % less CO2 per kWh).
    pub min_carbon_reduction: f64,
    /// How much more per hour a move may cost, in the cost currency.
    pub max_extra_hourly_cost: f64,
    /// Moves a workload may have had in the last day and still move again.
    pub max_moves_per_day: u32,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            min_carbon_reduction: 0.2,
            max_extra_hourly_cost: 0.0,
            max_moves_per_day: 0,
        }
    }
}

fn hourly_cost(w: &Workload, c: &Cluster) -> Option<f64> {
    const GIB: f64 = (1u64 << 30) as f64;
    let cpu = c.cpu_core_hour_price? * w.requests.cpu_millis as f64 / 1000.0;
    let memory = c.memory_gib_hour_price? * w.requests.memory_bytes as f64 / GIB;
    Some(cpu + memory)
}

/// Whether `c` can take `w` and stay under the thresholds' utilisation caps.
fn has_room(w: &Workload, c: &Cluster, s: &Snapshot) -> bool {
    let cpu = c.requested.cpu_millis + w.requests.cpu_millis;
    let memory = c.requested.memory_bytes + w.requests.memory_bytes;
    c.allocatable.cpu_millis > 0
        && c.allocatable.memory_bytes > 0
        && cpu as f64 / c.allocatable.cpu_millis as f64 <= s.thresholds.max_target_cpu_utilization
        && memory as f64 / c.allocatable.memory_bytes as f64
            <= s.thresholds.max_target_memory_utilization
}

/// The decisions for `snapshot`, as plain Rust.
pub fn plan(s: &Snapshot) -> Result<Vec<Decision>, String> {
    let p: Parameters = if s.parameters.trim().is_empty() {
        Parameters::default()
    } else {
        serde_json::from_str(&s.parameters).map_err(|err| format!("invalid parameters: {err}"))?
    };
    let cooldown_ms = s.thresholds.cooldown_seconds.saturating_mul(1000);
    let mut out = Vec::new();
    for w in &s.workloads {
        if out.len() >= s.thresholds.max_migrations_per_cycle as usize {
            break;
        }
        // Back-and-forth moves cost more than any hour of cleaner power.
        if w.moves_last_day > p.max_moves_per_day
            || w.last_move_ms
                .is_some_and(|at| s.timestamp_ms.saturating_sub(at) < cooldown_ms)
        {
            continue;
        }
        let Some(from) = s.clusters.iter().find(|c| c.name == w.cluster) else {
            continue;
        };
        let (Some(from_carbon), Some(from_cost)) = (from.carbon_intensity, hourly_cost(w, from))
        else {
            continue;
        };
        let best = s
            .clusters
            .iter()
            .filter(|c| c.ready && c.name != w.cluster && has_room(w, c, s))
            .filter_map(|c| Some((c, c.carbon_intensity?, hourly_cost(w, c)?)))
            .filter(|(_, carbon, cost)| {
                *carbon <= from_carbon * (1.0 - p.min_carbon_reduction)
                    && *cost - from_cost <= p.max_extra_hourly_cost
            })
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let Some((to, to_carbon, to_cost)) = best else {
            continue;
        };
        let savings = from_cost - to_cost;
        let payback_hours = match w.disruption_cost {
            Some(cost) if savings > 0.0 => Some(cost / savings),
            _ => None,
        };
        out.push(Decision {
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            from_cluster: w.cluster.clone(),
            to_cluster: to.name.clone(),
            hourly_savings: savings.max(0.0),
            reason: format!(
                "carbon-aware: {from_carbon:.0} -> {to_carbon:.0} gCO2/kWh on {}",
                to.name
            ),
            replicas: None,
            // A replica at a time: the workload keeps serving where it is.
            strategy: Some(if w.replicas > 1 {
                Strategy::Progressive
            } else {
                Strategy::AllAtOnce
            }),
            reasons: Some(Reasons {
                source_hourly_cost: from_cost,
                target_hourly_cost: to_cost,
                hourly_savings: savings,
                payback_hours,
                detail: format!(
                    "carbon intensity {from_carbon:.0} -> {to_carbon:.0} gCO2/kWh ({:.0} % less)",
                    (1.0 - to_carbon / from_carbon) * 100.0
                ),
            }),
        });
    }
    Ok(out)
}

struct CarbonAware;

impl bindings::Guest for CarbonAware {
    fn decide(input: Snapshot) -> Result<Vec<Decision>, String> {
        plan(&input)
    }
}

bindings::export!(CarbonAware with_types_in bindings);
