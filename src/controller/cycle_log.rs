//! The one log line each policy cycle leaves: what it decided, or why it
//! decided nothing. Written at `info` for a completed cycle and at `warn`
//! for a skipped one, so both show at the default level, with the same
//! fields whatever the format (text or JSON).

use super::cycle::{Outcome, Skipped};
use crate::crd::PolicyMode;

/// A completed cycle: counts, each accepted move, each refusal with its
/// reason, and each accepted move the migration protocol did not start.
pub(super) fn completed(policy: &str, outcome: &Outcome) {
    let mode = match outcome.mode {
        PolicyMode::Enforce => "Enforce",
        PolicyMode::DryRun => "DryRun",
    };
    let accepted: Vec<String> = outcome
        .verdict
        .accepted
        .iter()
        .map(|d| {
            format!(
                "{}/{} {} -> {} saves {:.4}/h",
                d.namespace, d.name, d.from_cluster, d.to_cluster, d.hourly_savings
            )
        })
        .collect();
    let refused: Vec<String> = outcome
        .verdict
        .refused
        .iter()
        .map(|r| {
            let d = &r.decision;
            format!(
                "{}/{} {} -> {}: {}",
                d.namespace, d.name, d.from_cluster, d.to_cluster, r.message
            )
        })
        .collect();
    let not_started: Vec<String> = outcome
        .start_failures
        .iter()
        .map(|(workload, why)| format!("{workload}: {why}"))
        .collect();
    tracing::info!(
        policy,
        mode,
        module = %short(&outcome.module_sha256),
        workloads = outcome.snapshot.workloads.len(),
        decisions = outcome.evaluation.decisions.len() + outcome.evaluation.rejected.len(),
        accepted = outcome.verdict.accepted.len(),
        refused = outcome.verdict.refused.len(),
        started = outcome.started.len(),
        accepted_moves = %accepted.join("; "),
        refusals = %refused.join("; "),
        not_started = %not_started.join("; "),
        "cycle completed"
    );
}

/// A cycle that reached no verdict: the condition reason, the error class
/// and the message with its causes.
pub(super) fn skipped(policy: &str, skipped: &Skipped) {
    tracing::warn!(
        policy,
        reason = skipped.reason(),
        class = skipped.class(),
        error = %skipped.message(),
        "cycle skipped"
    );
}

fn short(sha256: &str) -> &str {
    sha256.get(..crate::crd::DIGEST_SHORT_LEN).unwrap_or(sha256)
}
