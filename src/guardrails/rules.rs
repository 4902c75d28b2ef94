//! The rules of [`super`], applied in their documented order.

use std::collections::{BTreeMap, HashMap};

use kube::core::SelectorExt;

use super::{Context, Refusal, Refused, Verdict};
use crate::contract::{Cluster, Decision, Resources, Snapshot, Workload};
use crate::policy::{Evaluation, Rejected, Validated};

const MILLIS_PER_CORE: f64 = 1000.0;
const BYTES_PER_GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Applies every rule to an answer.
///
/// `decisions` are those that passed the host's [`crate::policy::validate`]
/// against this `snapshot` (rule 1), and are not checked again;
/// `host_rejected` are its rejections, kept at the head of
/// [`Verdict::refused`] so that one list explains every refused decision.
pub fn check(
    snapshot: &Snapshot,
    decisions: Validated,
    host_rejected: Vec<Rejected>,
    context: &Context,
) -> Verdict {
    let mut refused: Vec<Refused> = host_rejected
        .into_iter()
        .map(|r| Refused::new(r.decision, Refusal::Invalid { check: r.rule }))
        .collect();
    if decisions.is_empty() {
        return Verdict {
            accepted: Vec::new(),
            refused,
        };
    }

    let workloads: HashMap<(&str, &str), &Workload> = snapshot
        .workloads
        .iter()
        .map(|w| ((w.namespace.as_str(), w.name.as_str()), w))
        .collect();
    let mut room = Room::new(snapshot, context);
    let mut accepted = Vec::new();
    for decision in decisions {
        // `validate` accepted it, so the workload and both clusters exist in
        // the snapshot it was validated against; only a caller passing
        // another snapshot gets here without one, and that is no reason to
        // trust the decision.
        let key = (decision.namespace.as_str(), decision.name.as_str());
        let Some(&workload) = workloads.get(&key) else {
            let refusal = Refusal::Invalid {
                check: crate::policy::Rejection::UnknownWorkload,
            };
            refused.push(Refused::new(decision, refusal));
            continue;
        };
        let source = snapshot.cluster(&decision.from_cluster);
        let target = snapshot.cluster(&decision.to_cluster);
        let verdict = stateless(context, &decision, workload, source, target)
            .and_then(|()| stateful(context, &mut room, &decision, workload, accepted.len()));
        match verdict {
            Ok(()) => accepted.push(decision),
            Err(refusal) => refused.push(Refused::new(decision, refusal)),
        }
    }
    Verdict { accepted, refused }
}

/// [`check`] on an [`Evaluation`] from the host.
pub fn check_evaluation(snapshot: &Snapshot, evaluation: Evaluation, context: &Context) -> Verdict {
    check(snapshot, evaluation.decisions, evaluation.rejected, context)
}

/// Rules 2–11: those that depend on this decision alone.
fn stateless(
    context: &Context,
    decision: &Decision,
    workload: &Workload,
    source: Option<&Cluster>,
    target: Option<&Cluster>,
) -> Result<(), Refusal> {
    let t = &context.thresholds;
    if let Some(local) = &context.local_cluster
        && decision.from_cluster != *local
    {
        return Err(Refusal::NotLocal {
            cluster: decision.from_cluster.clone(),
        });
    }
    if let Some(selector) = &context.selector {
        let labels: BTreeMap<String, String> = workload
            .labels
            .iter()
            .map(|l| (l.key.clone(), l.value.clone()))
            .collect();
        if !selector.matches(&labels) {
            return Err(Refusal::NotSelected);
        }
    }
    if !context.pinned.is_empty()
        && context
            .pinned
            .contains(&(workload.namespace.clone(), workload.name.clone()))
    {
        return Err(Refusal::Pinned);
    }
    if !context.moving.is_empty()
        && context
            .moving
            .contains(&(workload.namespace.clone(), workload.name.clone()))
    {
        return Err(Refusal::AlreadyMoving);
    }
    if !context.allowed_targets.is_empty()
        && !context.allowed_targets.contains(&decision.to_cluster)
    {
        return Err(Refusal::TargetNotAllowed);
    }
    if let Some(seconds) = workload.seconds_since_migration
        && seconds < t.cooldown_seconds
    {
        return Err(Refusal::Cooldown {
            seconds_since_migration: seconds,
            cooldown_seconds: t.cooldown_seconds,
        });
    }
    let recent_moves = context
        .recent_moves
        .get(&(workload.namespace.clone(), workload.name.clone()))
        .copied()
        .unwrap_or(0);
    let daily = context.guardrails.max_moves_per_workload_per_day;
    if daily > 0 && recent_moves >= daily {
        return Err(Refusal::OverDailyMoveLimit {
            recent_moves,
            limit: daily,
        });
    }

    let savings = hourly_savings(decision, workload, source, target);
    if savings < t.min_hourly_savings {
        return Err(Refusal::BelowMinHourlySavings {
            hourly_savings: savings,
            minimum: t.min_hourly_savings,
        });
    }
    if t.min_savings_ratio > 0.0 {
        let current = current_cost(workload, source)
            .filter(|c| *c > 0.0)
            .ok_or(Refusal::UnknownCurrentCost)?;
        let ratio = savings / current;
        if ratio < t.min_savings_ratio {
            return Err(Refusal::BelowMinSavingsRatio {
                ratio,
                minimum: t.min_savings_ratio,
            });
        }
    }
    if !context.guardrails.payback_allows(savings) {
        return Err(Refusal::PaybackTooLong {
            migration_cost: context.guardrails.migration_cost,
            hourly_savings: savings,
            max_payback_hours: context.guardrails.max_payback_hours,
        });
    }
    if !context.guardrails.disruption_allows(savings, recent_moves) {
        return Err(Refusal::BelowSavingsPerDisruption {
            hourly_savings: savings,
            disruption_cost: context.guardrails.disruption_cost(recent_moves),
            recent_moves,
            savings_per_disruption: context.guardrails.savings_per_disruption,
        });
    }
    Ok(())
}

/// Rules 12–14: those that depend on the moves accepted before this one.
fn stateful(
    context: &Context,
    room: &mut Room,
    decision: &Decision,
    workload: &Workload,
    accepted: usize,
) -> Result<(), Refusal> {
    let t = &context.thresholds;
    let (cpu, memory) = room.after(&decision.to_cluster, workload.requests);
    if !(cpu <= t.max_target_cpu_utilization && memory <= t.max_target_memory_utilization) {
        return Err(Refusal::TargetOverCapacity {
            cpu_utilization: cpu,
            memory_utilization: memory,
            max_cpu_utilization: t.max_target_cpu_utilization,
            max_memory_utilization: t.max_target_memory_utilization,
        });
    }
    if accepted >= t.max_migrations_per_cycle as usize {
        return Err(Refusal::OverCycleLimit {
            limit: t.max_migrations_per_cycle,
        });
    }
    let limit = context.guardrails.max_in_flight;
    let in_flight = context.in_flight.saturating_add(accepted as u32);
    if in_flight >= limit {
        return Err(Refusal::OverInFlightLimit { in_flight, limit });
    }
    room.take(&decision.to_cluster, workload.requests);
    Ok(())
}

/// What `workload` costs per hour at `cluster`'s prices, from its requests
/// (the policies' SDK `hourly_cost_at`). `None` when a price is missing.
pub(crate) fn cost_at(requests: Resources, cluster: &Cluster) -> Option<f64> {
    let cpu = cluster.cpu_core_hour_price?;
    let memory = cluster.memory_gib_hour_price?;
    Some(
        requests.cpu_millis as f64 / MILLIS_PER_CORE * cpu
            + requests.memory_bytes as f64 / BYTES_PER_GIB * memory,
    )
}

/// The workload's current hourly cost: its requests at its cluster's prices,
/// as the policies' SDK computes it; where the cluster has no prices, the
/// snapshot's `workload.hourlyCost`; otherwise unknown.
pub fn current_cost(workload: &Workload, cluster: Option<&Cluster>) -> Option<f64> {
    cluster
        .and_then(|c| cost_at(workload.requests, c))
        .or(workload.hourly_cost)
        .filter(|c| c.is_finite())
}

/// The savings the thresholds and the payback rule are checked against: the
/// smaller of the policy's claim and what the snapshot's prices give
/// (current cost minus the requests at the target's prices). A policy cannot
/// clear a threshold by overstating its savings; where the prices are
/// unknown, its claim is all there is.
pub fn hourly_savings(
    decision: &Decision,
    workload: &Workload,
    source: Option<&Cluster>,
    target: Option<&Cluster>,
) -> f64 {
    let claimed = decision.hourly_savings;
    let computed = current_cost(workload, source)
        .zip(target.and_then(|t| cost_at(workload.requests, t)))
        .map(|(current, at_target)| current - at_target);
    match computed {
        Some(computed) => claimed.min(computed),
        None => claimed,
    }
}

/// Requested resources per cluster as the accepted moves fill them.
struct Room<'a> {
    snapshot: &'a Snapshot,
    /// Requests added to each cluster so far: in flight plus accepted.
    added: BTreeMap<&'a str, Resources>,
}

impl<'a> Room<'a> {
    fn new(snapshot: &'a Snapshot, context: &'a Context) -> Self {
        let added = context
            .incoming
            .iter()
            .map(|(name, r)| (name.as_str(), *r))
            .collect();
        Room { snapshot, added }
    }

    /// (cpu, memory) requested over allocatable of `cluster` if `extra` moved
    /// in; a cluster with nothing allocatable is infinitely full.
    fn after(&self, cluster: &str, extra: Resources) -> (f64, f64) {
        let Some(c) = self.snapshot.cluster(cluster) else {
            return (f64::INFINITY, f64::INFINITY);
        };
        let added = self.added.get(cluster).copied().unwrap_or_default();
        let ratio = |requested: u64, added: u64, extra: u64, total: u64| {
            if total == 0 {
                f64::INFINITY
            } else {
                requested.saturating_add(added).saturating_add(extra) as f64 / total as f64
            }
        };
        (
            ratio(
                c.requested.cpu_millis,
                added.cpu_millis,
                extra.cpu_millis,
                c.allocatable.cpu_millis,
            ),
            ratio(
                c.requested.memory_bytes,
                added.memory_bytes,
                extra.memory_bytes,
                c.allocatable.memory_bytes,
            ),
        )
    }

    fn take(&mut self, cluster: &str, extra: Resources) {
        // Only names present in the snapshot reach here (validated targets).
        if let Some(c) = self.snapshot.cluster(cluster) {
            let entry = self.added.entry(c.name.as_str()).or_default();
            entry.cpu_millis = entry.cpu_millis.saturating_add(extra.cpu_millis);
            entry.memory_bytes = entry.memory_bytes.saturating_add(extra.memory_bytes);
        }
    }
}
