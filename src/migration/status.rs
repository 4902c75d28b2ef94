//! Writing one side's status: the phase machine's persisted steps.
//!
//! Every write is a server-side apply of the whole status carrying the
//! object's resourceVersion, so a write computed from a stale read fails
//! with 409 instead of undoing a newer step (for example a receiver's
//! `Ready` landing after the sender's `Completed`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::error::{Error, Result};
use crate::crd::{
    MigrationPhase, MigrationRole, WorkloadMigration, WorkloadMigrationStatus, new_condition,
    set_condition, types,
};

/// The current time as a Kubernetes `Time`.
pub(crate) fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// The status of `wm`, or the default (`Pending`).
pub(crate) fn status_of(wm: &WorkloadMigration) -> WorkloadMigrationStatus {
    wm.status.clone().unwrap_or_default()
}

/// Moves `status` to `phase` with a reason and message, stamping the
/// phase's timestamp (once) and the `Ready` condition.
pub(crate) fn enter(
    status: &mut WorkloadMigrationStatus,
    phase: MigrationPhase,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) {
    let now = now();
    let message = message.into();
    status.phase = phase;
    status.reason = Some(reason.to_owned());
    status.message = Some(message.clone());
    status.observed_generation = generation;
    let stamp = match phase {
        MigrationPhase::Accepted => Some(&mut status.accepted_time),
        MigrationPhase::Progressing => Some(&mut status.progressing_time),
        MigrationPhase::Ready => Some(&mut status.ready_time),
        MigrationPhase::Completed => Some(&mut status.completed_time),
        _ => None,
    };
    if let Some(stamp) = stamp
        && stamp.is_none()
    {
        *stamp = Some(now.clone());
    }
    if phase.is_terminal() && status.finished_time.is_none() {
        status.finished_time = Some(now.clone());
    }
    let ready = matches!(phase, MigrationPhase::Ready | MigrationPhase::Completed);
    set_condition(
        &mut status.conditions,
        new_condition(types::READY, ready, reason, message, generation, &now),
        now.clone(),
    );
}

/// Sets a condition in `status`; returns whether it changed.
pub(crate) fn condition(
    status: &mut WorkloadMigrationStatus,
    type_: &str,
    value: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> bool {
    let now = now();
    set_condition(
        &mut status.conditions,
        new_condition(type_, value, reason, message, generation, &now),
        now,
    )
}

/// Writes `status` to `wm` if it differs, with `wm`'s resourceVersion as a
/// precondition. Returns the object as stored.
pub(crate) async fn write(
    api: &Api<WorkloadMigration>,
    wm: &WorkloadMigration,
    mut status: WorkloadMigrationStatus,
    manager: &str,
) -> Result<WorkloadMigration> {
    status.workload = Some(wm.spec.workload_key());
    if wm.status.as_ref() == Some(&status) {
        return Ok(wm.clone());
    }
    let name = wm.name_any();
    let from = wm.status.as_ref().map(|s| s.phase).unwrap_or_default();
    let patch = serde_json::json!({
        "apiVersion": "ferry.dev/v1alpha1",
        "kind": "WorkloadMigration",
        "metadata": {"name": name, "resourceVersion": wm.resource_version()},
        "status": status,
    });
    let stored = api
        .patch_status(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|e| Error::kube(format!("write the status of WorkloadMigration {name}"), e))?;
    if from != status.phase {
        log_phase_change(wm, from, &status);
    }
    Ok(stored)
}

/// One line per phase change, on either side, once the change is stored:
/// which move, which side, from and to which phase, and why.
fn log_phase_change(
    wm: &WorkloadMigration,
    from: MigrationPhase,
    status: &WorkloadMigrationStatus,
) {
    let spec = &wm.spec;
    let side = match spec.role {
        MigrationRole::Source => "sender",
        MigrationRole::Target => "receiver",
    };
    tracing::info!(
        migration = %format!("{}/{}", wm.namespace().unwrap_or_default(), wm.name_any()),
        side,
        workload = %spec.workload_key(),
        source = %spec.source_cluster,
        target = %spec.target_cluster,
        from = ?from,
        to = ?status.phase,
        reason = status.reason.as_deref().unwrap_or(""),
        message = status.message.as_deref().unwrap_or(""),
        "migration phase changed"
    );
}
