//! The sender's half of a progressive move: after each step the target
//! reports ready, wait the pause, read the gate in the target's Prometheus,
//! shrink the source by the step, and ask for the next step; on a rollback,
//! walk back the same way, the source growing before the target shrinks.
//!
//! The order is the cross-cluster disruption budget: the source shrinks only
//! after the target's new replicas are ready, and the target shrinks only
//! after the source's are, so the ready replicas summed over both clusters
//! never fall below `minAvailable` because of the move itself. The source is
//! changed only through [`scale_source`], which records the replicas it had.

use kube::runtime::controller::Action;

use super::SenderContext;
use super::source::{Source, read_source, scale_source};
use super::start::workload_name;
use super::steps::{Ends, complete, rollback, send_intent};
use crate::crd::{
    IntentAction, MigrationPhase, SourceAction, StepProgress, WorkloadMigration,
    WorkloadMigrationStatus,
};
use crate::migration::error::Result;
use crate::migration::names::{SENDER_FIELD_MANAGER, conditions};
use crate::migration::progressive::{GateReading, Plan, read_gate};
use crate::migration::status::{enter, now, status_of, write};

/// The step the target runs and has reported ready, if it is at rest at
/// the step the sender last asked for (its signed status acknowledges the
/// latest intent).
fn settled_step(target: &WorkloadMigration) -> Option<&StepProgress> {
    let status = target.status.as_ref()?;
    let intent = target.spec.intent.as_ref()?;
    let asked = intent.step.unwrap_or(1);
    let at_rest = status.phase == MigrationPhase::Ready
        || (status.phase == MigrationPhase::Progressing
            && status.reason.as_deref() == Some(conditions::STEP_READY));
    let progress = status.progress.as_ref()?;
    (at_rest && status.observed_intent == Some(intent.sequence) && progress.step == asked)
        .then_some(progress)
}

/// Follows a target that reports a step ready.
pub(super) async fn follow_step(
    ctx: &SenderContext,
    ends: &Ends,
    mut mirror: WorkloadMigration,
    target: WorkloadMigration,
    plan: &Plan,
) -> Result<Action> {
    let poll = Action::requeue(ctx.config.poll_interval);
    let Some(reported) = settled_step(&target).cloned() else {
        return Ok(poll); // an older report: the asked step is on its way
    };
    let step = reported.step;
    let generation = mirror.metadata.generation;
    let mut status = status_of(&mirror);
    let ours = status.progress.clone().unwrap_or_default();
    if ours.step != step || ours.ready_since.is_none() {
        status.progress = Some(StepProgress {
            ready_since: Some(now()),
            gate: None,
            source_replicas: ours.source_replicas,
            ..reported.clone()
        });
        let message = format!(
            "step {step} of {}: {} replicas ready in {}; pausing {:?} before the gate",
            plan.steps(),
            reported.target_replicas,
            mirror.spec.target_cluster,
            plan.pause
        );
        enter(
            &mut status,
            MigrationPhase::Progressing,
            conditions::STEP_PAUSED,
            message,
            generation,
        );
        mirror = write(&ends.local, &mirror, status.clone(), SENDER_FIELD_MANAGER).await?;
    }
    let since = status
        .progress
        .as_ref()
        .and_then(|p| p.ready_since.as_ref())
        .map_or_else(jiff::Timestamp::now, |t| t.0);
    let waited = jiff::Timestamp::now().duration_since(since);
    let pause = jiff::SignedDuration::try_from(plan.pause).unwrap_or_default();
    if waited < pause {
        let left = (pause - waited).unsigned_abs();
        return Ok(Action::requeue(
            left.max(std::time::Duration::from_millis(10)),
        ));
    }
    let namespace = mirror.spec.target_namespace.clone();
    let name = workload_name(&mirror).unwrap_or_default().to_owned();
    let reading = read_gate(
        ctx.gate.as_deref(),
        &mirror.spec.target_cluster,
        &namespace,
        &name,
        &plan.gate,
    )
    .await;
    let said = match reading {
        GateReading::Fail(why) => {
            let message = format!("step {step} of {}: {why}", plan.steps());
            return rollback(ctx, ends, mirror, conditions::HEALTH_GATE_FAILED, &message).await;
        }
        GateReading::Wait(why) => {
            record_gate(ends, &mirror, &mut status, why).await?;
            return Ok(poll);
        }
        GateReading::Pass(why) => why,
    };
    if step >= plan.steps() {
        return complete(ctx, ends, mirror, Some(target)).await;
    }
    let source = read_source(ctx, &mirror).await?;
    if mirror.spec.source_action != SourceAction::Keep && source.exists {
        let wanted = plan.source_at(step);
        let ready_after = source.ready.min(wanted);
        if ready_after + reported.ready_replicas < plan.min_available {
            let why = format!(
                "waiting: shrinking the source to {wanted} would leave {} ready replicas, below minAvailable {}",
                ready_after + reported.ready_replicas,
                plan.min_available
            );
            record_gate(ends, &mirror, &mut status, why).await?;
            return Ok(poll);
        }
        scale_source(ctx, &mirror, &source, wanted).await?;
        if let Some(p) = status.progress.as_mut() {
            p.source_replicas = Some(wanted);
        }
    }
    if let Some(p) = status.progress.as_mut() {
        p.gate = Some(said);
    }
    let message = format!(
        "step {step} of {} passed; asking {} for step {}",
        plan.steps(),
        mirror.spec.target_cluster,
        step + 1
    );
    enter(
        &mut status,
        MigrationPhase::Progressing,
        conditions::STEP_PAUSED,
        message,
        generation,
    );
    write(&ends.local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    send_intent(ctx, ends, &target, IntentAction::Proceed, Some(step + 1)).await?;
    Ok(poll)
}

/// Records the gate's word in the mirror, once.
async fn record_gate(
    ends: &Ends,
    mirror: &WorkloadMigration,
    status: &mut WorkloadMigrationStatus,
    why: String,
) -> Result<()> {
    let progress = status.progress.get_or_insert_default();
    if progress.gate.as_deref() == Some(why.as_str()) {
        return Ok(());
    }
    progress.gate = Some(why);
    write(&ends.local, mirror, status.clone(), SENDER_FIELD_MANAGER).await?;
    Ok(())
}

/// One step back in a rollback of a progressive move whose source already
/// shrank: the source grows to its size at the step before, and once those
/// replicas are ready the target is asked to shrink to that step. `None`:
/// nothing left to walk back (the source is whole again, or never shrank);
/// the caller asks the target to remove its copy.
pub(super) async fn step_back(
    ctx: &SenderContext,
    ends: &Ends,
    mirror: &WorkloadMigration,
    target: &WorkloadMigration,
    plan: &Plan,
) -> Result<Option<Action>> {
    let poll = Action::requeue(ctx.config.poll_interval);
    let source = read_source(ctx, mirror).await?;
    if !source.shrunk_by(mirror) {
        return Ok(None);
    }
    let Some(reported) = settled_step(target) else {
        return Ok(Some(poll)); // the target is still on its way to a step
    };
    let back = reported.step - 1;
    let wanted = plan.source_at(back);
    if source.replicas < wanted {
        scale_source(ctx, mirror, &source, wanted).await?;
        return Ok(Some(poll));
    }
    if source.ready < wanted {
        return Ok(Some(poll)); // the source's replicas are not ready yet
    }
    if back < 1 {
        return Ok(None);
    }
    let mut status = status_of(mirror);
    let progress = status.progress.get_or_insert_default();
    progress.source_replicas = Some(source.replicas);
    let message = format!(
        "rolling back: the source runs {} ready replicas again; asking {} for step {back}",
        source.ready, mirror.spec.target_cluster
    );
    crate::migration::status::condition(
        &mut status,
        conditions::STEPPING_BACK,
        true,
        conditions::STEPPING_BACK,
        message,
        mirror.metadata.generation,
    );
    write(&ends.local, mirror, status, SENDER_FIELD_MANAGER).await?;
    send_intent(ctx, ends, target, IntentAction::Proceed, Some(back)).await?;
    Ok(Some(poll))
}

impl Source {
    /// Whether this move already shrank the source (it recorded itself on
    /// the Deployment when it did).
    fn shrunk_by(&self, mirror: &WorkloadMigration) -> bool {
        self.exists && self.migration.as_deref() == mirror.metadata.name.as_deref()
    }
}
