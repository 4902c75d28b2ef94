//! The receiver's NATS side, part two: each signed status change of a
//! request that arrived over NATS is published to its sender's status
//! subject, with a message id naming the status, so a repeat (a restart
//! publishes every current status again) is dropped by the stream.
//!
//! It publishes only what the receiver already wrote and signed; it
//! never changes a request.

use std::sync::{Arc, PoisonError};

use futures::StreamExt;
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Api, ResourceExt};
use sha2::{Digest, Sha256};

use super::bridge::NatsReceiverContext;
use super::subjects::{Kind, message_id, status_subject};
use super::wire::Wire;
use crate::crd::{MigrationRole, Transport, WorkloadMigration};
use crate::migration::error::{Error, Result};
use crate::migration::names::inbox_peer;

/// Publishes the statuses of requests that came over NATS until the future
/// is dropped.
pub(crate) async fn run_status_reports(ctx: Arc<NatsReceiverContext>) {
    let requests: Api<WorkloadMigration> = Api::all(ctx.client.clone());
    Controller::new(requests, watcher::Config::default())
        .run(report, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "status report failed");
            }
        })
        .await;
}

fn error_policy(_: Arc<WorkloadMigration>, _: &Error, ctx: Arc<NatsReceiverContext>) -> Action {
    Action::requeue(ctx.link.timing().retry_delay)
}

/// The digest of what a status says, signature included (the same status
/// signed again has the same signature: Ed25519 is deterministic).
fn status_digest(wm: &WorkloadMigration) -> Option<String> {
    let status = wm.status.as_ref()?;
    let signature = status.signature.as_ref()?;
    let bytes = serde_json::to_vec(&(
        status.phase,
        &status.reason,
        status.observed_intent,
        signature,
    ))
    .ok()?;
    Some(hex::encode(&Sha256::digest(&bytes)[..8]))
}

async fn report(wm: Arc<WorkloadMigration>, ctx: Arc<NatsReceiverContext>) -> Result<Action> {
    let namespace = wm.namespace().unwrap_or_default();
    let Some(peer) = inbox_peer(&namespace) else {
        return Ok(Action::await_change());
    };
    if wm.spec.role != MigrationRole::Target || wm.spec.transport != Some(Transport::Nats) {
        return Ok(Action::await_change());
    }
    let Some(digest) = status_digest(&wm) else {
        return Ok(Action::await_change());
    };
    let uid = wm.uid().unwrap_or_default();
    let already = ctx
        .reported
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&uid)
        .is_some_and(|d| *d == digest);
    if already {
        return Ok(Action::await_change());
    }
    let own = ctx.link.cluster().to_owned();
    let name = wm.name_any();
    let wire = Wire::Status {
        source: peer.to_owned(),
        target: own.clone(),
        name: name.clone(),
        request_id: wm.spec.request_id.clone(),
        status: Box::new(wm.status.clone().unwrap_or_default()),
    };
    let id = message_id(&wm.spec.request_id, Kind::Status, &digest);
    ctx.link
        .publish(status_subject(peer, &own, &name), id, &wire)
        .await?;
    ctx.reported
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(uid, digest);
    Ok(Action::await_change())
}
