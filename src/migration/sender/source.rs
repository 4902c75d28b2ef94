//! What the sender does to the source workload once the target is ready:
//! the policy's `sourceAction` on the local Deployment or StatefulSet, with
//! the record of where it went. A stateful workload's claims stay as they
//! are: Ferry never deletes data.
//!
//! The only code that changes the source. It must never run before the
//! mirror recorded the target `Ready`, nor on a rollback; and it acts once
//! per migration (a repeat only finishes what the first pass began). Its
//! undoing, when the target peer is removed, touches only a source this
//! very migration acted on.

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

use super::start::{SenderContext, workload_name};
use crate::crd::{MigrationPhase, SourceAction, WorkloadMigration};
use crate::migration::error::{Error, Result, is_already_exists, is_not_found};
use crate::migration::names::{
    ANNOTATION_LAST_MIGRATION, ANNOTATION_MIGRATED_TO, ANNOTATION_MIGRATION,
    ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_PLACEMENT,
};
use crate::migration::workload::{kind_of, ready_replicas, replicas};

/// Performs `sourceAction` on the local Deployment and records where it
/// went. Done once per migration: the `ferry.dev/migration` annotation
/// names the migration that already acted.
pub(super) async fn source_action(ctx: &SenderContext, mirror: &WorkloadMigration) -> Result<()> {
    let Some((api, name)) = source_api(ctx, mirror) else {
        return Err(Error::InvalidRequest {
            name: mirror.name_any(),
            message: "spec.workload has no metadata.name".into(),
        });
    };
    let Some(source) = get_source(&api, name).await? else {
        return Ok(()); // deleted (by a Delete action, or by someone else)
    };
    let annotations = source.annotations().clone();
    // A progressive move records itself (and the original replicas) at its
    // first step; the record of where the workload went comes only now.
    let ours = annotations.get(ANNOTATION_MIGRATION) == Some(&mirror.name_any());
    let done = ours && annotations.contains_key(ANNOTATION_MIGRATED_TO);
    let replicas = i32::try_from(replicas(&source.data)).unwrap_or(i32::MAX);
    let action = mirror.spec.source_action;
    let left_now = mirror
        .spec
        .partial
        .map_or(0, |p| (p.of - p.replicas).max(0));
    if done && (action != SourceAction::ScaleToZero || replicas == left_now) {
        if action == SourceAction::Delete {
            delete_source(&api, name).await?;
        }
        return Ok(());
    }
    let mut record = serde_json::json!({
        ANNOTATION_MIGRATED_TO: mirror.spec.target_cluster,
        ANNOTATION_LAST_MIGRATION: jiff::Timestamp::now().to_string(),
        ANNOTATION_MIGRATION: mirror.name_any(),
    });
    let mut patch = serde_json::json!({"metadata": {"annotations": {}}});
    // A partial move leaves the rest of the replicas where they were.
    let left = mirror
        .spec
        .partial
        .map_or(0, |p| (p.of - p.replicas).max(0));
    if let Some(partial) = mirror.spec.partial
        && action != SourceAction::Keep
    {
        record[ANNOTATION_PLACEMENT] = format!(
            "{left} of {} replicas here, {} in {}",
            partial.of, partial.replicas, mirror.spec.target_cluster
        )
        .into();
    }
    if action == SourceAction::ScaleToZero {
        if !ours {
            record[ANNOTATION_ORIGINAL_REPLICAS] = replicas.to_string().into();
        }
        patch["spec"] = serde_json::json!({"replicas": left});
    }
    if done {
        // Keep the first record; only the scale is repeated.
        record = serde_json::json!({});
    }
    patch["metadata"]["annotations"] = record;
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube("act on the source workload", e))?;
    if action == SourceAction::Delete {
        delete_source(&api, name).await?;
    }
    Ok(())
}

/// The API of the source workload of `mirror` (beside the mirror, of the
/// kind it carries) and its name; `None` when the manifest names none.
fn source_api<'m>(
    ctx: &SenderContext,
    mirror: &'m WorkloadMigration,
) -> Option<(Api<DynamicObject>, &'m str)> {
    let name = workload_name(mirror)?;
    let namespace = mirror.namespace().unwrap_or_default();
    let resource = kind_of(&mirror.spec.workload).resource();
    Some((
        Api::namespaced_with(ctx.client.clone(), &namespace, &resource),
        name,
    ))
}

/// The source workload, if it exists.
async fn get_source(api: &Api<DynamicObject>, name: &str) -> Result<Option<DynamicObject>> {
    api.get_opt(name)
        .await
        .map_err(|e| Error::kube("read the source workload", e))
}

/// The source Deployment as a progressive move sees it.
#[derive(Clone, Debug, Default)]
pub(super) struct Source {
    /// Whether the Deployment exists.
    pub exists: bool,
    /// Its desired replicas.
    pub replicas: i32,
    /// Its ready replicas.
    pub ready: i32,
    /// The migration that last acted on it, from its annotation.
    pub migration: Option<String>,
}

/// Reads the source Deployment of `mirror`.
pub(super) async fn read_source(ctx: &SenderContext, mirror: &WorkloadMigration) -> Result<Source> {
    let Some((api, name)) = source_api(ctx, mirror) else {
        return Ok(Source::default());
    };
    let Some(source) = get_source(&api, name).await? else {
        return Ok(Source::default());
    };
    Ok(Source {
        exists: true,
        replicas: i32::try_from(replicas(&source.data)).unwrap_or(i32::MAX),
        ready: i32::try_from(ready_replicas(&source.data)).unwrap_or(i32::MAX),
        migration: source.annotations().get(ANNOTATION_MIGRATION).cloned(),
    })
}

/// Sets the source's replicas for a step of a progressive move, recording
/// on the Deployment, the first time, this migration and the replicas it
/// had, so that a rollback restores them.
pub(super) async fn scale_source(
    ctx: &SenderContext,
    mirror: &WorkloadMigration,
    source: &Source,
    replicas: i32,
) -> Result<()> {
    let Some((api, name)) = source_api(ctx, mirror) else {
        return Ok(());
    };
    if source.replicas == replicas && source.migration.as_deref() == Some(&mirror.name_any()) {
        return Ok(());
    }
    let mut patch = serde_json::json!({"spec": {"replicas": replicas}});
    if source.migration.as_deref() != Some(&mirror.name_any()) {
        patch["metadata"] = serde_json::json!({"annotations": {
            ANNOTATION_MIGRATION: mirror.name_any(),
            ANNOTATION_ORIGINAL_REPLICAS: source.replicas.to_string(),
        }});
    }
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube("scale the source workload for a step", e))?;
    Ok(())
}

/// Undoes this migration's source action, for a move that ends without its
/// target (its peer was removed): the replicas recorded before
/// `ScaleToZero` come back and the record of the move goes; a Deployment
/// this move deleted is created again from the mirror's manifest. A source
/// that this migration did not act on is left alone. Returns whether it
/// restored anything.
pub(super) async fn restore_source(
    ctx: &SenderContext,
    mirror: &WorkloadMigration,
) -> Result<bool> {
    let Some((api, name)) = source_api(ctx, mirror) else {
        return Ok(false);
    };
    let Some(source) = get_source(&api, name).await? else {
        let committed = mirror.status.as_ref().map(|s| s.phase) == Some(MigrationPhase::Ready);
        if !(committed && mirror.spec.source_action == SourceAction::Delete) {
            return Ok(false);
        }
        return recreate_source(&api, mirror).await.map(|()| true);
    };
    let annotations = source.annotations().clone();
    if annotations.get(ANNOTATION_MIGRATION) != Some(&mirror.name_any()) {
        return Ok(false);
    }
    let mut patch = serde_json::json!({"metadata": {"annotations": {
        ANNOTATION_MIGRATED_TO: null,
        ANNOTATION_MIGRATION: null,
        ANNOTATION_ORIGINAL_REPLICAS: null,
        ANNOTATION_PLACEMENT: null,
    }}});
    let original = annotations
        .get(ANNOTATION_ORIGINAL_REPLICAS)
        .and_then(|r| r.parse::<i32>().ok());
    if let Some(replicas) = original {
        patch["spec"] = serde_json::json!({"replicas": replicas});
    }
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube("restore the source workload", e))?;
    Ok(true)
}

/// Creates the source workload again from the mirror's manifest (it was
/// deleted by this move's `Delete` action).
async fn recreate_source(api: &Api<DynamicObject>, mirror: &WorkloadMigration) -> Result<()> {
    let mut manifest = mirror.spec.workload.clone();
    manifest["metadata"]["namespace"] = mirror.namespace().unwrap_or_default().into();
    let source: DynamicObject =
        serde_json::from_value(manifest).map_err(|e| Error::InvalidRequest {
            name: mirror.name_any(),
            message: format!("spec.workload does not parse: {e}"),
        })?;
    match api.create(&PostParams::default(), &source).await {
        Ok(_) => Ok(()),
        Err(e) if is_already_exists(&e) => Ok(()),
        Err(e) => Err(Error::kube("create the source workload again", e)),
    }
}

async fn delete_source(api: &Api<DynamicObject>, name: &str) -> Result<()> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::kube("delete the source workload", e)),
    }
}
