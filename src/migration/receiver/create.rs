//! The receiver's creating steps: an accepted request's objects are
//! created (Secrets opened only now), and the workload is followed until it
//! is available.
//!
//! Nothing here writes to an object that exists already: creation goes
//! through `applied::Move`, which refuses a foreign name.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::Value;

use super::lifecycle::publish;
use super::steps::{Ending, Request, Step, name_conflict};
use crate::crd::{MigrationPhase, StepProgress, WorkloadMigration, WorkloadMigrationStatus};
use crate::migration::envelope;
use crate::migration::error::{Error, Result};
use crate::migration::names::{
    ANNOTATION_LAST_MIGRATION, ANNOTATION_MIGRATED_FROM, ANNOTATION_PLACEMENT,
    ANNOTATION_REQUEST_ID, conditions,
};
use crate::migration::progressive::plan;
use crate::migration::sanitize::Objection;
use crate::migration::sealed;
use crate::migration::status::{condition, enter, status_of};
use crate::migration::workload::{self, WorkloadKind};

use super::stateful::{Import, created_before_import};

impl Request<'_> {
    /// An accepted request: check it again (the peer's rules may have
    /// changed) and create what it carries, never over a foreign object.
    pub(super) async fn on_accepted(&self, wm: &WorkloadMigration) -> Result<Step> {
        let checked = match self.check(wm).await? {
            Ok(checked) => checked,
            Err(objection) => return self.refuse(wm, objection).await,
        };
        let mut status = status_of(wm);
        if status.progress.is_none()
            && let Ok(Some(plan)) = plan(&wm.spec)
        {
            status.progress = Some(StepProgress {
                step: 1,
                steps: plan.steps(),
                target_replicas: plan.level(1),
                ..StepProgress::default()
            });
        }
        // An autoscaler would scale a progressive move's target past its
        // step: it is created with the last step (`create_autoscalers`).
        let deferring = status.progress.as_ref().is_some_and(|p| p.step < p.steps);
        // A stateful move: the claims first, then the import fills them,
        // and only then the rest.
        if let Some(ended) = self
            .create_missing(
                wm,
                &mut status,
                checked.objects.clone(),
                created_before_import,
            )
            .await?
        {
            return Ok(ended);
        }
        if let Import::Wait(step) = self.import(wm, &mut status).await? {
            return Ok(step);
        }
        let wanted = |kind: &str| !(deferring && kind == AUTOSCALER);
        if let Some(ended) = self
            .create_missing(wm, &mut status, checked.objects, wanted)
            .await?
        {
            return Ok(ended);
        }
        let message = "the workload is created and starting";
        enter(
            &mut status,
            MigrationPhase::Progressing,
            "Applied",
            message,
            wm.metadata.generation,
        );
        let next = self.write(wm, status).await?;
        publish(self.ctx, wm, false, "Applied", message).await;
        Ok(Step::Next(Box::new(next)))
    }

    /// Creates each of `objects` (checked, in creation order) that `wanted`
    /// takes and `status.applied` does not list yet, recording each by uid.
    /// Secrets are opened only now. `Some`: the move ended instead (a name
    /// conflict, a Secret that does not open, an object the API server
    /// refuses).
    async fn create_missing(
        &self,
        wm: &WorkloadMigration,
        status: &mut WorkloadMigrationStatus,
        objects: Vec<(&'static str, Value)>,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Option<Step>> {
        let uid = wm.uid().unwrap_or_default();
        let mover = self.mover(wm, &uid);
        let mut secret_index = 0;
        for (kind, mut object) in objects {
            // The Secrets' place among the request's Secrets, skipped or not.
            let index = secret_index;
            if kind == "Secret" {
                secret_index += 1;
            }
            if !wanted(kind) {
                continue;
            }
            if kind == "Secret" {
                match self.open_secret(wm, index) {
                    Ok(data) => {
                        for (field, value) in data {
                            object[field] = value;
                        }
                    }
                    Err(objection) => {
                        return Ok(Some(self.refuse_with(wm, status.clone(), objection).await?));
                    }
                }
            }
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if status
                .applied
                .iter()
                .any(|o| o.kind == kind && o.name == name)
            {
                continue;
            }
            if WorkloadKind::named(kind).is_some() {
                self.annotate_copy(wm, &mut object);
                if let Some(progress) = &mut status.progress {
                    // A progressive move starts with the first step's replicas.
                    object["spec"]["replicas"] = progress.target_replicas.into();
                    progress.ready_replicas = 0;
                }
            }
            match mover.create(kind, object).await {
                Ok(Some(uid)) => status.applied.push(crate::crd::AppliedObject {
                    kind: kind.to_owned(),
                    name,
                    uid,
                }),
                Ok(None) => {
                    let objection = name_conflict(kind, &wm.spec.target_namespace, &name);
                    return Ok(Some(self.refuse_with(wm, status.clone(), objection).await?));
                }
                Err(Error::Kube {
                    source: kube::Error::Api(s),
                    ..
                }) if s.is_invalid() => {
                    let ending = Ending {
                        phase: MigrationPhase::Failed,
                        reason: "ApplyInvalid",
                        message: format!("the API server refused the {kind} {name}: {}", s.message),
                        intent: None,
                        refusal: false,
                    };
                    let wm = self.write(wm, status.clone()).await?;
                    return Ok(Some(self.roll_back(&wm, ending).await?));
                }
                Err(e) => {
                    // Keep what was created so far on record, then retry.
                    self.write(wm, status.clone()).await?;
                    return Err(e);
                }
            }
        }
        Ok(None)
    }

    /// The plaintext of the travelling Secret at `index`, opened with this
    /// cluster's keys only now, as it is created.
    fn open_secret(
        &self,
        wm: &WorkloadMigration,
        index: usize,
    ) -> Result<serde_json::Map<String, Value>, Objection> {
        let keys = self.ctx.keys.get().ok_or_else(|| {
            Objection::new("KeysNotLoaded", "this cluster's keys are not loaded yet")
        })?;
        sealed::open_secret(&keys, &wm.spec, index).map_err(|error| {
            Objection::new(
                envelope::reason(&error),
                format!("spec.secrets[{index}].sealedData does not open: {error}"),
            )
        })
    }

    /// The annotations the target copy carries: where it came from, for
    /// which request, and when it was accepted (the guardrails' cooldown).
    fn annotate_copy(&self, wm: &WorkloadMigration, object: &mut Value) {
        let accepted = status_of(wm)
            .accepted_time
            .map(|t| t.0)
            .unwrap_or_else(jiff::Timestamp::now);
        let annotations = &mut object["metadata"]["annotations"];
        annotations[ANNOTATION_MIGRATED_FROM] = self.peer.clone().into();
        annotations[ANNOTATION_REQUEST_ID] = wm.spec.request_id.clone().into();
        annotations[ANNOTATION_LAST_MIGRATION] = accepted.to_string().into();
        if let Some(partial) = wm.spec.partial {
            annotations[ANNOTATION_PLACEMENT] = format!(
                "{} of {} replicas here, {} in {}",
                partial.replicas,
                partial.of,
                partial.of - partial.replicas,
                self.peer
            )
            .into();
        }
    }

    /// The workload is created: wait until it is available, then report `Ready`.
    pub(super) async fn on_progressing(&self, wm: &WorkloadMigration) -> Result<Step> {
        let status = status_of(wm);
        if workload::kind_of(&wm.spec.workload) == WorkloadKind::StatefulSet {
            if let Some(step) = self.stateful_set_progress(wm, &status).await? {
                return Ok(step);
            }
            return self.report_ready(wm, status).await;
        }
        let recorded = status.applied.iter().find(|o| o.kind == "Deployment");
        let deployments: Api<Deployment> =
            Api::namespaced(self.ctx.client.clone(), &wm.spec.target_namespace);
        let deployment = match recorded {
            Some(r) => deployments
                .get_opt(&r.name)
                .await
                .map_err(|e| Error::kube("read the created workload", e))?
                .filter(|d| d.uid().as_deref() == Some(r.uid.as_str())),
            None => None,
        };
        let Some(deployment) = deployment else {
            let ending = Ending {
                phase: MigrationPhase::Failed,
                reason: conditions::WORKLOAD_LOST,
                message: "the created Deployment was deleted or replaced before it was ready"
                    .into(),
                intent: None,
                refusal: false,
            };
            return self.roll_back(wm, ending).await;
        };
        let mut status = status;
        if let Some(progress) = &mut status.progress {
            let wanted = progress.target_replicas;
            if deployment.spec.replicas != Some(wanted) {
                scale(&deployments, &deployment, wanted).await?;
                return Ok(Step::Done(Action::requeue(self.ctx.config.poll_interval)));
            }
            if is_available(&deployment) {
                progress.ready_replicas = ready_replicas(&deployment);
            }
            if progress.step < progress.steps {
                return self.on_step(wm, status, &deployment).await;
            }
            if is_available(&deployment)
                && let Some(step) = self.create_autoscalers(wm, &mut status).await?
            {
                return Ok(step);
            }
        }
        if !is_available(&deployment) {
            // Wake at the deadline at the latest: the receiver enforces it.
            let until_deadline = deadline_left(wm).max(std::time::Duration::from_millis(10));
            let wait = self.ctx.config.poll_interval.min(until_deadline);
            return Ok(Step::Done(Action::requeue(wait)));
        }
        self.report_ready(wm, status).await
    }

    /// The workload is rolled out: report `Ready` once every moved Service
    /// has a ready endpoint, exporting the Services where the Multi-Cluster
    /// Services API is served.
    async fn report_ready(
        &self,
        wm: &WorkloadMigration,
        mut status: WorkloadMigrationStatus,
    ) -> Result<Step> {
        if let Some(service) = self.service_without_endpoints(wm, &status).await? {
            // The sender takes the source down on Ready: not while the
            // moved Service would route nowhere.
            let message =
                format!("the replicas are available; Service {service} has no ready endpoint yet");
            if status.reason.as_deref() != Some(conditions::WAITING_FOR_ENDPOINTS) {
                enter(
                    &mut status,
                    MigrationPhase::Progressing,
                    conditions::WAITING_FOR_ENDPOINTS,
                    &message,
                    wm.metadata.generation,
                );
                self.write(wm, status).await?;
                publish(
                    self.ctx,
                    wm,
                    false,
                    conditions::WAITING_FOR_ENDPOINTS,
                    &message,
                )
                .await;
            }
            let until_deadline = deadline_left(wm).max(std::time::Duration::from_millis(10));
            return Ok(Step::Done(Action::requeue(
                self.ctx.config.poll_interval.min(until_deadline),
            )));
        }
        let foreign = self.export_services(wm, &mut status).await?;
        let mut message = "available replicas reached the desired count".to_owned();
        if !foreign.is_empty() {
            message.push_str(&format!(
                "; not exported, a ServiceExport not created by this move holds the name: {}",
                foreign.join(", ")
            ));
        }
        enter(
            &mut status,
            MigrationPhase::Ready,
            "Available",
            &message,
            wm.metadata.generation,
        );
        let next = self.write(wm, status).await?;
        publish(self.ctx, wm, false, "Ready", &message).await;
        Ok(Step::Next(Box::new(next)))
    }
}

impl Request<'_> {
    /// A progressive move below its last step: report `StepReady` once the
    /// step's replicas are available; the sender then shrinks the source
    /// and asks for the next step (or, rolling back, the one before).
    async fn on_step(
        &self,
        wm: &WorkloadMigration,
        mut status: WorkloadMigrationStatus,
        deployment: &Deployment,
    ) -> Result<Step> {
        if !is_available(deployment) {
            let until_deadline = deadline_left(wm).max(std::time::Duration::from_millis(10));
            let wait = self.ctx.config.poll_interval.min(until_deadline);
            return Ok(Step::Done(Action::requeue(wait)));
        }
        let Some(progress) = &status.progress else {
            return Ok(Step::Done(Action::await_change()));
        };
        let message = format!(
            "step {} of {}: {} replicas available",
            progress.step, progress.steps, progress.target_replicas
        );
        let unchanged = status.reason.as_deref() == Some(conditions::STEP_READY)
            && wm.status.as_ref().and_then(|s| s.progress.as_ref()) == Some(progress);
        if unchanged {
            return Ok(Step::Done(Action::await_change()));
        }
        enter(
            &mut status,
            MigrationPhase::Progressing,
            conditions::STEP_READY,
            &message,
            wm.metadata.generation,
        );
        // From here on the sender may shrink the source: the receiver keeps
        // what it created until the sender says otherwise (`interrupt`).
        condition(
            &mut status,
            conditions::STEP_READY,
            true,
            conditions::STEP_READY,
            "a step was reported ready; the source may have shrunk, so this copy stays until the sender asks otherwise",
            wm.metadata.generation,
        );
        let next = self.write(wm, status).await?;
        publish(self.ctx, wm, false, conditions::STEP_READY, &message).await;
        Ok(Step::Next(Box::new(next)))
    }
}

/// The kind a progressive move creates only with its last step.
const AUTOSCALER: &str = "HorizontalPodAutoscaler";

impl Request<'_> {
    /// A progressive move at its last step: the autoscalers that travelled
    /// are created now, like the rest of the move's objects. `Some`: the
    /// move was refused instead.
    async fn create_autoscalers(
        &self,
        wm: &WorkloadMigration,
        status: &mut WorkloadMigrationStatus,
    ) -> Result<Option<Step>> {
        let missing = wm.spec.dependents.iter().any(|d| {
            d.get("kind").and_then(Value::as_str) == Some(AUTOSCALER)
                && !status.applied.iter().any(|o| {
                    o.kind == AUTOSCALER
                        && Some(o.name.as_str())
                            == d.pointer("/metadata/name").and_then(Value::as_str)
                })
        });
        if !missing {
            return Ok(None);
        }
        let checked = match self.check(wm).await? {
            Ok(checked) => checked,
            Err(objection) => {
                return Ok(Some(self.refuse_with(wm, status.clone(), objection).await?));
            }
        };
        self.create_missing(wm, status, checked.objects, |kind| kind == AUTOSCALER)
            .await
    }
}

/// Sets the replicas of the Deployment this move created.
async fn scale(api: &Api<Deployment>, deployment: &Deployment, replicas: i32) -> Result<()> {
    let name = deployment.name_any();
    // The uid makes the patch fail rather than touch a Deployment that
    // replaced the move's own under the same name.
    let patch = serde_json::json!({
        "metadata": {"uid": deployment.uid()},
        "spec": {"replicas": replicas},
    });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("scale the created Deployment {name}"), e))?;
    Ok(())
}

/// The Deployment's ready replicas.
fn ready_replicas(deployment: &Deployment) -> i32 {
    deployment
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

/// Time left until the request's deadline.
fn deadline_left(wm: &WorkloadMigration) -> std::time::Duration {
    wm.spec
        .deadline
        .0
        .duration_since(jiff::Timestamp::now())
        .try_into()
        .unwrap_or(std::time::Duration::ZERO)
}

/// Whether the Deployment's current generation is rolled out with every
/// desired replica available.
fn is_available(deployment: &Deployment) -> bool {
    let desired = deployment.spec.replicas.unwrap_or(1);
    let Some(status) = &deployment.status else {
        return false;
    };
    let observed = status.observed_generation.unwrap_or(0);
    observed >= deployment.metadata.generation.unwrap_or(0)
        && status.updated_replicas.unwrap_or(0) >= desired
        && status.available_replicas.unwrap_or(0) >= desired
}
