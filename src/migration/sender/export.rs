//! The export hook of a stateful move: a Job in this cluster, beside the
//! workload, run before the request is sent. The sender builds the Job
//! itself (`hooks.rs`), with the source's claims mounted read only, owned
//! by the mirror so that it goes with it. A failed export ends the move
//! (`Failed`, `HookFailed`) before the target has heard of it.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};

use super::SenderContext;
use crate::crd::{HookKind, HookRun, HookState, MigrationPhase, WorkloadMigration};
use crate::migration::error::{Error, Result, is_already_exists};
use crate::migration::hooks::{self, hook, job_name};
use crate::migration::names::{LABEL_MIGRATION, SENDER_FIELD_MANAGER, conditions};
use crate::migration::status::{enter, status_of, write};

/// Where the export stands.
pub(super) enum Export {
    /// No export hook, or it completed: send the request.
    Done,
    /// Wait for it, or the move ended: this is what to do.
    Wait(Action),
}

/// Runs the export hook of `mirror`, if it has one: creates its Job once,
/// follows it, and ends the move when it fails.
pub(super) async fn export(
    ctx: &SenderContext,
    local: &Api<WorkloadMigration>,
    mirror: &WorkloadMigration,
) -> Result<Export> {
    let Some(hook) = hook(&mirror.spec, HookKind::Export) else {
        return Ok(Export::Done);
    };
    let status = status_of(mirror);
    let run = status.hooks.iter().find(|h| h.hook == HookKind::Export);
    if run.is_some_and(|r| r.state == HookState::Succeeded) {
        return Ok(Export::Done);
    }
    let name = job_name(&mirror.name_any(), HookKind::Export);
    let namespace = mirror.namespace().unwrap_or_default();
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
    let found = jobs
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("read the export Job {name}"), e))?;
    let (state, message) = match (found, run) {
        (None, None) => {
            create_job(&jobs, mirror, hook, &name).await?;
            let message = format!("the export hook runs as Job {name}");
            let mut status = status;
            status.hooks.push(HookRun {
                hook: HookKind::Export,
                job: name,
                state: HookState::Running,
                message: None,
            });
            enter(
                &mut status,
                MigrationPhase::Pending,
                conditions::HOOK_RUNNING,
                message,
                mirror.metadata.generation,
            );
            write(local, mirror, status, SENDER_FIELD_MANAGER).await?;
            return Ok(Export::Wait(Action::requeue(ctx.config.poll_interval)));
        }
        (None, Some(_)) => (
            HookState::Failed,
            Some(format!(
                "the export Job {name} was removed before it finished"
            )),
        ),
        (Some(job), _) if !owned_by(&job, mirror) => (
            HookState::Failed,
            Some(format!(
                "Job {namespace}/{name} exists and was not created by this move; it is left as it is"
            )),
        ),
        (Some(job), _) => hooks::state(&serde_json::to_value(&job).unwrap_or_default()),
    };
    if state == HookState::Running {
        return Ok(Export::Wait(Action::requeue(ctx.config.poll_interval)));
    }
    let mut status = status;
    match status.hooks.iter_mut().find(|h| h.hook == HookKind::Export) {
        Some(run) => {
            run.state = state;
            run.message.clone_from(&message);
        }
        None => status.hooks.push(HookRun {
            hook: HookKind::Export,
            job: name,
            state,
            message: message.clone(),
        }),
    }
    if state == HookState::Succeeded {
        write(local, mirror, status, SENDER_FIELD_MANAGER).await?;
        return Ok(Export::Done);
    }
    let message = format!(
        "the export hook failed: {}; nothing was sent to {}",
        message.unwrap_or_default(),
        mirror.spec.target_cluster
    );
    enter(
        &mut status,
        MigrationPhase::Failed,
        conditions::HOOK_FAILED,
        message,
        mirror.metadata.generation,
    );
    write(local, mirror, status, SENDER_FIELD_MANAGER).await?;
    Ok(Export::Wait(Action::await_change()))
}

/// Whether the mirror owns `job` (it created it).
fn owned_by(job: &Job, mirror: &WorkloadMigration) -> bool {
    let uid = mirror.uid();
    job.owner_references()
        .iter()
        .any(|o| Some(&o.uid) == uid.as_ref())
}

async fn create_job(
    jobs: &Api<Job>,
    mirror: &WorkloadMigration,
    hook: &crate::crd::DataHook,
    name: &str,
) -> Result<()> {
    let mut value = hooks::job(&mirror.spec, &mirror.name_any(), HookKind::Export, hook);
    value["metadata"]["labels"][LABEL_MIGRATION] = mirror.name_any().into();
    let mut job: Job = serde_json::from_value(value).map_err(|e| Error::InvalidRequest {
        name: mirror.name_any(),
        message: format!("the export Job does not build: {e}"),
    })?;
    job.metadata.owner_references = Some(vec![OwnerReference {
        api_version: WorkloadMigration::api_version(&()).into_owned(),
        kind: WorkloadMigration::kind(&()).into_owned(),
        name: mirror.name_any(),
        uid: mirror.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    let params = PostParams {
        field_manager: Some(SENDER_FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match jobs.create(&params, &job).await {
        // Created by an earlier pass that did not record it: followed now.
        Ok(_) => Ok(()),
        Err(e) if is_already_exists(&e) => Ok(()),
        Err(e) => Err(Error::kube(format!("create the export Job {name}"), e)),
    }
}
