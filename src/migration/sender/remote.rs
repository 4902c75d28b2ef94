//! Where the sender reads and writes a request in its target: the seam
//! between the protocol and its transports. `Kube` is the request object in
//! this cluster's inbox in the peer's API server; `Nats` is messages through
//! the fleet's broker and the latest status heard from it. The steps above
//! this file do not know which one carries a move.

use kube::api::PostParams;
use kube::{Api, ResourceExt};

use super::SenderContext;
use crate::crd::{Intent, IntentAction, Transport, WorkloadMigration};
use crate::migration::envelope::signed_intent;
use crate::migration::error::{Error, Result, is_already_exists, is_not_found};
use crate::migration::names::inbox_namespace;
use crate::migration::nats::NatsLink;

/// The target end of one move.
// One short-lived value per pass over a mirror: boxing either side buys nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum Remote {
    /// The request object in this cluster's inbox in the peer.
    Kube(Api<WorkloadMigration>),
    /// Messages through the broker.
    Nats(NatsLink),
}

impl Remote {
    /// Whether a request this end created can be read back at once: true
    /// over the Kubernetes API; over NATS a request shows only once the
    /// target's first status arrives.
    pub(super) fn reads_back_at_once(&self) -> bool {
        matches!(self, Remote::Kube(_))
    }

    /// The target end for `peer`, by its `ClusterPeer`'s transport.
    pub(super) fn for_peer(ctx: &SenderContext, peer: &str) -> Result<Self> {
        let unavailable = || Error::PeerUnavailable {
            peer: peer.to_owned(),
        };
        let known = ctx.peers.get(peer).ok_or_else(unavailable)?;
        match known.spec.transport {
            Transport::Kube => {
                let client = known.client.ok_or_else(unavailable)?;
                Ok(Remote::Kube(Api::namespaced(
                    client,
                    &inbox_namespace(&ctx.local_cluster),
                )))
            }
            Transport::Nats => ctx.nats.clone().map(Remote::Nats).ok_or_else(|| {
                Error::NatsConfig {
                    message: format!(
                        "ClusterPeer {peer} uses transport Nats, but the operator runs without --nats-url"
                    ),
                }
            }),
        }
    }

    /// The transport's name, recorded on the mirror.
    pub(super) fn transport(&self) -> Transport {
        match self {
            Remote::Kube(_) => Transport::Kube,
            Remote::Nats(_) => Transport::Nats,
        }
    }

    /// Delivers the signed request `target`; delivering it again is harmless.
    pub(super) async fn create(&self, target: &WorkloadMigration) -> Result<()> {
        match self {
            Remote::Kube(inbox) => match inbox.create(&PostParams::default(), target).await {
                Ok(_) => Ok(()),
                Err(e) if is_already_exists(&e) => Ok(()),
                Err(e) => Err(Error::kube("create the request in the peer", e)),
            },
            Remote::Nats(link) => link.send_request(target).await,
        }
    }

    /// The request of `mirror` as its target holds it, status included.
    pub(super) async fn get(
        &self,
        mirror: &WorkloadMigration,
    ) -> Result<Option<WorkloadMigration>> {
        match self {
            Remote::Kube(inbox) => inbox.get_opt(&mirror.name_any()).await.map_err(|e| {
                Error::kube(
                    format!("read the request in peer {}", mirror.spec.target_cluster),
                    e,
                )
            }),
            Remote::Nats(link) => link.target_view(mirror),
        }
    }

    /// Sends `intent` as the request's new intent; `target` is the request
    /// as last read.
    pub(super) async fn send_intent(
        &self,
        target: &WorkloadMigration,
        intent: Intent,
    ) -> Result<()> {
        match self {
            Remote::Kube(inbox) => {
                let action = intent.action;
                let mut updated = target.clone();
                updated.spec.intent = Some(intent);
                // The resourceVersion read is the precondition: a concurrent
                // change is a 409 and the next pass decides again.
                inbox
                    .replace(&target.name_any(), &PostParams::default(), &updated)
                    .await
                    .map_err(|e| {
                        Error::kube(
                            format!("send {action:?} to peer {}", target.spec.target_cluster),
                            e,
                        )
                    })?;
                Ok(())
            }
            Remote::Nats(link) => link.send_intent(target, intent).await,
        }
    }

    /// Withdraws the request of a mirror deleted mid-flight: the receiver
    /// rolls back what it created. Over the Kubernetes API the request is
    /// deleted (its finalizer rolls it back); over NATS, where only signed
    /// messages count, the sender asks `RollBack`.
    pub(super) async fn withdraw(
        &self,
        ctx: &SenderContext,
        mirror: &WorkloadMigration,
    ) -> Result<()> {
        match self {
            Remote::Kube(inbox) => {
                match inbox.delete(&mirror.name_any(), &Default::default()).await {
                    Ok(_) => Ok(()),
                    Err(e) if is_not_found(&e) => Ok(()),
                    Err(e) => Err(Error::kube(
                        format!(
                            "withdraw the request from peer {}",
                            mirror.spec.target_cluster
                        ),
                        e,
                    )),
                }
            }
            Remote::Nats(link) => {
                let Some(target) = link.target_view(mirror)? else {
                    return Ok(()); // never sent: nothing to withdraw
                };
                let sequence = target.spec.intent.as_ref().map_or(1, |i| i.sequence + 1);
                let keys = ctx.cluster_keys()?;
                let intent =
                    signed_intent(&keys, &target.spec, IntentAction::RollBack, sequence, None)
                        .map_err(|source| Error::Untrusted {
                            what: "cannot sign the intent".into(),
                            source,
                        })?;
                link.send_intent(&target, intent).await
            }
        }
    }
}
