//! What the sender does to the source workload once the target is ready:
//! the policy's `sourceAction` on the local Deployment, with the record of
//! where it went.
//!
//! The only code that changes the source. It must never run before the
//! mirror recorded the target `Ready`, nor on a rollback; and it acts once
//! per migration (a repeat only finishes what the first pass began).

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::start::{SenderContext, workload_name};
use crate::crd::{SourceAction, WorkloadMigration};
use crate::migration::error::{Error, Result, is_not_found};
use crate::migration::names::{
    ANNOTATION_LAST_MIGRATION, ANNOTATION_MIGRATED_TO, ANNOTATION_MIGRATION,
    ANNOTATION_ORIGINAL_REPLICAS,
};

/// Performs `sourceAction` on the local Deployment and records where it
/// went. Done once per migration: the `ferry.dev/migration` annotation
/// names the migration that already acted.
pub(super) async fn source_action(ctx: &SenderContext, mirror: &WorkloadMigration) -> Result<()> {
    let namespace = mirror.namespace().unwrap_or_default();
    let Some(name) = workload_name(mirror) else {
        return Err(Error::InvalidRequest {
            name: mirror.name_any(),
            message: "spec.workload has no metadata.name".into(),
        });
    };
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(deployment) = api
        .get_opt(name)
        .await
        .map_err(|e| Error::kube("read the source workload", e))?
    else {
        return Ok(()); // deleted (by a Delete action, or by someone else)
    };
    let annotations = deployment.metadata.annotations.clone().unwrap_or_default();
    let done = annotations.get(ANNOTATION_MIGRATION) == Some(&mirror.name_any());
    let replicas = deployment.spec.replicas.unwrap_or(1);
    let action = mirror.spec.source_action;
    if done && (action != SourceAction::ScaleToZero || replicas == 0) {
        if action == SourceAction::Delete {
            delete_deployment(&api, name).await?;
        }
        return Ok(());
    }
    let mut record = serde_json::json!({
        ANNOTATION_MIGRATED_TO: mirror.spec.target_cluster,
        ANNOTATION_LAST_MIGRATION: jiff::Timestamp::now().to_string(),
        ANNOTATION_MIGRATION: mirror.name_any(),
    });
    let mut patch = serde_json::json!({"metadata": {"annotations": {}}});
    if action == SourceAction::ScaleToZero {
        if !done {
            record[ANNOTATION_ORIGINAL_REPLICAS] = replicas.to_string().into();
        }
        patch["spec"] = serde_json::json!({"replicas": 0});
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
        delete_deployment(&api, name).await?;
    }
    Ok(())
}

async fn delete_deployment(api: &Api<Deployment>, name: &str) -> Result<()> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(Error::kube("delete the source workload", e)),
    }
}
