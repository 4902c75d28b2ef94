//! The receiver's phase machine for one request: each handler reads the
//! persisted phase, does one step in this cluster and persists the next
//! phase before anything else happens.
//!
//! Every removal goes through [`Request::roll_back`], which deletes only
//! the uids recorded in status (or objects carrying this request's uid);
//! nothing here writes to an object the move did not create.

use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::ReceiverContext;
use super::check::{Checked, Rules, check, content_digest, wanted_names};
use super::lifecycle::{
    clear_sealed_data, drop_finalizer, ensure_finalizer, has_finalizer, on_finished, publish,
};
use crate::admission::Usage;
use crate::crd::{IntentAction, MigrationPhase, WorkloadMigration};
use crate::migration::applied::{Existing, Move};
use crate::migration::envelope::{self, MAX_CLOCK_SKEW, sign_status, verify_intent};
use crate::migration::error::{Error, Result};
use crate::migration::names::{RECEIVER_FIELD_MANAGER, conditions};
use crate::migration::progressive::plan;
use crate::migration::sanitize::{Objection, reasons};
use crate::migration::sealed::{holds_sealed_data, verify_sealed_data};
use crate::migration::status::{enter, status_of, write};
use crate::trust::check_fresh;

/// One request being handled: its API (its inbox), the receiver, and the
/// peer whose inbox it is in (the only sender identity the receiver uses).
pub(super) struct Request<'a> {
    pub api: Api<WorkloadMigration>,
    pub ctx: &'a ReceiverContext,
    pub peer: String,
}

/// What a phase's handler leaves to do.
pub(super) enum Step {
    /// The request moved to another phase (this is it as written).
    Next(Box<WorkloadMigration>),
    /// Stop here with this action.
    Done(Action),
}

/// How a rollback ends.
pub(super) struct Ending<'a> {
    pub phase: MigrationPhase,
    pub reason: &'a str,
    pub message: String,
    /// The intent sequence acted on, if an intent caused it.
    pub intent: Option<i64>,
    /// Count it as a refusal (metric and Warning Event).
    pub refusal: bool,
}

impl Request<'_> {
    pub(super) async fn reconcile(&self, mut wm: WorkloadMigration) -> Result<Action> {
        if wm.metadata.deletion_timestamp.is_some() {
            return self.on_deleted(&wm).await;
        }
        if status_of(&wm).phase.is_terminal() {
            return on_finished(&self.api, self.ctx, &wm).await;
        }
        wm = ensure_finalizer(&self.api, wm).await?;
        loop {
            if status_of(&wm).phase.is_terminal() {
                return on_finished(&self.api, self.ctx, &wm).await;
            }
            match self.step(&wm).await? {
                Step::Next(next) => wm = *next,
                Step::Done(action) => return Ok(action),
            }
        }
    }

    async fn step(&self, wm: &WorkloadMigration) -> Result<Step> {
        let phase = status_of(wm).phase;
        if phase == MigrationPhase::Pending {
            return self.on_pending(wm).await;
        }
        if let Some(step) = self.interrupt(wm).await? {
            return Ok(step);
        }
        let created = matches!(phase, MigrationPhase::Progressing | MigrationPhase::Ready);
        if created && holds_sealed_data(&wm.spec) {
            // The Secrets exist here: their ciphertext has no further use.
            let cleared = clear_sealed_data(&self.api, wm).await?;
            return Ok(Step::Next(Box::new(cleared)));
        }
        match phase {
            MigrationPhase::Accepted => self.on_accepted(wm).await,
            MigrationPhase::Progressing => self.on_progressing(wm).await,
            _ => Ok(Step::Done(Action::await_change())),
        }
    }

    /// Writes `status` signed with this cluster's keys: the sender acts on
    /// no status it cannot verify.
    pub(super) async fn write(
        &self,
        wm: &WorkloadMigration,
        mut status: crate::crd::WorkloadMigrationStatus,
    ) -> Result<WorkloadMigration> {
        let keys = self.ctx.keys.get().ok_or(Error::KeysNotLoaded)?;
        sign_status(&keys, &wm.spec, &mut status).map_err(|source| Error::Untrusted {
            what: "cannot sign the status".into(),
            source,
        })?;
        write(&self.api, wm, status, RECEIVER_FIELD_MANAGER).await
    }

    /// The request must be fresh: issued now (within the clock skew) and
    /// not past its deadline.
    fn fresh(&self, wm: &WorkloadMigration) -> Result<(), Objection> {
        let now = jiff::Timestamp::now();
        let issued = wm.spec.issued_at.as_ref().map_or(now, |t| t.0);
        check_fresh(issued, wm.spec.deadline.0, now, MAX_CLOCK_SKEW).map_err(|error| {
            Objection::new(
                envelope::reason(&error),
                format!("spec.issuedAt/deadline: {error}"),
            )
        })
    }

    pub(super) async fn check(&self, wm: &WorkloadMigration) -> Result<Result<Checked, Objection>> {
        let peer = self.ctx.peers.get(&self.peer);
        let rules = Rules {
            operator_namespace: self.ctx.config.operator_namespace.as_deref(),
            usage: self.usage(wm).await?,
        };
        Ok(check(wm, &self.peer, peer.as_ref(), &rules))
    }

    /// What the peer already runs here through its other requests (those
    /// accepted and not ended by a refusal or a rollback), for its total
    /// caps: replicas, CPU and memory, counted as admission counts them.
    async fn usage(&self, wm: &WorkloadMigration) -> Result<Usage> {
        let requests = self
            .api
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list the inbox for the peer's usage", e))?;
        Ok(requests
            .items
            .iter()
            .filter(|r| r.metadata.uid != wm.metadata.uid)
            .filter(|r| {
                matches!(
                    status_of(r).phase,
                    MigrationPhase::Accepted
                        | MigrationPhase::Progressing
                        | MigrationPhase::Ready
                        | MigrationPhase::Completed
                )
            })
            .map(|r| crate::admission::demand(&r.spec.workload))
            .fold(Usage::default(), |total, d| Usage {
                replicas: total.replicas.saturating_add(d.replicas),
                cpu_millis: total.cpu_millis.saturating_add(d.cpu_millis),
                memory_bytes: total.memory_bytes.saturating_add(d.memory_bytes),
            }))
    }

    /// The peer's rate limit: each new request takes one token, once; a
    /// pass retried after a transient failure takes none.
    fn rate_limit(&self, wm: &WorkloadMigration) -> Result<(), Objection> {
        let Some(peer) = self.ctx.peers.get(&self.peer) else {
            return Ok(()); // refused as unknown by the checks
        };
        let uid = wm.metadata.uid.as_deref().unwrap_or_default();
        let mut charged = self.ctx.charged.lock().unwrap_or_else(|p| p.into_inner());
        if !uid.is_empty() && !charged.first_time(uid) {
            return Ok(());
        }
        let mut limiter = self.ctx.limiter.lock().unwrap_or_else(|p| p.into_inner());
        let admitted = limiter.admit(
            &self.peer,
            &peer.spec.admission.rate_limit,
            std::time::Instant::now(),
        );
        if admitted.is_err() {
            charged.forget(uid);
        }
        admitted.map_err(|v| Objection::new(v.reason, v.message))
    }

    pub(super) fn mover<'m>(&'m self, wm: &'m WorkloadMigration, uid: &'m str) -> Move<'m> {
        Move {
            client: &self.ctx.client,
            namespace: &wm.spec.target_namespace,
            migration: wm.metadata.name.as_deref().unwrap_or_default(),
            request_uid: uid,
        }
    }

    /// A new request: make room for it in the inbox, check it, then refuse
    /// it, end a dry run, or accept it.
    async fn on_pending(&self, wm: &WorkloadMigration) -> Result<Step> {
        if let Some(objection) = self.make_room(wm).await? {
            return self.refuse(wm, objection).await;
        }
        let checked = self.rate_limit(wm).and(self.check(wm).await?);
        let checked = match checked.and_then(|c| self.fresh(wm).map(|()| c)) {
            Ok(checked) => checked,
            Err(objection) => return self.refuse(wm, objection).await,
        };
        if let Some(objection) = self.preflight(wm, &checked).await? {
            return self.refuse(wm, objection).await;
        }
        let mut status = status_of(wm);
        let generation = wm.metadata.generation;
        if wm.spec.dry_run {
            let message = "dry run: every check passed; nothing was applied";
            enter(
                &mut status,
                MigrationPhase::Completed,
                conditions::DRY_RUN_PASSED,
                message,
                generation,
            );
            self.write(wm, status).await?;
            publish(self.ctx, wm, false, conditions::DRY_RUN_PASSED, message).await;
            return Ok(Step::Done(Action::await_change()));
        }
        status.accepted_digest = Some(content_digest(&wm.spec));
        status.observed_intent = Some(wm.spec.intent.as_ref().map_or(0, |i| i.sequence));
        let message = format!("accepted from {}", self.peer);
        enter(
            &mut status,
            MigrationPhase::Accepted,
            "Accepted",
            &message,
            generation,
        );
        let next = self.write(wm, status).await?;
        publish(self.ctx, wm, false, "Accepted", &message).await;
        Ok(Step::Next(Box::new(next)))
    }

    /// The target namespace must exist and no foreign object may hold a
    /// name the move needs. `Some`: the refusal.
    async fn preflight(
        &self,
        wm: &WorkloadMigration,
        checked: &Checked,
    ) -> Result<Option<Objection>> {
        let namespace = &wm.spec.target_namespace;
        let namespaces: Api<Namespace> = Api::all(self.ctx.client.clone());
        let found = namespaces
            .get_opt(namespace)
            .await
            .map_err(|e| Error::kube(format!("read namespace {namespace}"), e))?;
        if found.is_none() {
            return Ok(Some(Objection::new(
                reasons::TARGET_NAMESPACE_MISSING,
                format!("spec.targetNamespace: namespace {namespace} does not exist here"),
            )));
        }
        let uid = wm.uid().unwrap_or_default();
        let mover = self.mover(wm, &uid);
        for (kind, object) in &checked.objects {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            if mover.existing(kind, name).await? == Existing::Foreign {
                return Ok(Some(name_conflict(kind, namespace, name)));
            }
        }
        Ok(None)
    }

    /// What ends a request in flight before its phase's own step: a change
    /// of its content, a new intent, or the receiver's own deadline.
    async fn interrupt(&self, wm: &WorkloadMigration) -> Result<Option<Step>> {
        let status = status_of(wm);
        if let Err(error) = verify_sealed_data(&wm.spec) {
            // Sealed data put back after it was cleared, or swapped: not
            // what the sender signed.
            let objection = Objection::new(
                envelope::reason(&error),
                format!("{error}: the request's Secrets are not what its sender signed"),
            );
            return self.refuse(wm, objection).await.map(Some);
        }
        if status
            .accepted_digest
            .as_ref()
            .is_some_and(|d| *d != content_digest(&wm.spec))
        {
            let objection = Objection::new(
                reasons::SPEC_CHANGED,
                "the request's content changed after it was accepted",
            );
            return self.refuse(wm, objection).await.map(Some);
        }
        let ready = holds_the_source(&status);
        // Removing a ClusterPeer stops its traffic: what it has in flight
        // here is rolled back. A Ready move, or a progressive one that
        // reported a step ready, waits for its intent instead, as at the
        // deadline: the sender may already have acted on its source.
        if !ready && !self.peer_exists().await? {
            let ending = Ending {
                phase: MigrationPhase::RolledBack,
                reason: conditions::PEER_REMOVED,
                message: format!(
                    "the ClusterPeer {} was removed; what was created here is removed",
                    self.peer
                ),
                intent: None,
                refusal: false,
            };
            return self.roll_back(wm, ending).await.map(Some);
        }
        let observed = status.observed_intent.unwrap_or(0);
        if let Some(intent) = wm.spec.intent.as_ref().filter(|i| i.sequence > observed) {
            let keys = self
                .ctx
                .peers
                .get(&self.peer)
                .map(|p| p.spec.public_keys)
                .unwrap_or_default();
            if let Err(error) = verify_intent(&keys, &wm.spec, intent) {
                return self
                    .ignore_intent(wm, intent.sequence, &error)
                    .await
                    .map(Some);
            }
            match intent.action {
                IntentAction::RollBack => {
                    let ending = Ending {
                        phase: MigrationPhase::RolledBack,
                        reason: conditions::ROLLBACK_REQUESTED,
                        message:
                            "the sender asked for a rollback; what was created here is removed"
                                .into(),
                        intent: Some(intent.sequence),
                        refusal: false,
                    };
                    return self.roll_back(wm, ending).await.map(Some);
                }
                IntentAction::Complete if status.phase == MigrationPhase::Ready => {
                    let mut status = status;
                    status.observed_intent = Some(intent.sequence);
                    let message = "the source performed its action; the move is done";
                    enter(
                        &mut status,
                        MigrationPhase::Completed,
                        conditions::SOURCE_ACTION_DONE,
                        message,
                        wm.metadata.generation,
                    );
                    let next = self.write(wm, status).await?;
                    publish(self.ctx, wm, false, "Completed", message).await;
                    return Ok(Some(Step::Next(Box::new(next))));
                }
                IntentAction::Proceed
                    if intent.step.is_some()
                        && status.progress.is_some()
                        && matches!(
                            status.phase,
                            MigrationPhase::Progressing | MigrationPhase::Ready
                        ) =>
                {
                    return self.to_step(wm, status, intent).await.map(Some);
                }
                // Proceed asks nothing new; Complete before Ready waits.
                _ => {}
            }
        }
        if !ready && jiff::Timestamp::now() > wm.spec.deadline.0 {
            let ending = Ending {
                phase: MigrationPhase::RolledBack,
                reason: conditions::DEADLINE_EXCEEDED,
                message:
                    "the workload was not ready by the deadline; what was created here is removed"
                        .into(),
                intent: None,
                refusal: false,
            };
            return self.roll_back(wm, ending).await.map(Some);
        }
        Ok(None)
    }

    /// A progressive move's sender asks for another step: up after the
    /// source shrank, or down while it rolls back. The target scales in
    /// `on_progressing` and reports the step ready there.
    async fn to_step(
        &self,
        wm: &WorkloadMigration,
        mut status: crate::crd::WorkloadMigrationStatus,
        intent: &crate::crd::Intent,
    ) -> Result<Step> {
        status.observed_intent = Some(intent.sequence);
        let (Ok(Some(plan)), Some(progress)) = (plan(&wm.spec), status.progress.as_mut()) else {
            let next = self.write(wm, status).await?;
            return Ok(Step::Next(Box::new(next)));
        };
        let step = intent.step.unwrap_or(1).clamp(1, plan.steps());
        progress.step = step;
        progress.target_replicas = plan.level(step);
        progress.ready_replicas = 0;
        let message = format!(
            "step {step} of {}: scaling to {} replicas",
            plan.steps(),
            plan.level(step)
        );
        enter(
            &mut status,
            MigrationPhase::Progressing,
            conditions::STEP_REQUESTED,
            &message,
            wm.metadata.generation,
        );
        let next = self.write(wm, status).await?;
        Ok(Step::Next(Box::new(next)))
    }

    /// Whether the ClusterPeer of the sending cluster still exists, read
    /// from the API server rather than the peer set, which is empty until
    /// the peer controller's first pass after a restart.
    async fn peer_exists(&self) -> Result<bool> {
        let peers: Api<crate::crd::ClusterPeer> = Api::all(self.ctx.client.clone());
        let found = peers
            .list(&kube::api::ListParams::default().fields(&format!("metadata.name={}", self.peer)))
            .await
            .map_err(|e| Error::kube("look up the sending cluster's ClusterPeer", e))?;
        Ok(!found.items.is_empty())
    }

    /// An intent that does not verify is not acted on: its sequence is
    /// recorded (so it is reported once), with a Warning Event and a count.
    async fn ignore_intent(
        &self,
        wm: &WorkloadMigration,
        sequence: i64,
        error: &crate::trust::TrustError,
    ) -> Result<Step> {
        let reason = envelope::reason(error);
        let note = format!(
            "spec.intent: ignored, not signed by ClusterPeer {}'s keys: {error}",
            self.peer
        );
        let mut status = status_of(wm);
        status.observed_intent = Some(sequence);
        let next = self.write(wm, status).await?;
        self.ctx.metrics.count_refusal(&self.peer, reason);
        publish(self.ctx, wm, true, reason, &note).await;
        Ok(Step::Next(Box::new(next)))
    }

    /// Refuses the request: removes anything it created, marks it
    /// `Rejected` with the objection, counts it and publishes a Warning.
    pub(super) async fn refuse(
        &self,
        wm: &WorkloadMigration,
        objection: Objection,
    ) -> Result<Step> {
        self.refuse_with(wm, status_of(wm), objection).await
    }

    pub(super) async fn refuse_with(
        &self,
        wm: &WorkloadMigration,
        status: crate::crd::WorkloadMigrationStatus,
        objection: Objection,
    ) -> Result<Step> {
        let wm = if wm.status.as_ref() != Some(&status) {
            self.write(wm, status).await?
        } else {
            wm.clone()
        };
        let ending = Ending {
            phase: MigrationPhase::Rejected,
            reason: objection.reason,
            message: objection.message,
            intent: None,
            refusal: true,
        };
        self.roll_back(&wm, ending).await
    }

    /// Removes what this move created here (recorded uids, or objects
    /// carrying this request's uid) and ends the request as `ending` says.
    pub(super) async fn roll_back(
        &self,
        wm: &WorkloadMigration,
        ending: Ending<'_>,
    ) -> Result<Step> {
        let mut status = status_of(wm);
        if status.phase != MigrationPhase::Pending {
            let uid = wm.uid().unwrap_or_default();
            self.mover(wm, &uid)
                .remove(&status.applied, &wanted_names(wm))
                .await?;
        }
        if let Some(sequence) = ending.intent {
            status.observed_intent = Some(sequence);
        }
        enter(
            &mut status,
            ending.phase,
            ending.reason,
            &ending.message,
            wm.metadata.generation,
        );
        let next = self.write(wm, status).await?;
        if ending.refusal {
            self.ctx.metrics.count_refusal(&self.peer, ending.reason);
        }
        let warning = ending.phase != MigrationPhase::RolledBack;
        publish(self.ctx, wm, warning, ending.reason, &ending.message).await;
        Ok(Step::Next(Box::new(next)))
    }

    /// The request is being deleted: a move that did not complete is
    /// rolled back first; a completed one keeps its workload.
    async fn on_deleted(&self, wm: &WorkloadMigration) -> Result<Action> {
        if !has_finalizer(wm) {
            return Ok(Action::await_change());
        }
        let status = status_of(wm);
        if status.phase != MigrationPhase::Completed && status.phase != MigrationPhase::Pending {
            let uid = wm.uid().unwrap_or_default();
            self.mover(wm, &uid)
                .remove(&status.applied, &wanted_names(wm))
                .await?;
            let note = "the request was deleted before the move completed; what was created here is removed";
            publish(self.ctx, wm, false, conditions::REQUEST_DELETED, note).await;
        }
        drop_finalizer(&self.api, wm).await?;
        Ok(Action::await_change())
    }
}

/// Whether the sender may already have acted on its source, so that this
/// copy must stay until the sender's intent: the move is `Ready`, or a
/// progressive move reported a step ready (the sender shrinks the source
/// after each), even if it has since been asked to step back.
fn holds_the_source(status: &crate::crd::WorkloadMigrationStatus) -> bool {
    status.phase == MigrationPhase::Ready
        || crate::crd::is_condition_true(&status.conditions, conditions::STEP_READY)
}

pub(super) fn name_conflict(kind: &str, namespace: &str, name: &str) -> Objection {
    Objection::new(
        reasons::NAME_CONFLICT,
        format!(
            "{kind} {namespace}/{name} already exists and was not created by this move; it is left as it is"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{StepProgress, WorkloadMigrationStatus};
    use crate::migration::status::{condition, enter};

    #[test]
    fn a_copy_stays_at_the_deadline_once_the_source_may_have_shrunk() {
        let mut status = WorkloadMigrationStatus {
            progress: Some(StepProgress {
                step: 1,
                steps: 3,
                ..StepProgress::default()
            }),
            ..WorkloadMigrationStatus::default()
        };
        enter(
            &mut status,
            MigrationPhase::Progressing,
            "Applied",
            "",
            None,
        );
        assert!(!holds_the_source(&status), "nothing reported ready yet");
        condition(
            &mut status,
            conditions::STEP_READY,
            true,
            conditions::STEP_READY,
            "",
            None,
        );
        assert!(holds_the_source(&status));
        // Asked back to the first step, the source may still lack a step.
        enter(
            &mut status,
            MigrationPhase::Progressing,
            conditions::STEP_REQUESTED,
            "",
            None,
        );
        assert!(holds_the_source(&status));
        let mut ready = WorkloadMigrationStatus::default();
        enter(&mut ready, MigrationPhase::Ready, "Available", "", None);
        assert!(holds_the_source(&ready));
    }
}
