//! The receiver's bookkeeping around the phase machine: its finalizer on
//! each request, Events, and the garbage collection of finished requests.
//!
//! It must never remove the finalizer of a request whose move could still
//! leave objects behind: only a finished request, or one whose objects
//! were just removed, loses it.

use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource};

use super::ReceiverContext;
use crate::crd::WorkloadMigration;
use crate::migration::error::Result;
use crate::migration::finalizer;
use crate::migration::names::RECEIVER_FINALIZER;

/// Whether the request carries the receiver's finalizer.
pub(super) fn has_finalizer(wm: &WorkloadMigration) -> bool {
    finalizer::has(wm, RECEIVER_FINALIZER)
}

/// Adds the receiver's finalizer before anything is created for the request.
pub(super) async fn ensure_finalizer(
    api: &Api<WorkloadMigration>,
    wm: WorkloadMigration,
) -> Result<WorkloadMigration> {
    finalizer::ensure(api, wm, RECEIVER_FINALIZER).await
}

/// Removes the receiver's finalizer.
pub(super) async fn drop_finalizer(
    api: &Api<WorkloadMigration>,
    wm: &WorkloadMigration,
) -> Result<()> {
    finalizer::remove(api, wm, RECEIVER_FINALIZER).await
}

/// A finished request: it keeps no finalizer (there is nothing left to
/// undo, and deleting a `Completed` request must leave the workload), and
/// it is deleted once `finished_ttl` has passed.
pub(super) async fn on_finished(
    api: &Api<WorkloadMigration>,
    ctx: &ReceiverContext,
    wm: &WorkloadMigration,
) -> Result<Action> {
    let left = finalizer::expire(api, wm, RECEIVER_FINALIZER, ctx.config.finished_ttl).await?;
    Ok(left.map_or_else(Action::await_change, Action::requeue))
}

/// Publishes an Event on the request (best effort: a failed Event never
/// stops the protocol).
pub(super) async fn publish(
    ctx: &ReceiverContext,
    wm: &WorkloadMigration,
    warning: bool,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_owned(),
        note: Some(note.chars().take(1024).collect()),
        action: "Receive".to_owned(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &wm.object_ref(&())).await {
        tracing::debug!(%error, reason, "cannot publish an Event");
    }
}
