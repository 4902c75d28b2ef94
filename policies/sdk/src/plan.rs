//! The greedy cost planner shared by the cost-driven modules.
//!
//! For every workload outside its cooldown, it prices the workload at its own
//! cluster and at every other ready cluster, keeps the targets that clear both
//! savings thresholds, and then hands out moves best saving first while
//! tracking capacity, so no two moves count on the same free room.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::cost::{Capacity, hourly_cost_at};
use crate::{Cluster, Decision, Snapshot, Workload};

/// How a module sees the clusters: which ones it may move to and how it ranks
/// them. The money in a decision is always the plain price difference.
pub trait Pricing {
    /// May `workload` move to `cluster` at all?
    fn eligible(&self, _workload: &Workload, _cluster: &Cluster) -> bool {
        true
    }

    /// The cost the module ranks by; the plain hourly cost unless overridden
    /// (for example with a risk premium).
    fn ranking_cost(&self, workload: &Workload, cluster: &Cluster) -> Option<f64> {
        hourly_cost_at(workload, cluster)
    }

    /// Text that starts each decision's reason.
    fn name(&self) -> &str;
}

struct Candidate {
    workload: usize,
    source: usize,
    best_ranked_savings: f64,
}

/// Plans moves for `snapshot` under its thresholds.
///
/// Generic rather than `&dyn Pricing`: the pricing calls run once per
/// workload and cluster, and inlined they cost a fraction of an indirect call,
/// which in WebAssembly also checks the callee's table entry and signature.
pub fn plan_moves<P: Pricing + ?Sized>(snapshot: &Snapshot, pricing: &P) -> Vec<Decision> {
    let limits = &snapshot.thresholds;
    if limits.max_migrations_per_cycle == 0 {
        return Vec::new();
    }
    let clusters = &snapshot.clusters;
    let index: HashMap<&str, usize> = clusters
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();

    let mut candidates = Vec::new();
    for (w, workload) in snapshot.workloads.iter().enumerate() {
        if workload
            .seconds_since_migration
            .get()
            .is_some_and(|seconds| seconds < limits.cooldown_seconds)
        {
            continue;
        }
        let Some(&source) = index.get(workload.cluster.as_str()) else {
            continue;
        };
        // Only the best saving matters here: no list, no sort. (The savings
        // are positive, never NaN, so a comparison is a maximum; `f64::max`
        // would be a call to libm's `fmax` in WebAssembly.)
        let best = clearing_targets(snapshot, pricing, workload, source)
            .map(|t| t.ranked_savings)
            .reduce(|best, next| if next > best { next } else { best });
        if let Some(best_ranked_savings) = best {
            candidates.push(Candidate {
                workload: w,
                source,
                best_ranked_savings,
            });
        }
    }
    // The order is total (ties go by position), so an unstable sort gives
    // the same order as a stable one, without its scratch buffer.
    candidates.sort_unstable_by(|a, b| {
        b.best_ranked_savings
            .partial_cmp(&a.best_ranked_savings)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.workload.cmp(&b.workload))
    });

    let mut capacity = Capacity::new(clusters);
    let mut decisions = Vec::new();
    for candidate in candidates {
        let workload = &snapshot.workloads[candidate.workload];
        let fitting = targets(snapshot, pricing, workload, candidate.source)
            .into_iter()
            .find(|t| {
                capacity.fits(
                    clusters,
                    t.cluster,
                    workload.requests,
                    limits.max_target_cpu_utilization,
                    limits.max_target_memory_utilization,
                )
            });
        let Some(target) = fitting else { continue };
        capacity.record_move(candidate.source, target.cluster, workload.requests);
        let to = &clusters[target.cluster];
        decisions.push(Decision {
            namespace: workload.namespace.clone(),
            name: workload.name.clone(),
            from_cluster: workload.cluster.clone(),
            to_cluster: to.name.clone(),
            hourly_savings: target.savings,
            reason: format!(
                "{}: {:.4}/h at {} instead of {:.4}/h at {} ({:.0}% less)",
                pricing.name(),
                target.cost,
                to.name,
                target.current,
                workload.cluster,
                target.savings / target.current * 100.0
            )
            .into(),
        });
        if decisions.len() >= limits.max_migrations_per_cycle as usize {
            break;
        }
    }
    decisions
}

struct Target {
    cluster: usize,
    current: f64,
    cost: f64,
    savings: f64,
    ranked_savings: f64,
}

/// The targets that clear both savings thresholds, best ranked first.
fn targets<P: Pricing + ?Sized>(
    snapshot: &Snapshot,
    pricing: &P,
    workload: &Workload,
    source: usize,
) -> Vec<Target> {
    let mut found: Vec<Target> = clearing_targets(snapshot, pricing, workload, source).collect();
    found.sort_unstable_by(|a, b| {
        b.ranked_savings
            .partial_cmp(&a.ranked_savings)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.cluster.cmp(&b.cluster))
    });
    found
}

/// The targets that clear both savings thresholds, in cluster order; none
/// when the workload has no positive price at its own cluster.
fn clearing_targets<'a, P: Pricing + ?Sized>(
    snapshot: &'a Snapshot,
    pricing: &'a P,
    workload: &'a Workload,
    source: usize,
) -> impl Iterator<Item = Target> + 'a {
    let limits = &snapshot.thresholds;
    let home = &snapshot.clusters[source];
    let home_prices = match (
        hourly_cost_at(workload, home),
        pricing.ranking_cost(workload, home),
    ) {
        (Some(current), Some(current_ranked)) if current > 0.0 => Some((current, current_ranked)),
        _ => None,
    };
    home_prices
        .into_iter()
        .flat_map(move |prices| {
            snapshot
                .clusters
                .iter()
                .enumerate()
                .map(move |c| (prices, c))
        })
        .filter(move |&(_, (i, cluster))| {
            i != source && cluster.ready && pricing.eligible(workload, cluster)
        })
        .filter_map(move |((current, current_ranked), (i, cluster))| {
            let cost = hourly_cost_at(workload, cluster)?;
            let ranked = pricing.ranking_cost(workload, cluster)?;
            let savings = current - cost;
            let ranked_savings = current_ranked - ranked;
            let clears = savings >= limits.min_hourly_savings
                && savings / current >= limits.min_savings_ratio
                && savings > 0.0
                && ranked_savings > 0.0;
            clears.then_some(Target {
                cluster: i,
                current,
                cost,
                savings,
                ranked_savings,
            })
        })
}
