//! A mirror whose target is no longer a ClusterPeer of this cluster:
//! nothing can be asked of that cluster any more, so the move ends
//! `RolledBack` with reason `PeerRemoved`, the source keeps (or gets back)
//! its replicas, and the sender's finalizer goes.
//!
//! A peer is removed only when the API server has no ClusterPeer of that
//! name; a peer missing from the registry alone (the peer controller has
//! not read it yet, after a restart) is unreachable, never removed.

use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource};

use super::SenderContext;
use super::source::restore_source;
use crate::crd::{ClusterPeer, MigrationPhase, WorkloadMigration};
use crate::migration::error::{Error, Result};
use crate::migration::finalizer;
use crate::migration::names::{
    SENDER_FIELD_MANAGER, SENDER_FINALIZER, conditions, inbox_namespace,
};
use crate::migration::status::{enter, status_of, write};

/// Whether this cluster has a ClusterPeer named `peer`, read from the API
/// server.
pub(super) async fn peer_exists(ctx: &SenderContext, peer: &str) -> Result<bool> {
    let peers: Api<ClusterPeer> = Api::all(ctx.client.clone());
    let found = peers
        .list(&kube::api::ListParams::default().fields(&format!("metadata.name={peer}")))
        .await
        .map_err(|e| Error::kube("look up the target's ClusterPeer", e))?;
    Ok(!found.items.is_empty())
}

/// Ends `mirror`, whose target peer was removed: restores the source if
/// this move had acted on it, marks the mirror `RolledBack` (`PeerRemoved`)
/// with a Warning Event, and releases the finalizer.
pub(super) async fn end_for_removed_peer(
    ctx: &SenderContext,
    local: &Api<WorkloadMigration>,
    mirror: &WorkloadMigration,
) -> Result<Action> {
    let peer = &mirror.spec.target_cluster;
    let restored = restore_source(ctx, mirror).await?;
    let committed = status_of(mirror).phase == MigrationPhase::Ready;
    let mut message = format!(
        "the ClusterPeer {peer} was removed here, so the move ends and the source keeps serving"
    );
    if restored {
        message.push_str("; its replicas were restored");
    }
    if committed {
        message.push_str(&format!(
            "; {peer} had reported its copy ready and may still run it until the request {}/{} is deleted there",
            inbox_namespace(&ctx.local_cluster),
            mirror.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    let mut status = status_of(mirror);
    enter(
        &mut status,
        MigrationPhase::RolledBack,
        conditions::PEER_REMOVED,
        &message,
        mirror.metadata.generation,
    );
    let ended = write(local, mirror, status, SENDER_FIELD_MANAGER).await?;
    finalizer::remove(local, &ended, SENDER_FINALIZER).await?;
    let event = Event {
        type_: EventType::Warning,
        reason: conditions::PEER_REMOVED.to_owned(),
        note: Some(message.chars().take(1024).collect()),
        action: "Send".to_owned(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &mirror.object_ref(&())).await {
        tracing::debug!(%error, "cannot publish an Event");
    }
    Ok(Action::await_change())
}
