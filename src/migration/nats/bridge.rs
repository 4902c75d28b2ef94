//! The receiver's NATS side, part one: it consumes this cluster's request
//! subject and materialises each verified request as a `WorkloadMigration`
//! in the sending peer's inbox namespace in this cluster, with this
//! cluster's own credential, so the receiver controller handles it exactly
//! as one written there through the Kubernetes API.
//!
//! It must never write anything for a message before the message's
//! signature verifies against the keys of the `ClusterPeer` it claims to
//! come from, and that peer uses transport `Nats`; and it acks a message
//! only once what it asked for is stored by the API server. Every write is
//! idempotent: a request is created once (by name, the same request id),
//! an intent is applied only when its sequence is above the request's, so
//! redeliveries, duplicates and stale or reordered messages change nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use async_nats::jetstream::{AckKind, Message};
use futures::StreamExt;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};

use super::link::NatsLink;
use super::subjects::{REQUEST_STREAM, request_consumer, request_filter, tokens_after};
use super::wire::Wire;
use crate::crd::{Intent, MigrationRole, Transport, WorkloadMigration, WorkloadMigrationSpec};
use crate::migration::envelope::{KeyRing, reason, verify_intent, verify_request};
use crate::migration::error::{Error, Result, is_already_exists, is_conflict, is_not_found};
use crate::migration::metrics::ReceiverMetrics;
use crate::migration::names::{LABEL_MIGRATION, LABEL_ROLE, inbox_namespace};
use crate::peers::{Peer, PeerSet};

/// What the receiver's NATS side needs.
#[derive(Clone)]
pub struct NatsReceiverContext {
    /// This cluster, with the operator's own credential.
    pub client: Client,
    /// The peers: whose keys a message must carry, and who uses NATS.
    pub peers: PeerSet,
    /// The broker.
    pub link: NatsLink,
    /// This cluster's keys (statuses are already signed by the receiver;
    /// the bridge signs nothing itself).
    pub keys: KeyRing,
    /// Refusal counters, shared with the receiver.
    pub metrics: ReceiverMetrics,
    /// Fault injection for tests: the next this many messages are acted on
    /// but not acked, as if the process died between the write and the ack.
    pub skip_acks: Arc<AtomicUsize>,
    /// The last status published per request uid (see `report.rs`).
    pub(crate) reported: Arc<std::sync::Mutex<BTreeMap<String, String>>>,
}

impl NatsReceiverContext {
    /// A context for `client`'s cluster on `link`.
    pub fn new(client: Client, peers: PeerSet, link: NatsLink, keys: KeyRing) -> Self {
        Self {
            client,
            peers,
            link,
            keys,
            metrics: ReceiverMetrics::default(),
            skip_acks: Arc::default(),
            reported: Arc::default(),
        }
    }

    /// The same context counting into `metrics`.
    pub fn with_metrics(mut self, metrics: ReceiverMetrics) -> Self {
        self.metrics = metrics;
        self
    }
}

/// What becomes of one message.
#[derive(Debug)]
enum Verdict {
    /// Done (or nothing to do): ack.
    Done,
    /// Not now: deliver again after the delay.
    Retry(Duration),
    /// Never: terminate it, with the reason logged (and counted as a
    /// refusal for the claimed peer, when it is one).
    Drop {
        reason: &'static str,
        message: String,
    },
}

fn drop_it(reason: &'static str, message: impl Into<String>) -> Verdict {
    Verdict::Drop {
        reason,
        message: message.into(),
    }
}

/// Consumes this cluster's requests until the future is dropped.
pub(crate) async fn run_request_bridge(ctx: Arc<NatsReceiverContext>) {
    loop {
        if let Err(error) = pull_requests(&ctx).await {
            tracing::info!(%error, "request bridge interrupted; retrying");
            tokio::time::sleep(ctx.link.timing().retry_delay).await;
        }
    }
}

async fn pull_requests(ctx: &NatsReceiverContext) -> Result<()> {
    let own = ctx.link.cluster().to_owned();
    let timing = ctx.link.timing().clone();
    let stream = ctx
        .link
        .jetstream()
        .get_stream(REQUEST_STREAM)
        .await
        .map_err(|e| Error::nats(format!("find the stream {REQUEST_STREAM}"), e))?;
    let name = request_consumer(&own);
    let config = pull::Config {
        durable_name: Some(name.clone()),
        filter_subject: request_filter(&own),
        deliver_policy: DeliverPolicy::All,
        ack_policy: AckPolicy::Explicit,
        ack_wait: timing.ack_wait,
        max_deliver: timing.max_deliver,
        backoff: timing.backoff.clone(),
        ..Default::default()
    };
    let consumer = stream
        .get_or_create_consumer(&name, config)
        .await
        .map_err(|e| Error::nats(format!("find or create the consumer {name}"), e))?;
    loop {
        let mut batch = consumer
            .batch()
            .max_messages(16)
            .expires(timing.fetch_wait)
            .messages()
            .await
            .map_err(|e| Error::nats("pull requests", e))?;
        while let Some(message) = batch.next().await {
            let message = message.map_err(|e| Error::nats("pull requests", e))?;
            let verdict = handle(ctx, &message).await;
            settle(ctx, &message, verdict).await?;
        }
    }
}

/// Acks, naks or terminates `message` as `verdict` says.
async fn settle(ctx: &NatsReceiverContext, message: &Message, verdict: Verdict) -> Result<()> {
    let kind = match verdict {
        Verdict::Done => {
            let skip = ctx
                .skip_acks
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if skip.is_ok() {
                tracing::warn!(subject = %message.subject, "fault injection: not acking a message acted on");
                return Ok(());
            }
            // Confirmed by the broker: a lost ack would redeliver, harmlessly.
            return message
                .double_ack()
                .await
                .map_err(|e| Error::nats("ack a request", e));
        }
        Verdict::Retry(delay) => AckKind::Nak(Some(delay)),
        Verdict::Drop {
            reason,
            message: why,
        } => {
            tracing::warn!(subject = %message.subject, reason, "{why}; the message is dropped and nothing was changed");
            if let Some(tokens) = tokens_after(message.subject.as_str(), "ferry.v1.req.", 2) {
                ctx.metrics.count_refusal(tokens[1], reason);
            }
            AckKind::Term
        }
    };
    message
        .ack_with(kind)
        .await
        .map_err(|e| Error::nats("settle a request", e))
}

/// What to do with one message, after checking who sent it.
async fn handle(ctx: &NatsReceiverContext, message: &Message) -> Verdict {
    let own = ctx.link.cluster();
    let retry = retry_delay(ctx, message);
    let Some(tokens) = tokens_after(message.subject.as_str(), "ferry.v1.req.", 2) else {
        return drop_it(
            "BadSubject",
            format!(
                "subject {} is not ferry.v1.req.<target>.<source>",
                message.subject
            ),
        );
    };
    let (to, from) = (tokens[0], tokens[1]);
    if to != own {
        return drop_it(
            "BadSubject",
            format!("subject {} is not for {own}", message.subject),
        );
    }
    let wire = match Wire::from_bytes(&message.payload) {
        Ok(wire) => wire,
        Err(e) => return drop_it("Malformed", format!("not a Ferry message: {e}")),
    };
    if wire.signer() != from {
        return drop_it(
            "SourceMismatch",
            format!("a message claiming {} on {from}'s subject", wire.signer()),
        );
    }
    // The peer controller fills the set shortly after a start.
    let Some(peer) = ctx.peers.get(from) else {
        tracing::info!(
            peer = from,
            "a message from a peer not (yet) known; delivering it again later"
        );
        return Verdict::Retry(retry);
    };
    if peer.spec.transport != Transport::Nats {
        return drop_it(
            "TransportMismatch",
            format!("ClusterPeer {from} does not use transport Nats"),
        );
    }
    let inbox: Api<WorkloadMigration> = Api::namespaced(ctx.client.clone(), &inbox_namespace(from));
    match wire {
        Wire::Request {
            target, name, spec, ..
        } => materialise(&inbox, &peer, own, &target, &name, *spec, retry).await,
        Wire::Intent {
            name,
            request_id,
            intent,
            ..
        } => apply_intent(&inbox, &peer, &name, &request_id, intent, retry).await,
        Wire::Status { .. } => drop_it("Malformed", "a status on a request subject"),
    }
}

/// The delay before the next delivery: doubles with each one, capped.
fn retry_delay(ctx: &NatsReceiverContext, message: &Message) -> Duration {
    let delivered = message.info().map(|i| i.delivered).unwrap_or(1).clamp(1, 8) as u32;
    ctx.link
        .timing()
        .retry_delay
        .saturating_mul(1 << (delivered - 1))
        .min(Duration::from_secs(60))
}

/// Creates the request in the peer's inbox, once it verifies.
async fn materialise(
    inbox: &Api<WorkloadMigration>,
    peer: &Peer,
    own: &str,
    target: &str,
    name: &str,
    mut spec: WorkloadMigrationSpec,
    retry: Duration,
) -> Verdict {
    if let Err(error) = verify_request(&peer.spec.public_keys, &spec) {
        return drop_it(
            reason(&error),
            format!(
                "a request not signed by ClusterPeer {}'s keys: {error}",
                peer.name
            ),
        );
    }
    if target != own || spec.target_cluster != own {
        return drop_it(
            "WrongTarget",
            format!("a request for {}, not {own}", spec.target_cluster),
        );
    }
    if spec.source_cluster != peer.name || spec.role != MigrationRole::Target {
        return drop_it(
            "SourceMismatch",
            format!(
                "a request claiming source {} and role {:?}",
                spec.source_cluster, spec.role
            ),
        );
    }
    if !super::subjects::is_token(name) {
        return drop_it("Malformed", format!("{name:?} is not a request name"));
    }
    spec.transport = Some(Transport::Nats);
    let request_id = spec.request_id.clone();
    let mut object = WorkloadMigration::new(name, spec);
    object.metadata.labels = Some(
        [
            (LABEL_MIGRATION.to_owned(), name.to_owned()),
            (LABEL_ROLE.to_owned(), "target".to_owned()),
        ]
        .into(),
    );
    match inbox.create(&PostParams::default(), &object).await {
        Ok(_) => Verdict::Done,
        Err(e) if is_already_exists(&e) => match inbox.get_opt(name).await {
            Ok(Some(existing)) if existing.spec.request_id == request_id => Verdict::Done,
            Ok(Some(_)) => drop_it(
                "NameConflict",
                format!("request {name} exists for another request id"),
            ),
            Ok(None) | Err(_) => Verdict::Retry(retry),
        },
        Err(e) if is_not_found(&e) => drop_it(
            "InboxMissing",
            format!(
                "this cluster has no inbox namespace {} for the peer",
                inbox_namespace(&peer.name)
            ),
        ),
        Err(e) => {
            tracing::info!(error = %e, name, "cannot create a request yet");
            Verdict::Retry(retry)
        }
    }
}

/// How many times an intent is applied again at once when the request
/// changed between the read and the write (the receiver writes its status
/// meanwhile), before its message is delivered again later.
const CONFLICT_RETRIES: usize = 5;

/// `intent` as a merge patch that replaces the request's intent whole: a
/// field it lacks is removed explicitly, so nothing of the older intent
/// (a progressive move's `step`) stays under the new signature.
fn replacing(intent: &Intent) -> serde_json::Value {
    let mut value = serde_json::to_value(intent).unwrap_or_default();
    for field in ["step", "signature"] {
        if value.get(field).is_none() {
            value[field] = serde_json::Value::Null;
        }
    }
    value
}

/// Applies a newer intent to a request already materialised.
async fn apply_intent(
    inbox: &Api<WorkloadMigration>,
    peer: &Peer,
    name: &str,
    request_id: &str,
    intent: Intent,
    retry: Duration,
) -> Verdict {
    for _ in 0..CONFLICT_RETRIES {
        let request = match inbox.get_opt(name).await {
            Ok(Some(request)) => request,
            // The request may still be on its way (a redelivery overtaken).
            Ok(None) | Err(_) => return Verdict::Retry(retry),
        };
        if request.spec.request_id != request_id {
            return drop_it(
                "Malformed",
                format!("an intent for request id {request_id}, not {name}'s"),
            );
        }
        if let Err(error) = verify_intent(&peer.spec.public_keys, &request.spec, &intent) {
            return drop_it(
                reason(&error),
                format!(
                    "an intent not signed by ClusterPeer {}'s keys: {error}",
                    peer.name
                ),
            );
        }
        let current = request.spec.intent.as_ref().map_or(0, |i| i.sequence);
        if intent.sequence <= current {
            return Verdict::Done; // a duplicate, or overtaken by a newer one
        }
        // The resourceVersion read is the precondition: a concurrent change
        // is a 409, and the next read decides again.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": request.metadata.resource_version},
            "spec": {"intent": replacing(&intent)},
        });
        match inbox
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Verdict::Done,
            Err(e) if is_conflict(&e) => continue,
            Err(e) => {
                tracing::info!(error = %e, name, "cannot apply an intent yet");
                return Verdict::Retry(retry);
            }
        }
    }
    tracing::info!(
        name,
        "the request kept changing under an intent; delivering it again later"
    );
    Verdict::Retry(retry)
}
