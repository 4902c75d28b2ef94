//! What a cycle leaves behind: the policy's status, Events, metrics and the
//! journal entry. Status is written by server-side apply and only when it
//! changed, so the controller's own writes never wake it in a loop.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};

use super::cycle::{Outcome, Skipped};
use super::error::ReconcileError;
use super::journal::{self, JournalEntry};
use super::module::ModuleState;
use super::telemetry::{DecisionLabels, PolicyLabels};
use super::{Context, FIELD_MANAGER};
use crate::contract::Decision;
use crate::crd::{
    DecisionOutcome, DecisionRecord, FieldError, MigrationPolicy, MigrationPolicyStatus,
    PolicyMode, invalid_spec_condition, new_condition, set_condition, types,
};

/// What one reconcile changes: the policy's new status, and the Events that
/// announce its changes. Nothing reaches the cluster before
/// [`StatusUpdate::write`].
pub(super) struct StatusUpdate {
    status: MigrationPolicyStatus,
    events: Vec<(EventType, &'static str, String)>,
    generation: Option<i64>,
    now: Time,
}

impl StatusUpdate {
    pub(super) fn new(old: &MigrationPolicyStatus, generation: Option<i64>, now: Time) -> Self {
        StatusUpdate {
            status: old.clone(),
            events: Vec::new(),
            generation,
            now,
        }
    }

    /// Sets the condition `type_`; true when it changed.
    fn set(&mut self, type_: &str, status: bool, reason: &str, message: String) -> bool {
        let condition = new_condition(type_, status, reason, message, self.generation, &self.now);
        set_condition(&mut self.status.conditions, condition, self.now.clone())
    }

    /// The spec is invalid: says why, with a Warning when that is news.
    pub(super) fn invalid_spec(&mut self, errors: &[FieldError]) {
        let condition = invalid_spec_condition(errors, self.generation, &self.now);
        let message = condition.message.clone();
        let changed = set_condition(&mut self.status.conditions, condition, self.now.clone());
        self.status.observed_generation = self.generation;
        if changed {
            self.events
                .push((EventType::Warning, "InvalidSpec", message));
        }
    }

    /// A cycle ran, whatever came of it, and took `elapsed`.
    pub(super) fn cycle_ran(&mut self, elapsed: Duration) {
        self.status.observed_generation = self.generation;
        self.status.last_cycle_time = Some(self.now.clone());
        self.status.last_cycle_duration_ms =
            Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
        self.status.counters.cycles += 1;
    }

    /// `ModuleLoaded` as the last module reload left it, with an Event when
    /// it changed.
    pub(super) fn module_loaded(&mut self, state: ModuleState) {
        if self.set(
            types::MODULE_LOADED,
            state.loaded,
            state.reason,
            state.message.clone(),
        ) {
            let kind = if state.loaded {
                EventType::Normal
            } else {
                EventType::Warning
            };
            self.events.push((
                kind,
                if state.loaded {
                    "ModuleLoaded"
                } else {
                    "ModuleLoadFailed"
                },
                state.message,
            ));
        }
    }

    /// The digest of the module that runs now, and for an OCI module the
    /// reference it was pulled by, pinned by digest.
    pub(super) fn module_digest(&mut self, sha256: &str, reference: Option<&str>) {
        self.status.set_module_digest(sha256);
        self.status.module_reference = reference.map(str::to_owned);
    }

    /// `Ready` and `Degraded` after a completed cycle, with an Event when
    /// the policy recovers.
    pub(super) fn completed(&mut self, outcome: &Outcome) {
        self.status.last_cycle_hourly_savings = Some(accepted_savings(outcome));
        self.set(types::READY, true, "CycleCompleted", cycle_summary(outcome));
        if self.set(
            types::DEGRADED,
            false,
            "AsExpected",
            "the last cycle completed".to_owned(),
        ) {
            self.events.push((
                EventType::Normal,
                "Recovered",
                "the policy cycles again".to_owned(),
            ));
        }
    }

    /// `Ready` (and `Degraded`, when it [degrades](Skipped::degrades))
    /// after a skipped cycle, with a Warning when either changed.
    pub(super) fn skipped(&mut self, skipped: &Skipped) {
        self.status.last_cycle_hourly_savings = None;
        let reason = skipped.reason();
        let message = skipped.message();
        let ready_changed = self.set(types::READY, false, reason, message.clone());
        let degraded_changed =
            skipped.degrades() && self.set(types::DEGRADED, true, reason, message.clone());
        if ready_changed || degraded_changed {
            self.events.push((EventType::Warning, reason, message));
        }
    }

    /// Publishes the Events, then writes the status if it changed.
    pub(super) async fn write(
        self,
        ctx: &Context,
        policy: &MigrationPolicy,
        old: &MigrationPolicyStatus,
    ) -> Result<(), ReconcileError> {
        for (kind, reason, note) in self.events {
            publish(ctx, policy, kind, reason, &note).await;
        }
        write_status(ctx, policy, old, self.status).await
    }

    /// Puts the cycle's decisions into status, metrics and Events.
    pub(super) fn record_outcome(&mut self, ctx: &Context, key: &str, outcome: &Outcome) {
        let mode = match outcome.mode {
            PolicyMode::Enforce => "Enforce",
            PolicyMode::DryRun => "DryRun",
        };
        let policy = PolicyLabels::from_key(key);
        let count = |outcome_label: &str| {
            ctx.telemetry
                .decisions
                .get_or_create(&DecisionLabels {
                    policy: policy.clone(),
                    outcome: outcome_label.to_owned(),
                    mode: mode.to_owned(),
                })
                .inc();
        };
        let previous: Vec<(String, String, String)> = self
            .status
            .last_decisions
            .iter()
            .map(|d| (d.namespace.clone(), d.name.clone(), d.to.clone()))
            .collect();
        for decision in &outcome.verdict.accepted {
            self.record_accepted(decision, outcome, &previous, &count);
        }
        if outcome.mode == PolicyMode::Enforce {
            self.status.counters.migrations_started += outcome.started.len() as u64;
            for (workload, why) in &outcome.start_failures {
                self.events.push((
                    EventType::Warning,
                    "MigrationNotStarted",
                    format!("{workload}: {why}"),
                ));
            }
        }
        for refused in &outcome.verdict.refused {
            count("refused");
            self.status.counters.decisions += 1;
            self.status.counters.refused += 1;
            self.status.record_decision(record(
                &refused.decision,
                DecisionOutcome::Refused,
                Some(refused.message.clone()),
                &self.now,
            ));
        }
    }

    /// One decision the guardrails accepted; `previous` are the decisions
    /// the status held before this cycle, so a dry run announces each
    /// would-be move once.
    fn record_accepted(
        &mut self,
        decision: &Decision,
        outcome: &Outcome,
        previous: &[(String, String, String)],
        count: &impl Fn(&str),
    ) {
        let workload = format!("{}/{}", decision.namespace, decision.name);
        // Accepted, but the migration protocol would not start it: say why.
        if let Some((_, why)) = outcome.start_failures.iter().find(|(w, _)| *w == workload) {
            count("not_started");
            self.status.counters.decisions += 1;
            self.status.counters.refused += 1;
            let reason = format!("migration not started: {why}");
            self.status.record_decision(record(
                decision,
                DecisionOutcome::Refused,
                Some(reason),
                &self.now,
            ));
            return;
        }
        let (outcome_kind, label) = match outcome.mode {
            PolicyMode::Enforce => (DecisionOutcome::Accepted, "accepted"),
            PolicyMode::DryRun => (DecisionOutcome::WouldMigrate, "would_migrate"),
        };
        count(label);
        let seen = previous.contains(&(
            decision.namespace.clone(),
            decision.name.clone(),
            decision.to_cluster.clone(),
        ));
        let mut text = format!(
            "{}/{} from {} to {}: saves {:.4}/h ({})",
            decision.namespace,
            decision.name,
            decision.from_cluster,
            decision.to_cluster,
            decision.hourly_savings,
            decision.reason
        );
        text.push_str(&v2_additions(decision));
        match outcome.mode {
            PolicyMode::DryRun if !seen => {
                self.events.push((EventType::Normal, "WouldMigrate", text))
            }
            PolicyMode::Enforce => self
                .events
                .push((EventType::Normal, "MigrationStarted", text)),
            PolicyMode::DryRun => {}
        }
        self.status.counters.decisions += 1;
        self.status
            .record_decision(record(decision, outcome_kind, None, &self.now));
    }
}

/// What the module estimated the cycle's accepted moves save per hour:
/// those started (Enforce) or that would start (DryRun), rounded to 4
/// decimal places; a non-finite estimate counts as 0.
fn accepted_savings(outcome: &Outcome) -> f64 {
    let not_started = |d: &Decision| {
        let workload = format!("{}/{}", d.namespace, d.name);
        outcome.start_failures.iter().any(|(w, _)| *w == workload)
    };
    let total: f64 = outcome
        .verdict
        .accepted
        .iter()
        .filter(|d| outcome.mode == PolicyMode::DryRun || !not_started(d))
        .map(|d| d.hourly_savings)
        .filter(|s| s.is_finite())
        .sum();
    (total * 10_000.0).round() / 10_000.0
}

fn cycle_summary(outcome: &Outcome) -> String {
    let verb = match outcome.mode {
        PolicyMode::Enforce => "started",
        PolicyMode::DryRun => "would start",
    };
    let mut summary = format!(
        "{} workloads seen; {} decisions, {} refused; {verb} {} migrations",
        outcome.snapshot.workloads.len(),
        outcome.evaluation.decisions.len() + outcome.evaluation.rejected.len(),
        outcome.verdict.refused.len(),
        match outcome.mode {
            PolicyMode::Enforce => outcome.started.len(),
            PolicyMode::DryRun => outcome.verdict.accepted.len(),
        }
    );
    if !outcome.start_failures.is_empty() {
        summary.push_str(&format!(
            "; {} could not start",
            outcome.start_failures.len()
        ));
    }
    summary
}

/// What a contract v2 decision adds, for an Event: the partial move, the
/// strategy hint and the structured reasons; nothing for a v1 decision.
fn v2_additions(decision: &Decision) -> String {
    let mut out = String::new();
    if let Some(replicas) = decision.replicas {
        out.push_str(&format!("; asks to move {replicas} replicas"));
    }
    if let Some(strategy) = decision.strategy {
        out.push_str(&format!("; strategy {}", strategy.as_str()));
    }
    if let Some(reasons) = &decision.reasons {
        out.push_str(&format!("; {}", reasons.summary()));
    }
    out
}

fn record(
    decision: &Decision,
    outcome: DecisionOutcome,
    refusal: Option<String>,
    now: &Time,
) -> DecisionRecord {
    DecisionRecord {
        namespace: decision.namespace.clone(),
        name: decision.name.clone(),
        from: decision.from_cluster.clone(),
        to: decision.to_cluster.clone(),
        hourly_savings: if decision.hourly_savings.is_finite() {
            decision.hourly_savings
        } else {
            0.0
        },
        reason: decision.reason.clone(),
        replicas: decision.replicas,
        strategy: decision.strategy.map(|s| s.as_str().to_owned()),
        reasons: decision.reasons.as_ref().map(|r| r.summary()),
        outcome,
        refusal_reason: refusal,
        time: now.clone(),
    }
}

pub(super) fn journal_entry(key: &str, outcome: &Outcome) -> JournalEntry {
    let refusal = |decision: &Decision, reason: &str| journal::RefusalRecord {
        decision: decision.clone(),
        reason: reason.to_owned(),
    };
    JournalEntry {
        policy: key.to_owned(),
        module_sha256: outcome.module_sha256.clone(),
        mode: format!("{:?}", outcome.mode),
        snapshot: (*outcome.snapshot).clone(),
        decisions: outcome.evaluation.decisions.to_vec(),
        rejected: outcome
            .evaluation
            .rejected
            .iter()
            .map(|r| refusal(&r.decision, &r.reason))
            .collect(),
        accepted: outcome.verdict.accepted.clone(),
        refused: outcome
            .verdict
            .refused
            .iter()
            .map(|r| refusal(&r.decision, &r.message))
            .collect(),
    }
}

async fn publish(
    ctx: &Context,
    policy: &MigrationPolicy,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note.chars().take(1024).collect()),
        action: "Cycle".to_owned(),
        secondary: None,
    };
    if let Err(err) = ctx.recorder.publish(&event, &policy.object_ref(&())).await {
        tracing::debug!(error = %err, reason, "cannot publish an Event");
    }
}

/// Writes the status by server-side apply, and only when it changed.
async fn write_status(
    ctx: &Context,
    policy: &MigrationPolicy,
    old: &MigrationPolicyStatus,
    new: MigrationPolicyStatus,
) -> Result<(), ReconcileError> {
    if &new == old {
        return Ok(());
    }
    let namespace = policy.namespace().unwrap_or_default();
    let name = policy.name_any();
    let api: Api<MigrationPolicy> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = serde_json::json!({
        "apiVersion": MigrationPolicy::api_version(&()),
        "kind": MigrationPolicy::kind(&()),
        "status": new,
    });
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| ReconcileError::Status {
        policy: format!("{namespace}/{name}"),
        source,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{record, v2_additions};
    use crate::contract::{Decision, Reasons, Strategy};
    use crate::crd::DecisionOutcome;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// A contract v2 decision's partial move, strategy and reasons reach its
    /// Event and its record; a v1 decision adds nothing.
    #[test]
    fn v2_decisions_show_their_additions_and_v1_ones_none() {
        let v1 = Decision {
            namespace: "shop".into(),
            name: "web".into(),
            from_cluster: "a".into(),
            to_cluster: "b".into(),
            hourly_savings: 0.03,
            reason: "cheaper".into(),
            ..Decision::default()
        };
        assert_eq!(v2_additions(&v1), "");
        let v2 = Decision {
            replicas: Some(2),
            strategy: Some(Strategy::Progressive),
            reasons: Some(Reasons {
                source_hourly_cost: 0.18,
                target_hourly_cost: 0.15,
                hourly_savings: 0.03,
                payback_hours: Some(16.7),
                detail: "cleaner grid".into(),
            }),
            ..v1.clone()
        };
        assert_eq!(
            v2_additions(&v2),
            "; asks to move 2 replicas; strategy progressive; \
             0.1800/h -> 0.1500/h, saves 0.0300/h, pays back in 16.7 h; cleaner grid"
        );
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        let kept = record(&v2, DecisionOutcome::WouldMigrate, None, &now);
        assert_eq!(kept.replicas, Some(2));
        assert_eq!(kept.strategy.as_deref(), Some("progressive"));
        assert!(kept.reasons.unwrap().contains("pays back in 16.7 h"));
        let plain = record(&v1, DecisionOutcome::WouldMigrate, None, &now);
        assert_eq!(
            (plain.replicas, plain.strategy, plain.reasons),
            (None, None, None)
        );
    }
}
