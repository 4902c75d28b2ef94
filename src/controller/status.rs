//! What a cycle leaves behind: the policy's status, Events, metrics and the
//! journal entry. Status is written by server-side apply and only when it
//! changed, so the controller's own writes never wake it in a loop.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};

use super::cycle::{Outcome, Skipped};
use super::journal::{self, JournalEntry};
use super::reconcile::ReconcileError;
use super::telemetry::DecisionLabels;
use super::{Context, FIELD_MANAGER};
use crate::crd::{
    DecisionOutcome, DecisionRecord, MigrationPolicy, MigrationPolicyStatus, PolicyMode,
};

/// Metrics class, condition reason, message, and whether it degrades the policy.
pub(super) fn describe(skipped: &Skipped) -> (&'static str, &'static str, String, bool) {
    match skipped {
        Skipped::InvalidSpec(message) => ("invalid_spec", "InvalidSpec", message.clone(), false),
        Skipped::NoModule { reason, message } => ("module", reason, message.clone(), true),
        Skipped::NoMetrics(message) => (
            "metrics",
            "MetricsUnavailable",
            format!("cycle skipped: {message}"),
            true,
        ),
        Skipped::PolicyFailed { class, message } => (class, "PolicyFailed", message.clone(), true),
        Skipped::Api(message) => ("api", "ApiError", message.clone(), true),
    }
}

pub(super) fn cycle_summary(outcome: &Outcome) -> String {
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

/// Puts the cycle's decisions into status, metrics and Events.
pub(super) fn record_outcome(
    ctx: &Context,
    key: &str,
    status: &mut MigrationPolicyStatus,
    outcome: &Outcome,
    now: &Time,
    events: &mut Vec<(EventType, &'static str, String)>,
) {
    let mode = match outcome.mode {
        PolicyMode::Enforce => "Enforce",
        PolicyMode::DryRun => "DryRun",
    };
    let count = |outcome_label: &str| {
        ctx.telemetry
            .decisions
            .get_or_create(&DecisionLabels {
                policy: key.to_owned(),
                outcome: outcome_label.to_owned(),
                mode: mode.to_owned(),
            })
            .inc();
    };
    let previous: Vec<(String, String, String)> = status
        .last_decisions
        .iter()
        .map(|d| (d.namespace.clone(), d.name.clone(), d.to.clone()))
        .collect();
    for decision in &outcome.verdict.accepted {
        let workload = format!("{}/{}", decision.namespace, decision.name);
        // Accepted, but the migration protocol would not start it: say why.
        if let Some((_, why)) = outcome.start_failures.iter().find(|(w, _)| *w == workload) {
            count("not_started");
            status.counters.decisions += 1;
            status.counters.refused += 1;
            let reason = format!("migration not started: {why}");
            status.record_decision(record(
                decision,
                DecisionOutcome::Refused,
                Some(reason),
                now,
            ));
            continue;
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
        let text = format!(
            "{}/{} from {} to {}: saves {:.4}/h ({})",
            decision.namespace,
            decision.name,
            decision.from_cluster,
            decision.to_cluster,
            decision.hourly_savings,
            decision.reason
        );
        match outcome.mode {
            PolicyMode::DryRun if !seen => events.push((EventType::Normal, "WouldMigrate", text)),
            PolicyMode::Enforce => events.push((EventType::Normal, "MigrationStarted", text)),
            PolicyMode::DryRun => {}
        }
        status.counters.decisions += 1;
        status.record_decision(record(decision, outcome_kind, None, now));
    }
    if outcome.mode == PolicyMode::Enforce {
        status.counters.migrations_started += outcome.started.len() as u64;
        for (workload, why) in &outcome.start_failures {
            events.push((
                EventType::Warning,
                "MigrationNotStarted",
                format!("{workload}: {why}"),
            ));
        }
    }
    for refused in &outcome.verdict.refused {
        count("refused");
        status.counters.decisions += 1;
        status.counters.refused += 1;
        status.record_decision(record(
            &refused.decision,
            DecisionOutcome::Refused,
            Some(refused.message.clone()),
            now,
        ));
    }
}

pub(super) fn record(
    decision: &crate::contract::Decision,
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
        outcome,
        refusal_reason: refusal,
        time: now.clone(),
    }
}

pub(super) fn journal_entry(key: &str, outcome: &Outcome) -> JournalEntry {
    let refusal = |decision: &crate::contract::Decision, reason: &str| journal::Refusal {
        decision: decision.clone(),
        reason: reason.to_owned(),
    };
    JournalEntry {
        policy: key.to_owned(),
        module_sha256: outcome.module_sha256.clone(),
        mode: format!("{:?}", outcome.mode),
        snapshot: (*outcome.snapshot).clone(),
        decisions: outcome.evaluation.decisions.clone(),
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

pub(super) async fn publish(
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
pub(super) async fn write_status(
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
