//! The receiver's bookkeeping around the phase machine: its finalizer on
//! each request, Events, and the garbage collection of finished requests.
//!
//! It must never remove the finalizer of a request whose move could still
//! leave objects behind: only a finished request, or one whose objects
//! were just removed, loses it.

use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};

use super::ReceiverContext;
use crate::crd::WorkloadMigration;
use crate::migration::error::{Error, Result};
use crate::migration::finalizer;
use crate::migration::names::RECEIVER_FINALIZER;
use crate::migration::sealed::{holds_sealed_data, without_sealed_data};

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

/// A finished request: it keeps no sealed data and no finalizer (there is
/// nothing left to undo, and deleting a `Completed` request must leave the
/// workload), and it is deleted once `finished_ttl` has passed.
pub(super) async fn on_finished(
    api: &Api<WorkloadMigration>,
    ctx: &ReceiverContext,
    wm: &WorkloadMigration,
) -> Result<Action> {
    let cleared;
    let wm = if holds_sealed_data(&wm.spec) {
        cleared = clear_sealed_data(api, wm).await?;
        &cleared
    } else {
        wm
    };
    let left = finalizer::expire(api, wm, RECEIVER_FINALIZER, ctx.config.finished_ttl).await?;
    Ok(left.map_or_else(Action::await_change, Action::requeue))
}

/// Removes the sealed data of the request's Secrets (their signed digests
/// stay, so the request still verifies), with the request's
/// resourceVersion as a precondition. Returns the request as stored.
pub(super) async fn clear_sealed_data(
    api: &Api<WorkloadMigration>,
    wm: &WorkloadMigration,
) -> Result<WorkloadMigration> {
    let name = wm.name_any();
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": wm.resource_version()},
        "spec": {"secrets": without_sealed_data(&wm.spec.secrets)},
    });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("clear the sealed data of {name}"), e))
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
