//! The sender controller: drives each local mirror (role `Source`) from the
//! target's reported phase to `Completed` or `RolledBack`.
//!
//! Level-triggered from the mirror's status: every reconcile reads the
//! target's request through the peer client and takes the next step. The
//! target is polled (a watch across clusters would hold a connection per
//! peer open; a poll at `poll_interval` is cheap and survives outages).

mod source;
mod start;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};

pub use start::{
    MigrationRequest, SenderConfig, SenderContext, StartOutcome, count_in_flight,
    last_migration_time, start_migration,
};

use super::applied::delete_applied;
use super::error::{Error, Result, is_not_found};
use super::names::{LABEL_ROLE, SENDER_FIELD_MANAGER, conditions};
use super::status::{condition, enter, status_of, write};
use crate::crd::{
    MigrationPhase, MigrationRole, WorkloadMigration, WorkloadMigrationStatus, find_condition,
    is_condition_true,
};
use source::source_action;
use start::create_target;

/// Runs the sender controller until the future is dropped.
pub async fn run_sender(ctx: SenderContext) {
    let api: Api<WorkloadMigration> = Api::all(ctx.client.clone());
    Controller::new(
        api,
        watcher::Config::default().labels(&format!("{LABEL_ROLE}=source")),
    )
    .run(reconcile, error_policy, Arc::new(ctx))
    .for_each(|result| async move {
        if let Err(error) = result {
            tracing::debug!(%error, "sender reconcile failed");
        }
    })
    .await;
}

fn key(wm: &WorkloadMigration) -> String {
    format!("{}/{}", wm.namespace().unwrap_or_default(), wm.name_any())
}

/// The next retry delay for this mirror: base · 2ⁿ, capped.
fn backoff(ctx: &SenderContext, wm: &WorkloadMigration) -> Duration {
    let mut attempts = ctx.attempts.lock().unwrap_or_else(|p| p.into_inner());
    let n = attempts.entry(key(wm)).or_insert(0);
    let delay = ctx
        .config
        .backoff_base
        .saturating_mul(1u32 << (*n).min(16))
        .min(ctx.config.backoff_max);
    *n += 1;
    delay
}

fn forget(ctx: &SenderContext, wm: &WorkloadMigration) {
    ctx.attempts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key(wm));
}

fn error_policy(wm: Arc<WorkloadMigration>, error: &Error, ctx: Arc<SenderContext>) -> Action {
    if error.is_transient() {
        Action::requeue(backoff(&ctx, &wm))
    } else {
        tracing::warn!(%error, migration = %key(&wm), "mirror cannot proceed until it changes");
        Action::await_change()
    }
}

#[tracing::instrument(skip_all, fields(migration = %key(&mirror)))]
async fn reconcile(mirror: Arc<WorkloadMigration>, ctx: Arc<SenderContext>) -> Result<Action> {
    if mirror.spec.role != MigrationRole::Source || status_of(&mirror).phase.is_terminal() {
        forget(&ctx, &mirror);
        return Ok(Action::await_change());
    }
    match step(&mirror, &ctx).await {
        Ok(action) => {
            forget(&ctx, &mirror);
            Ok(action)
        }
        Err(error) if error.is_unreachable() => {
            let delay = backoff(&ctx, &mirror);
            tracing::info!(%error, ?delay, "target peer unreachable; retrying");
            mark_unreachable(&ctx, &mirror, &error).await;
            Ok(Action::requeue(delay))
        }
        Err(error) => Err(error),
    }
}

/// Records `PeerUnreachable=True` on the mirror (best effort: the retry
/// happens whether or not this write succeeds).
async fn mark_unreachable(ctx: &SenderContext, mirror: &WorkloadMigration, error: &Error) {
    let local = local_api(ctx, mirror);
    let Ok(Some(fresh)) = local.get_opt(&mirror.name_any()).await else {
        return;
    };
    let mut status = status_of(&fresh);
    let message = format!(
        "peer {} could not be reached: {}",
        fresh.spec.target_cluster,
        error_chain(error)
    );
    if condition(
        &mut status,
        conditions::PEER_UNREACHABLE,
        true,
        "Unreachable",
        message,
        fresh.metadata.generation,
    ) {
        let _ = write(&local, &fresh, status, SENDER_FIELD_MANAGER).await;
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn local_api(ctx: &SenderContext, wm: &WorkloadMigration) -> Api<WorkloadMigration> {
    Api::namespaced(ctx.client.clone(), &wm.namespace().unwrap_or_default())
}

/// The two ends of one move: the mirror's API in this cluster, the
/// request's API and the client in the target peer.
struct Ends {
    local: Api<WorkloadMigration>,
    remote: Api<WorkloadMigration>,
    peer: Client,
}

/// One pass over the protocol from the mirror's persisted state.
async fn step(mirror: &WorkloadMigration, ctx: &SenderContext) -> Result<Action> {
    let target_peer = &mirror.spec.target_cluster;
    let peer = ctx
        .peers
        .any_client(target_peer)
        .ok_or_else(|| Error::PeerUnavailable {
            peer: target_peer.clone(),
        })?;
    let namespace = mirror.namespace().unwrap_or_default();
    let name = mirror.name_any();
    let ends = Ends {
        remote: Api::namespaced(peer.clone(), &namespace),
        local: local_api(ctx, mirror),
        peer,
    };
    let mut mirror = mirror.clone();
    let status = status_of(&mirror);

    if let Some((reason, message)) = rollback_due(&mirror, &status) {
        return rollback(&ends, mirror, &reason, &message).await;
    }
    let target = ends
        .remote
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("read the request in peer {target_peer}"), e))?;
    if is_condition_true(&status.conditions, conditions::PEER_UNREACHABLE) {
        mirror = mark_reachable(&ends.local, mirror, &status).await?;
    }
    match target {
        None => target_missing(ctx, &ends, mirror, &status).await,
        Some(target) => follow_target(ctx, &ends, mirror, target, &status).await,
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

/// Records `PeerUnreachable=False`: the target answered again.
async fn mark_reachable(
    local: &Api<WorkloadMigration>,
    mirror: WorkloadMigration,
    status: &WorkloadMigrationStatus,
) -> Result<WorkloadMigration> {
    let mut status = status.clone();
    condition(
        &mut status,
        conditions::PEER_UNREACHABLE,
        false,
        "Reachable",
        "the target peer answers",
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
    let target_peer = &mirror.spec.target_cluster;
    match status.phase {
        MigrationPhase::Pending => match create_target(&ends.peer, &mirror).await {
            Ok(()) => Ok(Action::requeue(ctx.config.poll_interval)),
            Err(e) if is_not_found(&e) => {
                let namespace = mirror.namespace().unwrap_or_default();
                let message = format!("namespace {namespace} does not exist in peer {target_peer}");
                rollback(ends, mirror, conditions::TARGET_NAMESPACE_MISSING, &message).await
            }
            Err(e) => Err(Error::kube(
                format!("create the request in peer {target_peer}"),
                e,
            )),
        },
        MigrationPhase::Ready => complete(ctx, ends, mirror, None).await,
        _ => {
            rollback(
                ends,
                mirror,
                conditions::TARGET_REQUEST_LOST,
                "the request disappeared from the target before it was ready",
            )
            .await
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
    let target_status = status_of(&target);
    match target_status.phase {
        MigrationPhase::Ready => complete(ctx, ends, mirror, Some(target)).await,
        MigrationPhase::Completed => complete(ctx, ends, mirror, Some(target)).await,
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
            rollback(ends, mirror, &reason, &message).await
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

/// The target is ready: persist that, act on the source, mark both sides
/// `Completed`. Each step is idempotent, so a restart anywhere repeats
/// nothing harmful.
async fn complete(
    ctx: &SenderContext,
    ends: &Ends,
    mut mirror: WorkloadMigration,
    target: Option<WorkloadMigration>,
) -> Result<Action> {
    let Ends { local, remote, .. } = ends;
    let generation = mirror.metadata.generation;
    let dry_run = mirror.spec.dry_run
        || target.as_ref().is_some_and(|t| {
            t.status.as_ref().and_then(|s| s.reason.as_deref()) == Some(conditions::DRY_RUN_PASSED)
        });
    if dry_run {
        let mut status = status_of(&mirror);
        enter(
            &mut status,
            MigrationPhase::Completed,
            conditions::DRY_RUN_PASSED,
            "the target's checks passed; nothing was applied or changed",
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
        let mut status = status_of(&target);
        enter(
            &mut status,
            MigrationPhase::Completed,
            conditions::SOURCE_ACTION_DONE,
            "the source performed its action; the move is done",
            target.metadata.generation,
        );
        write(remote, &target, status, SENDER_FIELD_MANAGER).await?;
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

/// Rolls back: persist the decision, mark the target `RolledBack`, delete
/// what the receiver applied, mark the mirror `RolledBack`. The source is
/// never touched.
async fn rollback(
    ends: &Ends,
    mut mirror: WorkloadMigration,
    reason: &str,
    message: &str,
) -> Result<Action> {
    let Ends {
        local,
        remote,
        peer,
    } = ends;
    let generation = mirror.metadata.generation;
    let name = mirror.name_any();
    let namespace = mirror.namespace().unwrap_or_default();
    let mut status = status_of(&mirror);
    if condition(
        &mut status,
        conditions::ROLLBACK_STARTED,
        true,
        reason,
        message,
        generation,
    ) {
        mirror = write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    }
    let target_peer = &mirror.spec.target_cluster;
    let target = remote
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("read the request in peer {target_peer}"), e))?;
    if let Some(target) = target.filter(|t| !status_of(t).phase.is_terminal()) {
        let mut status = status_of(&target);
        enter(
            &mut status,
            MigrationPhase::RolledBack,
            reason,
            message,
            target.metadata.generation,
        );
        write(remote, &target, status, SENDER_FIELD_MANAGER).await?;
    }
    delete_applied(peer, &namespace, &name).await?;
    let mut status = status_of(&mirror);
    enter(
        &mut status,
        MigrationPhase::RolledBack,
        reason,
        format!("{message}; the target copy was removed and the source left as it was"),
        generation,
    );
    write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    Ok(Action::await_change())
}
