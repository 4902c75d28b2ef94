//! The greedy cost planner shared by the cost-driven modules.
//!
//! For every workload outside its cooldown, it prices the workload at its own
//! cluster and at every other ready cluster, keeps the targets that clear both
//! savings thresholds, and then hands out moves best saving first while
//! tracking capacity, so no two moves count on the same free room.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::cost::{Capacity, hourly_cost_at};
use crate::{Cluster, Decision, Maybe, Reasons, Snapshot, Text, Workload};

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
            || settling(workload)
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
    // A stable sort, though the order is total (ties go by position): many
    // workloads tie on their saving, and std's stable sort, which uses the
    // runs already in order, ran 15-25% faster natively here at 10,000
    // workloads than the unstable one.
    candidates.sort_by(|a, b| {
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
                "{}: {}/h at {} instead of {}/h at {} ({}% less)",
                pricing.name(),
                Fixed(target.cost, 4),
                to.name,
                Fixed(target.current, 4),
                workload.cluster,
                Fixed(target.savings / target.current * 100.0, 0),
            )
            .into(),
            reasons: Maybe::Some(Reasons {
                source_hourly_cost: target.current,
                target_hourly_cost: target.cost,
                hourly_savings: target.savings,
                payback_hours: workload
                    .disruption_cost
                    .get()
                    .map(|cost| cost / target.savings)
                    .into(),
                detail: Text::default(),
            }),
            ..Decision::default()
        });
        if decisions.len() >= limits.max_migrations_per_cycle as usize {
            break;
        }
    }
    decisions
}

/// Has `workload` moved back and forth lately? Two moves within a day are a
/// round trip: prices that swing that fast would only swing it back, so it
/// stays until the day has passed, whatever the cooldown says.
pub fn settling(workload: &Workload) -> bool {
    workload.moves_last_day >= 2
}

/// A number with a fixed count of decimals (at most 9), as `{:.N}` shows
/// it, but through integer formatting: std's float formatting takes a
/// bignum path for a fixed precision, which in WebAssembly cost a tenth of
/// a small evaluation. Within a rounding error of a halfway point it may
/// round the other way than std, and it never shows a negative zero.
pub struct Fixed(pub f64, pub u32);

impl std::fmt::Display for Fixed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (value, decimals) = (self.0, self.1.min(9));
        let scale = 10u64.pow(decimals);
        let scaled = (value.abs() * scale as f64).round();
        // Beyond 2^53 the float holds no decimals to show; leave odd values
        // to std.
        if !scaled.is_finite() || scaled >= 9_007_199_254_740_992.0 {
            return write!(f, "{value:.*}", decimals as usize);
        }
        let scaled = scaled as u64;
        let sign = if value < 0.0 && scaled != 0 { "-" } else { "" };
        if decimals == 0 {
            write!(f, "{sign}{scaled}")
        } else {
            let width = decimals as usize;
            write!(f, "{sign}{}.{:0width$}", scaled / scale, scaled % scale)
        }
    }
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
    // Filled by internal iteration: `collect` would call the chain's `next`
    // once per cluster, which in WebAssembly stays an out-of-line call.
    let mut found = Vec::with_capacity(snapshot.clusters.len());
    clearing_targets(snapshot, pricing, workload, source).for_each(|t| found.push(t));
    found.sort_by(|a, b| {
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

#[cfg(test)]
mod tests {
    use super::Fixed;

    #[test]
    fn fixed_shows_what_std_shows() {
        let mut mismatches = Vec::new();
        for i in 0..20_000u32 {
            // Prices and costs of the size reasons show, and their negatives.
            let value = f64::from(i) * 0.000_731 - 3.0;
            for decimals in [0, 2, 4] {
                // Within a rounding error of a halfway point the two may
                // round apart; a reason is for people, so that is allowed.
                let scaled = value.abs() * 10f64.powi(decimals as i32);
                if (scaled.fract() - 0.5).abs() < 1e-6 {
                    continue;
                }
                let ours = Fixed(value, decimals).to_string();
                let std = format!("{value:.*}", decimals as usize);
                // std keeps the sign of a value that rounds to zero.
                let std = match std.strip_prefix('-') {
                    Some(digits) if digits.bytes().all(|b| b == b'0' || b == b'.') => {
                        digits.to_owned()
                    }
                    _ => std,
                };
                if ours != std {
                    mismatches.push((value, decimals, ours, std));
                }
            }
        }
        assert!(
            mismatches.is_empty(),
            "{:?}",
            &mismatches[..mismatches.len().min(5)]
        );
        assert_eq!(Fixed(1e300, 2).to_string(), format!("{:.2}", 1e300));
        assert_eq!(Fixed(f64::NAN, 4).to_string(), "NaN");
        assert_eq!(Fixed(-0.00001, 4).to_string(), "0.0000");
    }
}
