//! The `MigrationPolicy` controller: runs a cycle when one is due, and
//! records what happened in the policy's status, in Events and in metrics.
//!
//! Status holds only what was observed; a condition's transition time moves
//! only when its status changes, and Events are published only on such
//! transitions (and for each new would-be move), so the controller's own
//! status writes never feed a reconcile storm.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::Context;
use super::cycle::{self, Outcome, Skipped};
use super::cycle_log;
use super::error::ReconcileError;
use super::journal;
use super::status::{StatusUpdate, journal_entry};
use super::telemetry::PolicyLabels;
use crate::crd::{
    FieldError, MigrationPolicy, MigrationPolicyStatus, ValidatedPolicy, validate_policy,
};

/// Runs the controller until its watch stream ends or `stop` turns true.
pub(crate) async fn run_policies(ctx: Arc<Context>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let policies: Api<MigrationPolicy> = Api::all(ctx.client.clone());
    // On shutdown no new cycle starts and running ones finish their writes.
    let stopping = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    let controller = Controller::new(policies, watcher::Config::default().any_semantic());
    let store = controller.store();
    controller
        .graceful_shutdown_on(stopping)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| {
            let (ctx, store) = (ctx.clone(), store.clone());
            async move {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "policy reconcile failed");
                }
                // A deleted policy ends here too (its reconcile finds no
                // object): what was held for it goes.
                let live = store
                    .state()
                    .iter()
                    .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
                    .collect();
                ctx.forget_deleted(&live).await;
            }
        })
        .await;
}

fn error_policy(policy: Arc<MigrationPolicy>, err: &ReconcileError, ctx: Arc<Context>) -> Action {
    tracing::warn!(
        policy = %format!("{}/{}", policy.namespace().unwrap_or_default(), policy.name_any()),
        error = %super::error::chain(err),
        "policy reconcile failed; retrying"
    );
    Action::requeue(ctx.config.error_requeue)
}

/// Validates the spec, runs a cycle if one is due, records what came of it,
/// then publishes the Events and writes the status.
#[tracing::instrument(skip_all, fields(policy = %format!("{}/{}", policy.namespace().unwrap_or_default(), policy.name_any())))]
async fn reconcile(
    policy: Arc<MigrationPolicy>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = policy.namespace().ok_or(ReconcileError::NoNamespace)?;
    let name = policy.name_any();
    let key = format!("{namespace}/{name}");
    let generation = policy.metadata.generation;
    let old_status = policy.status.clone().unwrap_or_default();
    let now = Time(jiff::Timestamp::now());
    let mut update = StatusUpdate::new(&old_status, generation, now.clone());

    let validated = match validate_policy(&policy.spec).and_then(|v| fits(&ctx, v)) {
        Ok(validated) => validated,
        Err(errors) => {
            cycle_log::skipped(&key, &Skipped::InvalidSpec(field_errors(&errors)));
            ctx.telemetry
                .count_error(&PolicyLabels::new(&namespace, &name), "invalid_spec");
            update.invalid_spec(&errors);
            update.write(&ctx, &policy, &old_status).await?;
            return Ok(Action::await_change());
        }
    };
    if let Some(wait) = not_due_yet(&old_status, generation, &now, validated.interval) {
        return Ok(Action::requeue(wait));
    }
    let (result, elapsed) = timed_cycle(&ctx, &namespace, &name, &validated).await;
    let requeue = record(&ctx, &key, &mut update, result, elapsed, &validated).await;
    update.write(&ctx, &policy, &old_status).await?;
    Ok(Action::requeue(requeue))
}

/// The field errors of an invalid spec in one line.
fn field_errors(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(FieldError::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Refuses a policy whose memory limit is over the engine's budget for all
/// evaluations together: it could never run, and saying so beats a cycle
/// that fails every time.
fn fits(ctx: &Context, validated: ValidatedPolicy) -> Result<ValidatedPolicy, Vec<FieldError>> {
    let budget = ctx.engine.memory_budget();
    if validated.limits.memory_bytes <= budget {
        return Ok(validated);
    }
    Err(vec![FieldError {
        path: "spec.limits.memoryBytes".to_owned(),
        message: format!(
            "is {} bytes, over this operator's evaluation memory budget of {budget} bytes \
             (ferry run --evaluation-memory-mib, by default half the pod's memory limit); \
             lower it or raise the budget",
            validated.limits.memory_bytes
        ),
    }])
}

/// How long until the next cycle is due, or `None` when it is due now. A
/// cycle is due once per interval, and at once after a spec change.
fn not_due_yet(
    status: &MigrationPolicyStatus,
    generation: Option<i64>,
    now: &Time,
    interval: Duration,
) -> Option<Duration> {
    if status.observed_generation != generation {
        return None;
    }
    let last = status.last_cycle_time.as_ref()?;
    let since: Duration = now
        .0
        .duration_since(last.0)
        .try_into()
        .unwrap_or(Duration::ZERO);
    if since < interval {
        Some(interval - since)
    } else {
        None
    }
}

/// Runs one cycle and counts its duration.
async fn timed_cycle(
    ctx: &Context,
    namespace: &str,
    name: &str,
    validated: &ValidatedPolicy,
) -> (Result<Outcome, Skipped>, Duration) {
    let started = Instant::now();
    let result = cycle::run_cycle(ctx, namespace, name, validated).await;
    let elapsed = started.elapsed();
    ctx.telemetry
        .cycle_seconds
        .get_or_create(&PolicyLabels::new(namespace, name))
        .observe(elapsed.as_secs_f64());
    (result, elapsed)
}

/// Puts what the cycle left into `update`, metrics and the journal, and
/// says when the next cycle runs: after the interval, or sooner after a
/// failure a retry may cure.
async fn record(
    ctx: &Context,
    key: &str,
    update: &mut StatusUpdate,
    result: Result<Outcome, Skipped>,
    elapsed: Duration,
    validated: &ValidatedPolicy,
) -> Duration {
    update.cycle_ran(elapsed);
    if let Some(state) = ctx.module_states.get(key).await {
        update.module_loaded(state);
    }
    if let Some(active) = ctx.module_slot(key).await.lock().await.active() {
        update.module_digest(&active.sha256, active.reference.as_deref());
    }
    match result {
        Ok(outcome) => {
            cycle_log::completed(key, &outcome);
            update.record_outcome(ctx, key, &outcome);
            write_journal(ctx, key, &outcome);
            update.completed(&outcome);
            validated.interval
        }
        Err(skipped) => {
            cycle_log::skipped(key, &skipped);
            ctx.telemetry
                .count_error(&PolicyLabels::from_key(key), skipped.class());
            update.skipped(&skipped);
            match skipped {
                Skipped::InvalidSpec(_) => validated.interval,
                _ => ctx.config.error_requeue.min(validated.interval),
            }
        }
    }
}

/// With `--journal-dir`, writes the cycle's journal entry; a failure is
/// logged, never fatal to the cycle.
fn write_journal(ctx: &Context, key: &str, outcome: &Outcome) {
    if let Some(dir) = &ctx.config.journal_dir {
        let entry = journal_entry(key, outcome);
        if let Err(err) = journal::write(dir, &entry, ctx.config.journal_keep) {
            tracing::warn!(error = %err, dir = %dir.display(), "cannot write the decision journal");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn ran(generation: i64, seconds: i64) -> MigrationPolicyStatus {
        MigrationPolicyStatus {
            observed_generation: Some(generation),
            last_cycle_time: Some(at(seconds)),
            ..MigrationPolicyStatus::default()
        }
    }

    #[test]
    fn a_cycle_is_due_once_per_interval() {
        let interval = Duration::from_secs(60);
        assert_eq!(
            not_due_yet(&ran(1, 100), Some(1), &at(130), interval),
            Some(Duration::from_secs(30))
        );
        assert_eq!(not_due_yet(&ran(1, 100), Some(1), &at(160), interval), None);
        assert_eq!(
            not_due_yet(&MigrationPolicyStatus::default(), None, &at(0), interval),
            None
        );
    }

    #[test]
    fn a_spec_change_makes_a_cycle_due_at_once() {
        let interval = Duration::from_secs(60);
        assert_eq!(not_due_yet(&ran(1, 100), Some(2), &at(101), interval), None);
    }
}
