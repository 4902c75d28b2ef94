//! The sender controller: drives each local mirror (role `Source`) from the
//! target's reported phase to `Completed` or `RolledBack`.
//!
//! Level-triggered from the mirror's status: every reconcile reads the
//! request in this cluster's inbox in the target peer and takes the next
//! step. The target is polled (a watch across clusters would hold a
//! connection per peer open; a poll at `poll_interval` is cheap and
//! survives outages). In the peer the sender only creates, reads, updates
//! the intent of, and deletes its own requests in its inbox: it never
//! writes a status there, nor touches anything else.

mod cargo;
mod export;
mod remote;
mod removed;
mod source;
mod start;
mod steps;
mod stepwise;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};

pub use start::{
    MigrationRequest, SenderConfig, SenderContext, StartOutcome, count_in_flight,
    last_migration_time, start_migration,
};

use super::envelope::{self, verify_mirror};
use super::error::{Error, Result};
use super::finalizer;
use super::names::{LABEL_ROLE, SENDER_FIELD_MANAGER, SENDER_FINALIZER, conditions, inbox_peer};
use super::status::{condition, enter, status_of, write};
use crate::crd::{MigrationPhase, MigrationRole, WorkloadMigration};
use kube::Resource;
use kube::runtime::events::{Event, EventType};
use remote::Remote;
use start::target_request;

/// Runs the sender controller until the future is dropped.
pub async fn run_sender(ctx: SenderContext) {
    let api: Api<WorkloadMigration> = Api::all(ctx.client.clone());
    let mut controller = Controller::new(
        api,
        watcher::Config::default().labels(&format!("{LABEL_ROLE}=source")),
    );
    if let Some(link) = &ctx.nats {
        // Over NATS a status is pushed: act on it now, not at the next poll.
        controller = controller.reconcile_on(link.status_arrivals());
    }
    controller
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
    // A mirror lives beside its workload; one in an inbox was put there by
    // a peer's credential, never by this cluster's sender.
    let namespace = mirror.namespace().unwrap_or_default();
    if mirror.spec.role != MigrationRole::Source
        || inbox_peer(&namespace).is_some()
        || namespace != mirror.spec.target_namespace
    {
        return Ok(Action::await_change());
    }
    let local = local_api(&ctx, &mirror);
    let terminal = status_of(&mirror).phase.is_terminal();
    if !terminal && let Err(error) = verify_mirror(ctx.cluster_keys()?.as_ref(), &mirror) {
        // Not this cluster's sender's: refuse it, act on nothing.
        return refuse_mirror(&ctx, &local, &mirror, &error).await;
    }
    if mirror.metadata.deletion_timestamp.is_some() {
        return on_deleted(&ctx, &local, &mirror).await;
    }
    if terminal {
        forget(&ctx, &mirror);
        if let Some(link) = &ctx.nats {
            link.forget(&mirror);
        }
        let left =
            finalizer::expire(&local, &mirror, SENDER_FINALIZER, ctx.config.finished_ttl).await?;
        return Ok(left.map_or_else(Action::await_change, Action::requeue));
    }
    match steps::step(&mirror, &ctx).await {
        Ok(action) => {
            forget(&ctx, &mirror);
            Ok(action)
        }
        Err(error) if error.is_unreachable() => {
            let delay = backoff(&ctx, &mirror);
            tracing::info!(%error, ?delay, "target peer unreachable; retrying");
            mark(
                &ctx,
                &mirror,
                conditions::PEER_UNREACHABLE,
                "Unreachable",
                &error,
            )
            .await;
            Ok(Action::requeue(delay))
        }
        Err(error @ Error::Untrusted { .. }) => {
            let delay = backoff(&ctx, &mirror);
            tracing::warn!(%error, ?delay, "the target's status does not verify; acting on none of it");
            let reason = match &error {
                Error::Untrusted { source, .. } => envelope::reason(source),
                _ => "Untrusted",
            };
            mark(&ctx, &mirror, conditions::STATUS_UNVERIFIED, reason, &error).await;
            Ok(Action::requeue(delay))
        }
        Err(error) => Err(error),
    }
}

/// The mirror is being deleted: a move in flight is withdrawn by deleting
/// the request in the target (whose receiver then rolls back what it
/// created); a finished one, or one whose target peer was removed, just goes.
async fn on_deleted(
    ctx: &SenderContext,
    local: &Api<WorkloadMigration>,
    mirror: &WorkloadMigration,
) -> Result<Action> {
    if !finalizer::has(mirror, SENDER_FINALIZER) {
        return Ok(Action::await_change());
    }
    let peer = &mirror.spec.target_cluster;
    let remote = Remote::for_peer(ctx, peer);
    // A removed peer has nothing left to withdraw from: the finalizer goes.
    let removed = matches!(remote, Err(Error::PeerUnavailable { .. }))
        && !removed::peer_exists(ctx, peer).await?;
    if !status_of(mirror).phase.is_terminal() && !removed {
        remote?.withdraw(ctx, mirror).await?;
    }
    finalizer::remove(local, mirror, SENDER_FINALIZER).await?;
    Ok(Action::await_change())
}

/// Marks a mirror this cluster's sender did not sign `Rejected`, with a
/// Warning Event; nothing else happens (its finalizer, if it has one, goes
/// too, so a forged mirror's deletion withdraws nothing).
async fn refuse_mirror(
    ctx: &SenderContext,
    local: &Api<WorkloadMigration>,
    mirror: &WorkloadMigration,
    error: &crate::trust::TrustError,
) -> Result<Action> {
    let reason = envelope::reason(error);
    let message =
        format!("this cluster's sender did not sign this mirror: {error}; nothing is done");
    tracing::warn!(migration = %key(mirror), %message, "refused a mirror");
    if mirror.metadata.deletion_timestamp.is_none() {
        let mut status = status_of(mirror);
        enter(
            &mut status,
            MigrationPhase::Rejected,
            reason,
            &message,
            mirror.metadata.generation,
        );
        write(local, mirror, status, SENDER_FIELD_MANAGER).await?;
    }
    finalizer::remove(local, mirror, SENDER_FINALIZER).await?;
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_owned(),
        note: Some(message),
        action: "Send".to_owned(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &mirror.object_ref(&())).await {
        tracing::debug!(%error, "cannot publish an Event");
    }
    Ok(Action::await_change())
}

/// Records the condition `type_=True` on the mirror, with the error's
/// chain as its message (best effort: the retry happens whether or not this
/// write succeeds).
async fn mark(
    ctx: &SenderContext,
    mirror: &WorkloadMigration,
    type_: &str,
    reason: &str,
    error: &Error,
) {
    let local = local_api(ctx, mirror);
    let Ok(Some(fresh)) = local.get_opt(&mirror.name_any()).await else {
        return;
    };
    let mut status = status_of(&fresh);
    let message = format!("peer {}: {}", fresh.spec.target_cluster, error_chain(error));
    if condition(
        &mut status,
        type_,
        true,
        reason,
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
