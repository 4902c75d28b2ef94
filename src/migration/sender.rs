//! The sender controller: drives each local mirror (role `Source`) from the
//! target's reported phase to `Completed` or `RolledBack`.
//!
//! Level-triggered from the mirror's status: every reconcile reads the
//! target's request through the peer client and takes the next step. The
//! target is polled (a watch across clusters would hold a connection per
//! peer open; a poll at `poll_interval` is cheap and survives outages).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};

use super::error::{Error, Result, is_not_found};
use super::start::{SenderContext, create_target, workload_name};
use super::status::{condition, enter, status_of, write};
use super::{
    ANNOTATION_LAST_MIGRATION, ANNOTATION_MIGRATED_TO, ANNOTATION_MIGRATION,
    ANNOTATION_ORIGINAL_REPLICAS, LABEL_MIGRATION, LABEL_ROLE, SENDER_FIELD_MANAGER, conditions,
};
use crate::crd::{
    MigrationPhase, MigrationRole, SourceAction, WorkloadMigration, find_condition,
    is_condition_true,
};

/// Runs the sender controller until the future is dropped.
pub async fn run_sender(ctx: SenderContext) {
    let api: Api<WorkloadMigration> = Api::all(ctx.client.clone());
    Controller::new(
        api,
        watcher::Config::default().labels(&format!("{LABEL_ROLE}=source")),
    )
    .run(reconcile, error_policy, Arc::new(ctx))
    .for_each(|result| async move {
        if let Err(error) = result {
            tracing::debug!(%error, "sender reconcile failed");
        }
    })
    .await;
}

fn key(wm: &WorkloadMigration) -> String {
    format!("{}/{}", wm.namespace().unwrap_or_default(), wm.name_any())
}

/// The next retry delay for this mirror: base · 2ⁿ, capped.
fn backoff(ctx: &SenderContext, wm: &WorkloadMigration) -> Duration {
    let mut attempts = ctx.attempts.lock().unwrap_or_else(|p| p.into_inner());
    let n = attempts.entry(key(wm)).or_insert(0);
    let delay = ctx
        .config
        .backoff_base
        .saturating_mul(1u32 << (*n).min(16))
        .min(ctx.config.backoff_max);
    *n += 1;
    delay
}

fn forget(ctx: &SenderContext, wm: &WorkloadMigration) {
    ctx.attempts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key(wm));
}

fn error_policy(wm: Arc<WorkloadMigration>, error: &Error, ctx: Arc<SenderContext>) -> Action {
    if error.is_transient() {
        Action::requeue(backoff(&ctx, &wm))
    } else {
        tracing::warn!(%error, migration = %key(&wm), "mirror cannot proceed until it changes");
        Action::await_change()
    }
}

#[tracing::instrument(skip_all, fields(migration = %key(&mirror)))]
async fn reconcile(mirror: Arc<WorkloadMigration>, ctx: Arc<SenderContext>) -> Result<Action> {
    if mirror.spec.role != MigrationRole::Source || status_of(&mirror).phase.is_terminal() {
        forget(&ctx, &mirror);
        return Ok(Action::await_change());
    }
    match step(&mirror, &ctx).await {
        Ok(action) => {
            forget(&ctx, &mirror);
            Ok(action)
        }
        Err(error) if error.is_unreachable() => {
            let delay = backoff(&ctx, &mirror);
            tracing::info!(%error, ?delay, "target peer unreachable; retrying");
            mark_unreachable(&ctx, &mirror, &error).await;
            Ok(Action::requeue(delay))
        }
        Err(error) => Err(error),
    }
}

/// Records `PeerUnreachable=True` on the mirror (best effort: the retry
/// happens whether or not this write succeeds).
async fn mark_unreachable(ctx: &SenderContext, mirror: &WorkloadMigration, error: &Error) {
    let local = local_api(ctx, mirror);
    let Ok(Some(fresh)) = local.get_opt(&mirror.name_any()).await else {
        return;
    };
    let mut status = status_of(&fresh);
    let message = format!(
        "peer {} could not be reached: {}",
        fresh.spec.target_cluster,
        error_chain(error)
    );
    if condition(
        &mut status,
        conditions::PEER_UNREACHABLE,
        true,
        "Unreachable",
        message,
        fresh.metadata.generation,
    ) {
        let _ = write(&local, &fresh, status, SENDER_FIELD_MANAGER).await;
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn local_api(ctx: &SenderContext, wm: &WorkloadMigration) -> Api<WorkloadMigration> {
    Api::namespaced(ctx.client.clone(), &wm.namespace().unwrap_or_default())
}

/// One pass over the protocol from the mirror's persisted state.
async fn step(mirror: &WorkloadMigration, ctx: &SenderContext) -> Result<Action> {
    let target_peer = &mirror.spec.target_cluster;
    let peer = ctx
        .peers
        .any_client(target_peer)
        .ok_or_else(|| Error::PeerUnavailable {
            peer: target_peer.clone(),
        })?;
    let namespace = mirror.namespace().unwrap_or_default();
    let name = mirror.name_any();
    let remote: Api<WorkloadMigration> = Api::namespaced(peer.clone(), &namespace);
    let local = local_api(ctx, mirror);
    let mut mirror = mirror.clone();
    let status = status_of(&mirror);

    if let Some(started) = find_condition(&status.conditions, conditions::ROLLBACK_STARTED)
        .filter(|c| c.status == "True")
    {
        let (reason, message) = (started.reason.clone(), started.message.clone());
        return rollback(&local, &remote, &peer, mirror, &reason, &message).await;
    }
    let committed = status.phase == MigrationPhase::Ready;
    if !committed && jiff::Timestamp::now() > mirror.spec.deadline.0 {
        return rollback(
            &local,
            &remote,
            &peer,
            mirror,
            conditions::DEADLINE_EXCEEDED,
            "the target was not ready by the deadline",
        )
        .await;
    }

    let target = remote
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("read the request in peer {target_peer}"), e))?;
    if is_condition_true(&status.conditions, conditions::PEER_UNREACHABLE) {
        let mut status = status.clone();
        condition(
            &mut status,
            conditions::PEER_UNREACHABLE,
            false,
            "Reachable",
            "the target peer answers",
            mirror.metadata.generation,
        );
        mirror = write(&local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    }

    let Some(target) = target else {
        return match status.phase {
            MigrationPhase::Pending => match create_target(&peer, &mirror).await {
                Ok(()) => Ok(Action::requeue(ctx.config.poll_interval)),
                Err(e) if is_not_found(&e) => {
                    let message =
                        format!("namespace {namespace} does not exist in peer {target_peer}");
                    rollback(
                        &local,
                        &remote,
                        &peer,
                        mirror,
                        conditions::TARGET_NAMESPACE_MISSING,
                        &message,
                    )
                    .await
                }
                Err(e) => Err(Error::kube(
                    format!("create the request in peer {target_peer}"),
                    e,
                )),
            },
            MigrationPhase::Ready => complete(ctx, &local, &remote, mirror, None).await,
            _ => {
                rollback(
                    &local,
                    &remote,
                    &peer,
                    mirror,
                    conditions::TARGET_REQUEST_LOST,
                    "the request disappeared from the target before it was ready",
                )
                .await
            }
        };
    };

    let target_status = status_of(&target);
    match target_status.phase {
        MigrationPhase::Ready => complete(ctx, &local, &remote, mirror, Some(target)).await,
        MigrationPhase::Completed => complete(ctx, &local, &remote, mirror, Some(target)).await,
        MigrationPhase::Failed | MigrationPhase::Rejected | MigrationPhase::RolledBack => {
            let reason = target_status
                .reason
                .clone()
                .unwrap_or_else(|| format!("{:?}", target_status.phase));
            let message = format!(
                "the target reported {:?}: {}",
                target_status.phase,
                target_status.message.clone().unwrap_or_default()
            );
            rollback(&local, &remote, &peer, mirror, &reason, &message).await
        }
        _ if committed => complete(ctx, &local, &remote, mirror, Some(target)).await,
        phase => {
            if status.phase != phase {
                let mut status = status_of(&mirror);
                let reason = target_status
                    .reason
                    .clone()
                    .unwrap_or_else(|| format!("{phase:?}"));
                let message = target_status.message.clone().unwrap_or_default();
                enter(
                    &mut status,
                    phase,
                    &reason,
                    message,
                    mirror.metadata.generation,
                );
                write(&local, &mirror, status, SENDER_FIELD_MANAGER).await?;
            }
            Ok(Action::requeue(ctx.config.poll_interval))
        }
    }
}

/// The target is ready: persist that, act on the source, mark both sides
/// `Completed`. Each step is idempotent, so a restart anywhere repeats
/// nothing harmful.
async fn complete(
    ctx: &SenderContext,
    local: &Api<WorkloadMigration>,
    remote: &Api<WorkloadMigration>,
    mut mirror: WorkloadMigration,
    target: Option<WorkloadMigration>,
) -> Result<Action> {
    let generation = mirror.metadata.generation;
    let dry_run = mirror.spec.dry_run
        || target.as_ref().is_some_and(|t| {
            t.status.as_ref().and_then(|s| s.reason.as_deref()) == Some(conditions::DRY_RUN_PASSED)
        });
    if dry_run {
        let mut status = status_of(&mirror);
        enter(
            &mut status,
            MigrationPhase::Completed,
            conditions::DRY_RUN_PASSED,
            "the target's checks passed; nothing was applied or changed",
            generation,
        );
        write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
        return Ok(Action::await_change());
    }
    if status_of(&mirror).phase != MigrationPhase::Ready {
        let mut status = status_of(&mirror);
        enter(
            &mut status,
            MigrationPhase::Ready,
            "TargetReady",
            "the target reported Ready",
            generation,
        );
        mirror = write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    }
    source_action(ctx, &mirror).await?;
    if let Some(target) = target.filter(|t| !status_of(t).phase.is_terminal()) {
        let mut status = status_of(&target);
        enter(
            &mut status,
            MigrationPhase::Completed,
            conditions::SOURCE_ACTION_DONE,
            "the source performed its action; the move is done",
            target.metadata.generation,
        );
        write(remote, &target, status, SENDER_FIELD_MANAGER).await?;
    }
    let mut status = status_of(&mirror);
    let message = format!(
        "moved to {}; source action {:?} done",
        mirror.spec.target_cluster, mirror.spec.source_action
    );
    enter(
        &mut status,
        MigrationPhase::Completed,
        conditions::SOURCE_ACTION_DONE,
        message,
        generation,
    );
    write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    Ok(Action::await_change())
}

/// Performs `sourceAction` on the local Deployment and records where it
/// went. Done once per migration: the `ferry.dev/migration` annotation
/// names the migration that already acted.
async fn source_action(ctx: &SenderContext, mirror: &WorkloadMigration) -> Result<()> {
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

/// Rolls back: persist the decision, mark the target `RolledBack`, delete
/// what the receiver applied, mark the mirror `RolledBack`. The source is
/// never touched.
async fn rollback(
    local: &Api<WorkloadMigration>,
    remote: &Api<WorkloadMigration>,
    peer: &Client,
    mut mirror: WorkloadMigration,
    reason: &str,
    message: &str,
) -> Result<Action> {
    let generation = mirror.metadata.generation;
    let name = mirror.name_any();
    let namespace = mirror.namespace().unwrap_or_default();
    let mut status = status_of(&mirror);
    if condition(
        &mut status,
        conditions::ROLLBACK_STARTED,
        true,
        reason,
        message,
        generation,
    ) {
        mirror = write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    }
    let target_peer = &mirror.spec.target_cluster;
    let target = remote
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("read the request in peer {target_peer}"), e))?;
    if let Some(target) = target.filter(|t| !status_of(t).phase.is_terminal()) {
        let mut status = status_of(&target);
        enter(
            &mut status,
            MigrationPhase::RolledBack,
            reason,
            message,
            target.metadata.generation,
        );
        write(remote, &target, status, SENDER_FIELD_MANAGER).await?;
    }
    delete_applied(peer, &namespace, &name).await?;
    let mut status = status_of(&mirror);
    enter(
        &mut status,
        MigrationPhase::RolledBack,
        reason,
        format!("{message}; the target copy was removed and the source left as it was"),
        generation,
    );
    write(local, &mirror, status, SENDER_FIELD_MANAGER).await?;
    Ok(Action::await_change())
}

/// Deletes the Deployments, ConfigMaps and Secrets labelled with the
/// migration in `namespace` of `client`'s cluster.
pub(crate) async fn delete_applied(
    client: &Client,
    namespace: &str,
    migration: &str,
) -> Result<()> {
    let selector = ListParams::default().labels(&format!("{LABEL_MIGRATION}={migration}"));
    delete_labelled::<Deployment>(client, namespace, &selector).await?;
    delete_labelled::<ConfigMap>(client, namespace, &selector).await?;
    delete_labelled::<Secret>(client, namespace, &selector).await?;
    Ok(())
}

async fn delete_labelled<K>(client: &Client, namespace: &str, selector: &ListParams) -> Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(selector)
        .await
        .map_err(|e| Error::kube("list the applied copies", e))?;
    for object in list.items {
        match api
            .delete(&object.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::kube("delete an applied copy", e)),
        }
    }
    Ok(())
}
