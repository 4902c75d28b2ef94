//! The two finalizers of the protocol (the receiver's on a request, the
//! sender's on its mirror) and the TTL of finished objects.
//!
//! A finalizer is added before its side creates anything for the move and
//! removed only once nothing of the move is left to undo; this file must
//! never touch a finalizer other than the one it is given.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::error::{Error, Result, is_not_found};
use crate::crd::WorkloadMigration;

/// Whether `wm` carries `finalizer`.
pub(crate) fn has(wm: &WorkloadMigration, finalizer: &str) -> bool {
    wm.finalizers().iter().any(|f| f == finalizer)
}

/// Writes the finalizer list, with the object's resourceVersion as a
/// precondition (a concurrent change is a 409, retried by the caller).
async fn set(
    api: &Api<WorkloadMigration>,
    wm: &WorkloadMigration,
    finalizers: Vec<String>,
) -> Result<WorkloadMigration> {
    let name = wm.name_any();
    let patch = serde_json::json!({
        "metadata": {"finalizers": finalizers, "resourceVersion": wm.resource_version()},
    });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("update the finalizers of {name}"), e))
}

/// Adds `finalizer` unless present; returns the object as stored.
pub(crate) async fn ensure(
    api: &Api<WorkloadMigration>,
    wm: WorkloadMigration,
    finalizer: &str,
) -> Result<WorkloadMigration> {
    if has(&wm, finalizer) {
        return Ok(wm);
    }
    let mut finalizers = wm.finalizers().to_vec();
    finalizers.push(finalizer.to_owned());
    set(api, &wm, finalizers).await
}

/// Removes `finalizer` (already gone, or the object gone, is fine).
pub(crate) async fn remove(
    api: &Api<WorkloadMigration>,
    wm: &WorkloadMigration,
    finalizer: &str,
) -> Result<()> {
    if !has(wm, finalizer) {
        return Ok(());
    }
    let finalizers = wm
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    match set(api, wm, finalizers).await {
        Err(Error::Kube { source, .. }) if is_not_found(&source) => Ok(()),
        other => other.map(drop),
    }
}

/// How long until `since + ttl`; zero once passed.
pub(crate) fn remaining(since: jiff::Timestamp, ttl: Duration) -> Duration {
    let elapsed = jiff::Timestamp::now()
        .duration_since(since)
        .try_into()
        .unwrap_or(Duration::ZERO);
    ttl.saturating_sub(elapsed)
}

/// A finished object: it keeps no `finalizer` (nothing is left to undo),
/// and it is deleted once `ttl` has passed since it finished. Returns how
/// long until then, or `None` once deleted.
pub(crate) async fn expire(
    api: &Api<WorkloadMigration>,
    wm: &WorkloadMigration,
    finalizer: &str,
    ttl: Duration,
) -> Result<Option<Duration>> {
    remove(api, wm, finalizer).await?;
    let finished = wm
        .status
        .as_ref()
        .and_then(|s| s.finished_time.as_ref())
        .map(|t| t.0)
        .unwrap_or_else(jiff::Timestamp::now);
    let left = remaining(finished, ttl);
    if !left.is_zero() {
        return Ok(Some(left));
    }
    match api.delete(&wm.name_any(), &Default::default()).await {
        Ok(_) => Ok(None),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(Error::kube(
            format!("delete the finished {}", wm.name_any()),
            e,
        )),
    }
}
