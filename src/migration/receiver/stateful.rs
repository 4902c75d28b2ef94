//! The receiver's steps for a stateful move: the claims are created empty
//! before anything else, the import hook's Job fills them, and only once it
//! has completed is the workload created. A failed import rolls the move
//! back, claims included. A StatefulSet is then followed until it is rolled
//! out, as a Deployment is.

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;

use super::lifecycle::publish;
use super::steps::{Ending, Request, Step, name_conflict};
use crate::crd::{
    AppliedObject, HookKind, HookRun, HookState, MigrationPhase, WorkloadMigration,
    WorkloadMigrationStatus,
};
use crate::migration::error::{Error, Result};
use crate::migration::hooks::{self, hook, job_name};
use crate::migration::names::conditions;
use crate::migration::status::enter;
use crate::migration::workload::{self, CLAIM, WorkloadKind};

/// Where the import stands, once the claims exist.
pub(super) enum Import {
    /// No import hook, or it completed: create the workload.
    Done,
    /// Still running, or the move ended: this is the step.
    Wait(Step),
}

impl Request<'_> {
    /// Runs the import hook of `wm`, if it has one: creates its Job once,
    /// then follows it. The claims must exist already.
    pub(super) async fn import(
        &self,
        wm: &WorkloadMigration,
        status: &mut WorkloadMigrationStatus,
    ) -> Result<Import> {
        let Some(hook) = hook(&wm.spec, HookKind::Import) else {
            return Ok(Import::Done);
        };
        let name = job_name(&wm.name_any(), HookKind::Import);
        let run = status.hooks.iter().find(|h| h.hook == HookKind::Import);
        match run.map(|r| r.state) {
            Some(HookState::Succeeded) => return Ok(Import::Done),
            Some(HookState::Failed) => {
                let message = run.and_then(|r| r.message.clone()).unwrap_or_default();
                return self
                    .import_failed(wm, status, message)
                    .await
                    .map(Import::Wait);
            }
            Some(HookState::Running) => {}
            None => {
                let job = hooks::job(&wm.spec, &wm.name_any(), HookKind::Import, hook);
                let uid = wm.uid().unwrap_or_default();
                let Some(job_uid) = self.mover(wm, &uid).create("Job", job).await? else {
                    let objection = name_conflict("Job", &wm.spec.target_namespace, &name);
                    return self
                        .refuse_with(wm, status.clone(), objection)
                        .await
                        .map(Import::Wait);
                };
                status.applied.push(AppliedObject {
                    kind: "Job".into(),
                    name: name.clone(),
                    uid: job_uid,
                });
                status.hooks.push(HookRun {
                    hook: HookKind::Import,
                    job: name.clone(),
                    state: HookState::Running,
                    message: None,
                });
                let message = format!("the import hook runs as Job {name}");
                enter(
                    status,
                    MigrationPhase::Accepted,
                    conditions::HOOK_RUNNING,
                    &message,
                    wm.metadata.generation,
                );
                let next = self.write(wm, status.clone()).await?;
                publish(self.ctx, wm, false, conditions::HOOK_RUNNING, &message).await;
                return Ok(Import::Wait(Step::Next(Box::new(next))));
            }
        }
        let (state, message) = self.job_state(wm, status, &name).await?;
        match state {
            HookState::Running => Ok(Import::Wait(Step::Done(Action::requeue(
                self.ctx.config.poll_interval,
            )))),
            HookState::Succeeded => {
                if let Some(run) = status.hooks.iter_mut().find(|h| h.hook == HookKind::Import) {
                    run.state = HookState::Succeeded;
                }
                Ok(Import::Done)
            }
            HookState::Failed => {
                let message = message.unwrap_or_else(|| "the Job failed".into());
                if let Some(run) = status.hooks.iter_mut().find(|h| h.hook == HookKind::Import) {
                    run.state = HookState::Failed;
                    run.message = Some(message.clone());
                }
                self.import_failed(wm, status, message)
                    .await
                    .map(Import::Wait)
            }
        }
    }

    /// The state of this move's import Job `name`; one that is gone or
    /// replaced counts as failed.
    async fn job_state(
        &self,
        wm: &WorkloadMigration,
        status: &WorkloadMigrationStatus,
        name: &str,
    ) -> Result<(HookState, Option<String>)> {
        let api: Api<Job> = Api::namespaced(self.ctx.client.clone(), &wm.spec.target_namespace);
        let recorded = status
            .applied
            .iter()
            .find(|o| o.kind == "Job" && o.name == name)
            .map(|o| o.uid.clone());
        let job = api
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("read the import Job {name}"), e))?
            .filter(|j| j.uid() == recorded);
        let Some(job) = job else {
            return Ok((
                HookState::Failed,
                Some(format!(
                    "the import Job {name} was removed before it finished"
                )),
            ));
        };
        let value = serde_json::to_value(&job).unwrap_or_default();
        Ok(hooks::state(&value))
    }

    async fn import_failed(
        &self,
        wm: &WorkloadMigration,
        status: &WorkloadMigrationStatus,
        message: String,
    ) -> Result<Step> {
        let wm = self.write(wm, status.clone()).await?;
        let ending = Ending {
            phase: MigrationPhase::Failed,
            reason: conditions::HOOK_FAILED,
            message: format!("the import hook failed: {message}"),
            intent: None,
            refusal: false,
        };
        self.roll_back(&wm, ending).await
    }

    /// A created StatefulSet: lost is a failure; not yet rolled out, wait
    /// (until the deadline at the latest); rolled out, `None`, go on to
    /// the checks before `Ready`.
    pub(super) async fn stateful_set_progress(
        &self,
        wm: &WorkloadMigration,
        status: &WorkloadMigrationStatus,
    ) -> Result<Option<Step>> {
        let kind = WorkloadKind::StatefulSet;
        let recorded = status.applied.iter().find(|o| o.kind == kind.as_str());
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.ctx.client.clone(),
            &wm.spec.target_namespace,
            &kind.resource(),
        );
        let found = match recorded {
            Some(r) => api
                .get_opt(&r.name)
                .await
                .map_err(|e| Error::kube("read the created workload", e))?
                .filter(|o| o.uid().as_deref() == Some(r.uid.as_str())),
            None => None,
        };
        let Some(found) = found else {
            let ending = Ending {
                phase: MigrationPhase::Failed,
                reason: conditions::WORKLOAD_LOST,
                message: "the created StatefulSet was deleted or replaced before it was ready"
                    .into(),
                intent: None,
                refusal: false,
            };
            return self.roll_back(wm, ending).await.map(Some);
        };
        let value = serde_json::to_value(&found).unwrap_or_default();
        if workload::is_rolled_out(&value) {
            return Ok(None);
        }
        Ok(Some(Step::Done(Action::requeue(
            self.ctx.config.poll_interval,
        ))))
    }
}

/// Whether `kind` is what a stateful move creates before its import.
pub(super) fn created_before_import(kind: &str) -> bool {
    kind == CLAIM
}
