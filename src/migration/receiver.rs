//! The receiver controller: checks each request (role `Target`) sent to
//! this cluster, applies the workload and reports its readiness.
//!
//! It must never apply anything for a request it refused, for a dry run, or
//! for a request that reached a terminal phase; on `RolledBack` it deletes
//! what it applied.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::PatchParams;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use super::applied::{apply_labelled, delete_applied};
use super::error::{Error, Result};
use super::names::{
    ANNOTATION_LAST_MIGRATION, ANNOTATION_MIGRATED_FROM, ANNOTATION_REQUEST_ID, LABEL_MIGRATION,
    LABEL_ROLE, RECEIVER_FIELD_MANAGER, conditions,
};
use super::sanitize::{
    Objection, privileged_features, reasons, sanitize_config_object, sanitize_workload,
};
use super::status::{enter, status_of, write};
use crate::crd::{MigrationPhase, MigrationRole, WorkloadMigration};
use crate::peers::PeerSet;

/// The receiver's rules and timing.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Accept privileged pod specs (privileged containers, hostNetwork,
    /// hostPID, hostIPC, hostPath volumes). Off by default.
    pub allow_privileged: bool,
    /// Ferry's own namespace: never a target, whatever the peer allows.
    pub operator_namespace: Option<String>,
    /// How often a progressing workload is re-read (its Deployment's watch
    /// events also wake the request).
    pub poll_interval: Duration,
    /// First retry delay after a failure (doubles per attempt).
    pub backoff_base: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            allow_privileged: false,
            operator_namespace: None,
            poll_interval: Duration::from_secs(5),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
        }
    }
}

/// What the receiver needs.
#[derive(Clone)]
pub struct ReceiverContext {
    /// The local cluster (requests arrive and workloads run here).
    pub client: Client,
    /// The peers: who may send what where.
    pub peers: PeerSet,
    /// Rules and timing.
    pub config: ReceiverConfig,
    attempts: Arc<Mutex<BTreeMap<String, u32>>>,
}

impl ReceiverContext {
    /// A receiver context.
    pub fn new(client: Client, peers: PeerSet, config: ReceiverConfig) -> Self {
        Self {
            client,
            peers,
            config,
            attempts: Arc::default(),
        }
    }
}

/// Runs the receiver controller until the future is dropped.
pub async fn run_receiver(ctx: ReceiverContext) {
    let requests: Api<WorkloadMigration> = Api::all(ctx.client.clone());
    let deployments: Api<Deployment> = Api::all(ctx.client.clone());
    Controller::new(
        requests,
        watcher::Config::default().labels(&format!("{LABEL_ROLE}=target")),
    )
    .watches(
        deployments,
        watcher::Config::default().labels(LABEL_MIGRATION),
        |deployment| {
            let name = deployment.labels().get(LABEL_MIGRATION)?.clone();
            Some(ObjectRef::new(&name).within(&deployment.namespace()?))
        },
    )
    .run(reconcile, error_policy, Arc::new(ctx))
    .for_each(|result| async move {
        if let Err(error) = result {
            tracing::debug!(%error, "receiver reconcile failed");
        }
    })
    .await;
}

fn key(wm: &WorkloadMigration) -> String {
    format!("{}/{}", wm.namespace().unwrap_or_default(), wm.name_any())
}

fn error_policy(wm: Arc<WorkloadMigration>, error: &Error, ctx: Arc<ReceiverContext>) -> Action {
    if !error.is_transient() {
        tracing::warn!(%error, migration = %key(&wm), "request cannot proceed until it changes");
        return Action::await_change();
    }
    let mut attempts = ctx.attempts.lock().unwrap_or_else(|p| p.into_inner());
    let n = attempts.entry(key(&wm)).or_insert(0);
    let delay = ctx
        .config
        .backoff_base
        .saturating_mul(1u32 << (*n).min(16))
        .min(ctx.config.backoff_max);
    *n += 1;
    Action::requeue(delay)
}

/// What a request applies, once checked.
struct Checked {
    workload: Value,
    config_maps: Vec<Value>,
    secrets: Vec<Value>,
}

/// The receiver's checks (pure apart from the peer registry read).
fn check(wm: &WorkloadMigration, ctx: &ReceiverContext) -> Result<Checked, Objection> {
    let namespace = wm.namespace().unwrap_or_default();
    let source = &wm.spec.source_cluster;
    let Some(peer) = ctx.peers.get(source) else {
        return Err(Objection::new(
            reasons::UNKNOWN_PEER,
            format!("{source} is not a ClusterPeer of this cluster"),
        ));
    };
    if !peer.spec.accept_from {
        return Err(Objection::new(
            reasons::PEER_NOT_ACCEPTED,
            format!("ClusterPeer {source} does not set acceptFrom"),
        ));
    }
    let own = ctx.config.operator_namespace.as_deref() == Some(namespace.as_str());
    if own || !peer.spec.accepts_into(&namespace) {
        return Err(Objection::new(
            reasons::NAMESPACE_NOT_ALLOWED,
            format!("ClusterPeer {source} may not send workloads into namespace {namespace}"),
        ));
    }
    let mut workload = sanitize_workload(&wm.spec.workload)?;
    workload["metadata"]["namespace"] = namespace.clone().into();
    if !ctx.config.allow_privileged {
        let found = privileged_features(&workload);
        if !found.is_empty() {
            return Err(Objection::new(
                reasons::PRIVILEGED_POD_SPEC,
                format!("the pod spec asks for {}", found.join(", ")),
            ));
        }
    }
    let config = |objects: &[Value], kind: &str| -> Result<Vec<Value>, Objection> {
        objects
            .iter()
            .map(|o| {
                let mut clean = sanitize_config_object(o)?;
                if clean["kind"] != kind {
                    return Err(Objection::new(
                        reasons::UNSUPPORTED_KIND,
                        format!(
                            "spec.{}s holds a {}",
                            kind.to_ascii_lowercase(),
                            clean["kind"]
                        ),
                    ));
                }
                clean["metadata"]["namespace"] = namespace.clone().into();
                Ok(clean)
            })
            .collect()
    };
    Ok(Checked {
        workload,
        config_maps: config(&wm.spec.config_maps, "ConfigMap")?,
        secrets: config(&wm.spec.secrets, "Secret")?,
    })
}

/// What a phase's handler leaves to do.
enum Step {
    /// The request moved to another phase (this is it as written): handle
    /// that one. Boxed: a request is far larger than an [`Action`].
    Next(Box<WorkloadMigration>),
    /// Stop here with this action.
    Done(Action),
}

#[tracing::instrument(skip_all, fields(migration = %key(&wm)))]
async fn reconcile(wm: Arc<WorkloadMigration>, ctx: Arc<ReceiverContext>) -> Result<Action> {
    if wm.spec.role != MigrationRole::Target {
        return Ok(Action::await_change());
    }
    let api: Api<WorkloadMigration> =
        Api::namespaced(ctx.client.clone(), &wm.namespace().unwrap_or_default());
    let mut wm = (*wm).clone();
    let generation = wm.metadata.generation;
    let action = loop {
        let step = match status_of(&wm).phase {
            MigrationPhase::Pending => on_pending(&api, &ctx, &wm, generation).await?,
            MigrationPhase::Accepted => on_accepted(&api, &ctx, &wm, generation).await?,
            MigrationPhase::Progressing => on_progressing(&api, &ctx, &wm, generation).await?,
            MigrationPhase::RolledBack => on_rolled_back(&ctx, &wm).await?,
            MigrationPhase::Ready
            | MigrationPhase::Completed
            | MigrationPhase::Failed
            | MigrationPhase::Rejected => Step::Done(Action::await_change()),
        };
        match step {
            Step::Next(next) => wm = *next,
            Step::Done(action) => break action,
        }
    };
    ctx.attempts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key(&wm));
    Ok(action)
}

/// A new request: check it, then reject it, end a dry run, or accept it.
async fn on_pending(
    api: &Api<WorkloadMigration>,
    ctx: &ReceiverContext,
    wm: &WorkloadMigration,
    generation: Option<i64>,
) -> Result<Step> {
    let mut status = status_of(wm);
    match check(wm, ctx) {
        Err(objection) => reject(api, wm, objection, generation).await,
        Ok(_) if wm.spec.dry_run => {
            enter(
                &mut status,
                MigrationPhase::Completed,
                conditions::DRY_RUN_PASSED,
                "dry run: every check passed; nothing was applied",
                generation,
            );
            write(api, wm, status, RECEIVER_FIELD_MANAGER).await?;
            Ok(Step::Done(Action::await_change()))
        }
        Ok(_) => {
            enter(
                &mut status,
                MigrationPhase::Accepted,
                "Accepted",
                format!("accepted from {}", wm.spec.source_cluster),
                generation,
            );
            Ok(Step::Next(Box::new(
                write(api, wm, status, RECEIVER_FIELD_MANAGER).await?,
            )))
        }
    }
}

/// An accepted request: check it again and apply the workload.
async fn on_accepted(
    api: &Api<WorkloadMigration>,
    ctx: &ReceiverContext,
    wm: &WorkloadMigration,
    generation: Option<i64>,
) -> Result<Step> {
    let checked = match check(wm, ctx) {
        Ok(checked) => checked,
        // The peer's rules changed since acceptance.
        Err(objection) => return reject(api, wm, objection, generation).await,
    };
    let mut status = status_of(wm);
    match apply(&ctx.client, wm, checked).await {
        Ok(()) => {
            enter(
                &mut status,
                MigrationPhase::Progressing,
                "Applied",
                "the workload is applied and starting",
                generation,
            );
            Ok(Step::Next(Box::new(
                write(api, wm, status, RECEIVER_FIELD_MANAGER).await?,
            )))
        }
        Err(Error::Kube {
            source: kube::Error::Api(s),
            ..
        }) if s.is_invalid() => {
            enter(
                &mut status,
                MigrationPhase::Failed,
                "ApplyInvalid",
                format!("the API server refused the workload: {}", s.message),
                generation,
            );
            write(api, wm, status, RECEIVER_FIELD_MANAGER).await?;
            Ok(Step::Done(Action::await_change()))
        }
        Err(e) => Err(e),
    }
}

/// Marks the request `Rejected` with the objection's reason.
async fn reject(
    api: &Api<WorkloadMigration>,
    wm: &WorkloadMigration,
    objection: Objection,
    generation: Option<i64>,
) -> Result<Step> {
    let mut status = status_of(wm);
    enter(
        &mut status,
        MigrationPhase::Rejected,
        objection.reason,
        objection.message,
        generation,
    );
    write(api, wm, status, RECEIVER_FIELD_MANAGER).await?;
    Ok(Step::Done(Action::await_change()))
}

/// The workload is applied: wait until it is available, then report `Ready`.
async fn on_progressing(
    api: &Api<WorkloadMigration>,
    ctx: &ReceiverContext,
    wm: &WorkloadMigration,
    generation: Option<i64>,
) -> Result<Step> {
    let deployments: Api<Deployment> =
        Api::namespaced(ctx.client.clone(), &wm.namespace().unwrap_or_default());
    let name = wm
        .spec
        .workload
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let deployment = deployments
        .get_opt(name)
        .await
        .map_err(|e| Error::kube("read the applied workload", e))?;
    let Some(deployment) = deployment else {
        // Deleted under us: apply again (a re-check first).
        if let Ok(checked) = check(wm, ctx) {
            apply(&ctx.client, wm, checked).await?;
        }
        return Ok(Step::Done(Action::requeue(ctx.config.poll_interval)));
    };
    if !is_available(&deployment) {
        return Ok(Step::Done(Action::requeue(ctx.config.poll_interval)));
    }
    let mut status = status_of(wm);
    enter(
        &mut status,
        MigrationPhase::Ready,
        "Available",
        "available replicas reached the desired count",
        generation,
    );
    write(api, wm, status, RECEIVER_FIELD_MANAGER).await?;
    Ok(Step::Done(Action::await_change()))
}

/// The sender rolled the move back: delete what was applied here (an apply
/// may have raced the sender's own deletion).
async fn on_rolled_back(ctx: &ReceiverContext, wm: &WorkloadMigration) -> Result<Step> {
    delete_applied(
        &ctx.client,
        &wm.namespace().unwrap_or_default(),
        &wm.name_any(),
    )
    .await?;
    Ok(Step::Done(Action::await_change()))
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

/// Server-side applies the ConfigMaps, Secrets and the Deployment with the
/// receiver's field manager and the migration's label.
async fn apply(client: &Client, wm: &WorkloadMigration, checked: Checked) -> Result<()> {
    let namespace = wm.namespace().unwrap_or_default();
    let name = wm.name_any();
    let params = PatchParams::apply(RECEIVER_FIELD_MANAGER).force();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    apply_labelled(
        &config_maps,
        "ConfigMap",
        checked.config_maps,
        &name,
        &params,
    )
    .await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    apply_labelled(&secrets, "Secret", checked.secrets, &name, &params).await?;
    let mut workload = checked.workload;
    let accepted = status_of(wm)
        .accepted_time
        .map(|t| t.0)
        .unwrap_or_else(jiff::Timestamp::now);
    let annotations = &mut workload["metadata"]["annotations"];
    annotations[ANNOTATION_MIGRATED_FROM] = wm.spec.source_cluster.clone().into();
    annotations[ANNOTATION_REQUEST_ID] = wm.spec.request_id.clone().into();
    annotations[ANNOTATION_LAST_MIGRATION] = accepted.to_string().into();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    apply_labelled(&deployments, "Deployment", vec![workload], &name, &params).await
}
