//! Guardrails: the deterministic checks applied to every policy answer
//! before anything acts on it. The live control loop and the simulator call
//! the same [`check`], so a simulation shows what the operator would do.
//!
//! Pure: needs no client, reads no clock, and gives the same verdict for the
//! same input. It never trusts the policy: it takes only decisions the host
//! validated against the snapshot ([`Validated`]), and savings are recomputed
//! from the snapshot's prices where they can be.
//!
//! [`Validated`]: crate::policy::Validated
//!
//! # The rules, in the order they apply
//!
//! A decision is refused by the first rule it breaks:
//!
//! 1. **Invalid** — the host's [`crate::policy::validate`] against the
//!    snapshot: known workload on its `fromCluster`, known ready target,
//!    different source and target, finite non-negative savings, one decision
//!    per workload, and no more decisions than the snapshot's
//!    `maxMigrationsPerCycle` in the answer. Its rejections arrive as
//!    `Invalid`; it is not checked again here.
//! 2. **NotLocal** — [`Context::local_cluster`] is set and the decision's
//!    `fromCluster` is another cluster: a workload this cluster moved away
//!    stays in its snapshot (as running where it went), but only the
//!    cluster it runs in can move it again.
//! 3. **NotSelected** — the workload's labels do not match the policy's
//!    `selector` (absent: every workload matches).
//! 4. **Pinned** — the workload is in [`Context::pinned`].
//! 5. **AlreadyMoving** — the workload is in [`Context::moving`].
//! 6. **TargetNotAllowed** — [`Context::allowed_targets`] is not empty and
//!    does not name the target.
//! 7. **Cooldown** — `secondsSinceMigration < cooldownSeconds`.
//! 8. **OverDailyMoveLimit** — `maxMovesPerWorkloadPerDay` is above 0 and
//!    the workload already started that many moves in the last 24 hours
//!    ([`Context::recent_moves`]).
//! 9. **Savings thresholds** — see [`hourly_savings`] for the figure checked:
//!    `savings >= minHourlySavings`, and `savings / currentCost >=
//!    minSavingsRatio` with the current cost from [`current_cost`]
//!    (**UnknownCurrentCost** when the ratio is above zero and the cost is
//!    unknown).
//! 10. **PaybackTooLong** — [`Guardrails::payback_allows`]:
//!     `migrationCost / savings <= maxPaybackHours`; a move saving nothing
//!     never pays back.
//! 11. **BelowSavingsPerDisruption** — [`Guardrails::disruption_allows`]:
//!     `savings × 24 >= savingsPerDisruption × migrationCost × (1 +
//!     recentMoves)`, where `recentMoves` are the workload's moves started
//!     in the last 24 hours; off when `savingsPerDisruption` is 0.
//! 12. **TargetOverCapacity** — the target's `requested` plus what is in flight
//!     towards it ([`Context::incoming`]) plus the moves already accepted to it
//!     in this call, plus this workload's requests, over `allocatable`, must stay
//!     at or under `maxTargetCpuUtilization` and `maxTargetMemoryUtilization`.
//!     A move out of a cluster frees nothing in this cycle: the source keeps
//!     the workload until the target is ready.
//! 13. **OverCycleLimit** — at most `maxMigrationsPerCycle` accepted moves.
//! 14. **OverInFlightLimit** — `inFlight + accepted <= maxInFlight`.
//!
//! The stateful rules (12–14) come last, so a decision refused for another
//! reason never uses up room, a cycle slot or an in-flight slot.

mod refusal;
mod rules;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::Selector;
use serde::Serialize;

pub use refusal::Refusal;
pub use rules::{check, check_evaluation, current_cost, hourly_savings};

use crate::contract::{Decision, Resources, Thresholds};
use crate::crd::{Guardrails, ValidatedPolicy};

/// The annotation that keeps a workload where it is.
pub const PINNED_ANNOTATION: &str = "ferry.dev/pinned";

/// A workload, by namespace and name.
pub type WorkloadRef = (String, String);

/// Everything the rules need beyond the snapshot and the answer.
#[derive(Clone, Debug)]
pub struct Context {
    /// The policy's thresholds, as fractions (the ones handed to the module).
    pub thresholds: Thresholds,
    /// The rules the contract does not carry.
    pub guardrails: Guardrails,
    /// Which workloads may move; `None` selects every workload.
    pub selector: Option<Selector>,
    /// Workloads annotated `ferry.dev/pinned: "true"` (annotations are not in
    /// the contract, so the caller collects them).
    pub pinned: BTreeSet<WorkloadRef>,
    /// Workloads with a migration in progress.
    pub moving: BTreeSet<WorkloadRef>,
    /// The cluster the verdict is carried out in: decisions moving a
    /// workload out of another cluster are refused. `None` (the simulator,
    /// which moves workloads between all clusters): no such rule.
    pub local_cluster: Option<String>,
    /// Migrations of this policy in progress now.
    pub in_flight: u32,
    /// Clusters the policy may move workloads to; empty: all.
    pub allowed_targets: Vec<String>,
    /// Requests of migrations in flight towards each cluster that its
    /// `requested` does not count yet.
    pub incoming: BTreeMap<String, Resources>,
    /// Moves of each workload started in the last 24 hours, failed or not
    /// (absent: none), as the caller's move history has them: the live loop
    /// from its WorkloadMigration mirrors, the simulator from its own record.
    pub recent_moves: BTreeMap<WorkloadRef, u32>,
}

/// The policy's `selector` is not a valid label selector.
#[derive(Debug, thiserror::Error)]
#[error("the selector is not a valid label selector: {0}")]
pub struct InvalidSelector(String);

impl Context {
    /// A context with nothing pinned, nothing in flight, every target allowed.
    pub fn new(thresholds: Thresholds, guardrails: Guardrails) -> Self {
        Context {
            thresholds,
            guardrails,
            selector: None,
            pinned: BTreeSet::new(),
            moving: BTreeSet::new(),
            local_cluster: None,
            in_flight: 0,
            allowed_targets: Vec::new(),
            incoming: BTreeMap::new(),
            recent_moves: BTreeMap::new(),
        }
    }

    /// The context of a validated `MigrationPolicy`: its thresholds,
    /// guardrails, selector and `targetClusters`. The caller adds what it
    /// observes in the clusters: [`Context::pinned`], [`Context::moving`],
    /// [`Context::in_flight`], [`Context::incoming`] and
    /// [`Context::recent_moves`].
    pub fn for_policy(policy: &ValidatedPolicy) -> Result<Self, InvalidSelector> {
        let mut context = Context::new(policy.thresholds.clone(), policy.guardrails.clone());
        context.selector = policy.selector.clone().map(parse_selector).transpose()?;
        context.allowed_targets = policy.target_clusters.clone();
        Ok(context)
    }

    /// Sets the selector from its Kubernetes form.
    pub fn with_selector(mut self, selector: LabelSelector) -> Result<Self, InvalidSelector> {
        self.selector = Some(parse_selector(selector)?);
        Ok(self)
    }
}

fn parse_selector(selector: LabelSelector) -> Result<Selector, InvalidSelector> {
    Selector::try_from(selector).map_err(|err| InvalidSelector(err.to_string()))
}

/// Whether annotations mark a workload as pinned.
pub fn is_pinned(annotations: &BTreeMap<String, String>) -> bool {
    annotations
        .get(PINNED_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// What the guardrails made of one answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// Decisions to carry out, in the policy's order.
    pub accepted: Vec<Decision>,
    /// Every refused decision with its reason: the host's rejections first,
    /// then the guardrails' in the policy's order.
    pub refused: Vec<Refused>,
}

/// A refused decision and the rule that refused it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    pub decision: Decision,
    pub refusal: Refusal,
    /// `refusal` as text.
    pub message: String,
}

impl Refused {
    pub fn new(decision: Decision, refusal: Refusal) -> Self {
        Refused {
            message: refusal.to_string(),
            decision,
            refusal,
        }
    }
}
