//! The sender's steps for one mirror, from its persisted state and the
//! target's signed-off status: create the request, follow it, act on the
//! source once the target is `Ready`, or ask for a rollback.
//!
//! The source is touched only in [`complete`], after the mirror recorded
//! `Ready`; a rollback touches it only to undo that action, when the target
//! ended after all. The only writes to the peer are
//! the request's creation and its intent.

use kube::Api;
use kube::runtime::controller::Action;

use super::export::{Export, export};
use super::remote::Remote;
use super::removed::{end_for_removed_peer, peer_exists};
use super::source::{restore_source, source_action};
use super::stepwise;
use super::{SenderContext, local_api, target_request};
use crate::crd::{
    IntentAction, MigrationPhase, WorkloadMigration, WorkloadMigrationStatus, find_condition,
    is_condition_true,
};
use crate::migration::envelope::{signed_intent, verify_status};
use crate::migration::error::{Error, Result, is_not_found};
use crate::migration::finalizer;
use crate::migration::names::{
    SENDER_FIELD_MANAGER, SENDER_FINALIZER, conditions, inbox_namespace,
};
use crate::migration::progressive::plan;
use crate::migration::status::{condition, enter, status_of, write};

/// The two ends of one move: the mirror's API in this cluster and the
/// request in the target peer, over its transport.
pub(super) struct Ends {
    pub local: Api<WorkloadMigration>,
    pub remote: Remote,
    pub peer: String,
}

/// One pass over the protocol from the mirror's persisted state.
pub(super) async fn step(mirror: &WorkloadMigration, ctx: &SenderContext) -> Result<Action> {
    let target_peer = &mirror.spec.target_cluster;
    let remote = match Remote::for_peer(ctx, target_peer) {
        Ok(remote) => remote,
        Err(Error::PeerUnavailable { .. }) if !peer_exists(ctx, target_peer).await? => {
            let local = local_api(ctx, mirror);
            return end_for_removed_peer(ctx, &local, mirror).await;
        }
        Err(error) => return Err(error),
    };
    let ends = Ends {
        remote,
        local: local_api(ctx, mirror),
        peer: target_peer.clone(),
    };
    let mut mirror = finalizer::ensure(&ends.local, mirror.clone(), SENDER_FINALIZER).await?;
    let status = status_of(&mirror);

    if let Some((reason, message)) = rollback_due(&mirror, &status) {
        return rollback(ctx, &ends, mirror, &reason, &message).await;
    }
    let target = read_target(ctx, &ends, &mirror).await?;
    if is_condition_true(&status.conditions, conditions::PEER_UNREACHABLE) {
        mirror = clear(
            &ends.local,
            mirror,
            conditions::PEER_UNREACHABLE,
            "Reachable",
            "the target peer answers",
        )
        .await?;
    }
    if is_condition_true(
        &status_of(&mirror).conditions,
        conditions::STATUS_UNVERIFIED,
    ) {
        mirror = clear(
            &ends.local,
            mirror,
            conditions::STATUS_UNVERIFIED,
            "Verified",
            "the target's status verifies again",
        )
        .await?;
    }
    match target {
        None => target_missing(ctx, &ends, mirror, &status).await,
        Some(target) => follow_target(ctx, &ends, mirror, target, &status).await,
    }
}

/// The request in the peer, once its status is verified: a status the
/// peer's receiver did not sign is never acted on (the request counts as
/// unanswered until it verifies).
pub(super) async fn read_target(
    ctx: &SenderContext,
    ends: &Ends,
    mirror: &WorkloadMigration,
) -> Result<Option<WorkloadMigration>> {
    let Some(target) = ends.remote.get(mirror).await? else {
        return Ok(None);
    };
    if target.status.is_none() {
        return Ok(Some(target));
    }
    let keys = ctx
        .peers
        .get(&ends.peer)
        .map(|p| p.spec.public_keys)
        .unwrap_or_default();
    match verify_status(&keys, &target) {
        Ok(()) => Ok(Some(target)),
        Err(source) => Err(Error::Untrusted {
            what: format!(
                "the status of the request in peer {} does not verify",
                ends.peer
            ),
            source,
        }),
    }
}

/// Why the mirror must roll back before anything else: a rollback already
/// started (a restart finishes it), or the deadline passed before the
/// target was ready. `None`: go on.
fn rollback_due(
    mirror: &WorkloadMigration,
    status: &WorkloadMigrationStatus,
) -> Option<(String, String)> {
    if let Some(started) = find_condition(&status.conditions, conditions::ROLLBACK_STARTED)
        .filter(|c| c.status == "True")
    {
        return Some((started.reason.clone(), started.message.clone()));
    }
    let committed = status.phase == MigrationPhase::Ready;
    if !committed && jiff::Timestamp::now() > mirror.spec.deadline.0 {
        return Some((
            conditions::DEADLINE_EXCEEDED.to_owned(),
            "the target was not ready by the deadline".to_owned(),
        ));
    }
    None
}

/// Records `type_=False`: what the condition reported is over.
async fn clear(
    local: &Api<WorkloadMigration>,
    mirror: WorkloadMigration,
    type_: &str,
    reason: &str,
    message: &str,
) -> Result<WorkloadMigration> {
    let mut status = status_of(&mirror);
    condition(
        &mut status,
        type_,
        false,
        reason,
        message,
        mirror.metadata.generation,
    );
    write(local, &mirror, status, SENDER_FIELD_MANAGER).await
}

/// The target has no request: create it (still `Pending`), finish (the
/// mirror already recorded the target `Ready`), or roll back (it was lost).
async fn target_missing(
    ctx: &SenderContext,
    ends: &Ends,
    mirror: WorkloadMigration,
    status: &WorkloadMigrationStatus,
) -> Result<Action> {
    let sent = ends.remote.reads_back_at_once()
        && find_condition(&status.conditions, conditions::REQUEST_SENT)
            .is_some_and(|c| c.status == "True");
    match status.phase {
        MigrationPhase::Pending if sent => {
            // Created once and gone now: deleted in the target, not unsent.
            // Creating it again would start the move a second time.
            let message = "the request disappeared from the target after it was sent";
            rollback(ctx, ends, mirror, conditions::TARGET_REQUEST_LOST, message).await
        }
        MigrationPhase::Pending => {
            // A stateful move's data leaves before the request does.
            if let Export::Wait(action) = export(ctx, &ends.local, &mirror).await? {
                return Ok(action);
            }
            let seal_to = ctx
                .peers
                .get(&ends.peer)
                .and_then(|p| p.spec.public_keys.first().cloned());
            let target = target_request(&mirror, ctx.cluster_keys()?.as_ref(), seal_to.as_ref())?;
            match ends.remote.create(&target).await {
                Ok(()) => {
                    if ends.remote.reads_back_at_once() {
                        let mut status = status.clone();
                        condition(
                            &mut status,
                            conditions::REQUEST_SENT,
                            true,
                            conditions::REQUEST_SENT,
                            "the request is in the target's inbox",
                            mirror.metadata.generation,
                        );
                        write(&ends.local, &mirror, status, SENDER_FIELD_MANAGER).await?;
                    }
                    Ok(Action::requeue(ctx.config.poll_interval))
                }
                Err(Error::Kube { source, .. }) if is_not_found(&source) => {
                    let message = format!(
                        "peer {} has no inbox namespace {} for this cluster",
                        ends.peer,
                        inbox_namespace(&ctx.local_cluster)
                    );
                    rollback(ctx, ends, mirror, conditions::INBOX_MISSING, &message).await
                }
                Err(e) => Err(e),
            }
        }
        MigrationPhase::Ready => complete(ctx, ends, mirror, None).await,
        _ => {
            let message = "the request disappeared from the target before it was ready";
            rollback(ctx, ends, mirror, conditions::TARGET_REQUEST_LOST, message).await
        }
    }
}

/// Follows the target's reported phase: finish on `Ready` or `Completed`
/// (or once committed), roll back on a failure, otherwise mirror the phase
/// and poll again.
async fn follow_target(
    ctx: &SenderContext,
    ends: &Ends,
    mirror: WorkloadMigration,
    target: WorkloadMigration,
    status: &WorkloadMigrationStatus,
) -> Result<Action> {
    let committed = status.phase == MigrationPhase::Ready;
    let plan = plan(&mirror.spec).ok().flatten();
    if target.status.is_none() && status.phase != MigrationPhase::Pending && !committed {
        // No word from the target since the mirror moved on (a transport
        // that resumes from a stream has not caught up yet): nothing new.
        return Ok(Action::requeue(ctx.config.poll_interval));
    }
    let target_status = status_of(&target);
    let step_ready = target_status.phase == MigrationPhase::Ready
        || (target_status.phase == MigrationPhase::Progressing
            && target_status.reason.as_deref() == Some(conditions::STEP_READY));
    if let Some(plan) = &plan
        && step_ready
        && !committed
    {
        // A progressive move: pause, read the gate, then shrink the source
        // and ask for the next step (or finish after the last).
        return stepwise::follow_step(ctx, ends, mirror, target, plan).await;
    }
    match target_status.phase {
        MigrationPhase::Ready | MigrationPhase::Completed => {
            complete(ctx, ends, mirror, Some(target)).await
        }
        MigrationPhase::Failed | MigrationPhase::Rejected | MigrationPhase::RolledBack => {
            let reason = target_status
                .reason
                .clone()
                .unwrap_or_else(|| format!("{:?}", target_status.phase));
            let message = format!(
                "the target reported {:?}: {}",
                target_status.phase,
                target_status.message.clone().unwrap_or_default()
            );
            rollback(ctx, ends, mirror, &reason, &message).await
        }
        _ if committed => complete(ctx, ends, mirror, Some(target)).await,
        phase => {
            if status.phase != phase {
                let mut status = status_of(&mirror);
                let reason = target_status
                    .reason
                    .clone()
                    .unwrap_or_else(|| format!("{phase:?}"));
                let message = target_status.message.clone().unwrap_or_default();
                enter(
                    &mut status,
                    phase,
                    &reason,
                    message,
                    mirror.metadata.generation,
                );
                write(&ends.local, &mirror, status, SENDER_FIELD_MANAGER).await?;
            }
            Ok(Action::requeue(ctx.config.poll_interval))
        }
    }
}

/// Asks the receiver for `action` through the request's intent, with the
/// next sequence number; the same action already asked is not repeated.
pub(super) async fn send_intent(
    ctx: &SenderContext,
    ends: &Ends,
    target: &WorkloadMigration,
    action: IntentAction,
    step: Option<i32>,
) -> Result<()> {
    let current = target.spec.intent.as_ref();
    if current.is_some_and(|i| i.action == action && i.step == step) {
        return Ok(());
    }
    let sequence = current.map_or(1, |i| i.sequence + 1);
    let intent = signed_intent(
        ctx.cluster_keys()?.as_ref(),
        &target.spec,
        action,
        sequence,
        step,
    )
    .map_err(|source| Error::Untrusted {
        what: "cannot sign the intent".into(),
        source,
    })?;
    ends.remote.send_intent(target, intent).await
}

/// The target is ready: persist that, act on the source, tell the target
/// the move is complete, mark the mirror `Completed`. Each step is
/// idempotent, so a restart anywhere repeats nothing harmful.
pub(super) async fn complete(
    ctx: &SenderContext,
    ends: &Ends,
    mut mirror: WorkloadMigration,
    target: Option<WorkloadMigration>,
) -> Result<Action> {
    let local = &ends.local;
    let generation = mirror.metadata.generation;
    let dry_run = mirror.spec.dry_run
        || target.as_ref().is_some_and(|t| {
            t.status.as_ref().and_then(|s| s.reason.as_deref()) == Some(conditions::DRY_RUN_PASSED)
        });
    if dry_run {
        let mut status = status_of(&mirror);
        let message = "the target's checks passed; nothing was applied or changed";
        enter(
            &mut status,
            MigrationPhase::Completed,
            conditions::DRY_RUN_PASSED,
            message,
            generation,
        );
        write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
        return Ok(Action::await_change());
    }
    if status_of(&mirror).phase != MigrationPhase::Ready {
        let mut status = status_of(&mirror);
        enter(
            &mut status,
            MigrationPhase::Ready,
            "TargetReady",
            "the target reported Ready",
            generation,
        );
        mirror = write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    }
    source_action(ctx, &mirror).await?;
    if let Some(target) = target.filter(|t| !status_of(t).phase.is_terminal()) {
        send_intent(ctx, ends, &target, IntentAction::Complete, None).await?;
    }
    let mut status = status_of(&mirror);
    let message = format!(
        "moved to {}; source action {:?} done",
        mirror.spec.target_cluster, mirror.spec.source_action
    );
    enter(
        &mut status,
        MigrationPhase::Completed,
        conditions::SOURCE_ACTION_DONE,
        message,
        generation,
    );
    write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    Ok(Action::await_change())
}

/// Rolls back: persist the decision, ask the target to roll back, and mark
/// the mirror `RolledBack` once the target has ended (or is gone). The
/// target removes what it created itself; the source is touched only to
/// undo this move's own source action, when the target ended after it.
pub(super) async fn rollback(
    ctx: &SenderContext,
    ends: &Ends,
    mut mirror: WorkloadMigration,
    reason: &str,
    message: &str,
) -> Result<Action> {
    let generation = mirror.metadata.generation;
    let mut status = status_of(&mirror);
    if condition(
        &mut status,
        conditions::ROLLBACK_STARTED,
        true,
        reason,
        message,
        generation,
    ) {
        mirror = write(&ends.local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    }
    if let Some(target) = read_target(ctx, ends, &mirror).await?
        && !status_of(&target).phase.is_terminal()
    {
        if let Ok(Some(plan)) = plan(&mirror.spec)
            && let Some(action) = stepwise::step_back(ctx, ends, &mirror, &target, &plan).await?
        {
            return Ok(action);
        }
        send_intent(ctx, ends, &target, IntentAction::RollBack, None).await?;
        return Ok(Action::requeue(ctx.config.poll_interval));
    }
    // A target that ended after reporting Ready (its copy removed on a
    // refusal or a rollback intent) leaves a source this move had already
    // scaled down: it comes back, so the workload keeps running somewhere.
    let message = if restore_source(ctx, &mirror).await? {
        format!("{message}; the target removed its copy and the source's replicas were restored")
    } else {
        format!("{message}; the target removed its copy and the source was left as it was")
    };
    let mut status = status_of(&mirror);
    enter(
        &mut status,
        MigrationPhase::RolledBack,
        reason,
        message,
        generation,
    );
    write(&ends.local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    Ok(Action::await_change())
}
