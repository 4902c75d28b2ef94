//! This cluster's sender side of the NATS transport: it publishes signed
//! requests and intents to a target's subject, and keeps the latest
//! signed status of each of its requests, read from its own durable
//! consumer on the status stream.
//!
//! The statuses kept here are unverified: the sender verifies each one
//! against the target's keys before acting on it, as it does a status read
//! from a peer's API server. An unreachable broker is an error, never an
//! empty answer, so the sender marks the move `PeerUnreachable` and acts on
//! nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use async_nats::connection::State;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, Message};
use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::broadcast;

use super::connect::NatsTiming;
use super::subjects::{
    Kind, STATUS_STREAM, message_id, request_subject, status_consumer, status_filter, tokens_after,
};
use super::wire::Wire;
use crate::crd::{
    Intent, IntentAction, MigrationPhase, MigrationRole, WorkloadMigration, WorkloadMigrationStatus,
};
use crate::migration::error::{Error, Result};
use crate::migration::names::inbox_namespace;

/// Statuses heard and not yet handed to the sender before older ones are
/// dropped; a dropped wake-up costs one poll interval, nothing more.
const ARRIVALS: usize = 1024;

/// The latest status heard for one request.
#[derive(Clone, Debug)]
struct Heard {
    /// Its sequence in the status stream: an older one never replaces it.
    sequence: u64,
    request_id: String,
    status: WorkloadMigrationStatus,
}

#[derive(Default)]
struct Memory {
    /// `(target, name)` → the latest status.
    heard: BTreeMap<(String, String), Heard>,
    /// Request name → the last intent this process published.
    intents: BTreeMap<String, Intent>,
    /// Requests this process published.
    published: BTreeSet<String>,
    /// Request name → the namespace of its mirror, learnt when the sender
    /// asks for a view: where a status heard wakes the sender.
    mirrors: BTreeMap<String, String>,
}

/// This cluster's connection to the fleet's broker, shared by its sender
/// and its receiver. Cheap to clone.
#[derive(Clone)]
pub struct NatsLink {
    client: async_nats::Client,
    js: jetstream::Context,
    cluster: String,
    timing: NatsTiming,
    memory: Arc<Mutex<Memory>>,
    /// The mirror of each request whose newer status just arrived.
    arrivals: broadcast::Sender<ObjectRef<WorkloadMigration>>,
}

impl std::fmt::Debug for NatsLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsLink")
            .field("cluster", &self.cluster)
            .field("state", &self.client.connection_state())
            .finish()
    }
}

impl NatsLink {
    /// A link for this cluster (`cluster`, as its peers call it) over `client`.
    pub fn new(client: async_nats::Client, cluster: impl Into<String>, timing: NatsTiming) -> Self {
        Self {
            js: jetstream::new(client.clone()),
            client,
            cluster: cluster.into(),
            timing,
            memory: Arc::default(),
            arrivals: broadcast::channel(ARRIVALS).0,
        }
    }

    /// This cluster's name.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The NATS client.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    /// Streams, consumers and retries.
    pub fn timing(&self) -> &NatsTiming {
        &self.timing
    }

    pub(crate) fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An error unless the connection to the broker is up.
    pub(crate) fn ensure_connected(&self) -> Result<()> {
        match self.client.connection_state() {
            State::Connected => Ok(()),
            state => Err(Error::nats(
                "reach the broker",
                format!("the connection is {state:?}"),
            )),
        }
    }

    /// Publishes `wire` on `subject` with `Nats-Msg-Id` `id` and waits for
    /// the stream's ack: once this returns, the broker holds the message.
    pub(crate) async fn publish(&self, subject: String, id: String, wire: &Wire) -> Result<()> {
        self.ensure_connected()?;
        let payload = wire
            .to_bytes()
            .map_err(|e| Error::nats("encode a message", e))?;
        let action = || format!("publish {id} on {subject}");
        let ack = self
            .js
            .send_publish(
                subject.clone(),
                PublishMessage::build()
                    .payload(payload)
                    .message_id(id.clone()),
            )
            .await
            .map_err(|e| Error::nats(action(), e))?;
        ack.await.map_err(|e| Error::nats(action(), e))?;
        Ok(())
    }

    /// Sends the request `target` (role `Target`, signed, first intent
    /// included) to its target cluster.
    pub(crate) async fn send_request(&self, target: &WorkloadMigration) -> Result<()> {
        let spec = &target.spec;
        let name = target.name_any();
        let wire = Wire::Request {
            source: self.cluster.clone(),
            target: spec.target_cluster.clone(),
            name: name.clone(),
            spec: Box::new(spec.clone()),
        };
        let id = message_id(&spec.request_id, Kind::Request, "1");
        self.publish(
            request_subject(&spec.target_cluster, &self.cluster),
            id,
            &wire,
        )
        .await?;
        let mut memory = self.memory();
        memory.published.insert(name.clone());
        if let Some(intent) = &spec.intent {
            memory.intents.entry(name).or_insert_with(|| intent.clone());
        }
        Ok(())
    }

    /// Sends a new signed intent of the request `target`.
    pub(crate) async fn send_intent(
        &self,
        target: &WorkloadMigration,
        intent: Intent,
    ) -> Result<()> {
        let spec = &target.spec;
        let name = target.name_any();
        let wire = Wire::Intent {
            source: self.cluster.clone(),
            target: spec.target_cluster.clone(),
            name: name.clone(),
            request_id: spec.request_id.clone(),
            intent: intent.clone(),
        };
        let id = message_id(&spec.request_id, Kind::Intent, &intent.sequence.to_string());
        self.publish(
            request_subject(&spec.target_cluster, &self.cluster),
            id,
            &wire,
        )
        .await?;
        self.memory().intents.insert(name, intent);
        Ok(())
    }

    /// What is known of the request of `mirror` in its target: its spec as
    /// sent (with the last intent this process sent, or the one the target
    /// last observed) and the latest status heard. `None` only for a
    /// request nobody has heard of yet while the mirror is still `Pending`:
    /// once the mirror moved on, no status heard yet means no news (after a
    /// restart the consumer replays the latest ones), not a lost request.
    pub(crate) fn target_view(
        &self,
        mirror: &WorkloadMigration,
    ) -> Result<Option<WorkloadMigration>> {
        self.ensure_connected()?;
        let name = mirror.name_any();
        let mut memory = self.memory();
        if let Some(namespace) = mirror.namespace() {
            memory.mirrors.insert(name.clone(), namespace);
        }
        let heard = memory
            .heard
            .get(&(mirror.spec.target_cluster.clone(), name.clone()))
            .filter(|h| h.request_id == mirror.spec.request_id);
        let pending = mirror
            .status
            .as_ref()
            .is_none_or(|s| s.phase == MigrationPhase::Pending);
        if heard.is_none() && !memory.published.contains(&name) && pending {
            return Ok(None);
        }
        let mut spec = mirror.spec.clone();
        spec.role = MigrationRole::Target;
        spec.intent = memory.intents.get(&name).cloned().or_else(|| {
            Some(Intent {
                action: IntentAction::Proceed,
                sequence: heard
                    .and_then(|h| h.status.observed_intent)
                    .unwrap_or(1)
                    .max(1),
                step: None,
                signature: None,
            })
        });
        let mut view = WorkloadMigration::new(&name, spec);
        view.metadata.namespace = Some(inbox_namespace(&self.cluster));
        view.status = heard.map(|h| h.status.clone());
        Ok(Some(view))
    }

    /// Forgets what this process holds for a finished request.
    pub(crate) fn forget(&self, mirror: &WorkloadMigration) {
        let name = mirror.name_any();
        let mut memory = self.memory();
        memory
            .heard
            .remove(&(mirror.spec.target_cluster.clone(), name.clone()));
        memory.intents.remove(&name);
        memory.published.remove(&name);
        memory.mirrors.remove(&name);
    }

    /// The mirror of each request as a newer status of it arrives, for the
    /// sender to act on at once instead of at its next poll. Wake-ups the
    /// sender falls behind on are skipped: the poll still comes.
    pub(crate) fn status_arrivals(
        &self,
    ) -> impl futures::Stream<Item = ObjectRef<WorkloadMigration>> + Send + 'static {
        futures::stream::unfold(self.arrivals.subscribe(), |mut rx| async move {
            loop {
                match rx.recv().await {
                    Ok(mirror) => return Some((mirror, rx)),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        })
    }

    /// Keeps the latest status of each of this cluster's requests, from its
    /// durable consumer on the status stream, until the future is dropped.
    /// The consumer is created afresh on start, delivering the last status
    /// of every request the stream holds, then each new one. The sender
    /// reads what this link's clones keep: run the feed on a clone of the
    /// link the sender holds.
    pub async fn run_status_feed(self) {
        let mut fresh = true;
        loop {
            if let Err(error) = self.pull_statuses(&mut fresh).await {
                tracing::info!(%error, "status feed interrupted; retrying");
                tokio::time::sleep(self.timing.retry_delay).await;
            }
        }
    }

    async fn pull_statuses(&self, fresh: &mut bool) -> Result<()> {
        let stream = self
            .js
            .get_stream(STATUS_STREAM)
            .await
            .map_err(|e| Error::nats(format!("find the stream {STATUS_STREAM}"), e))?;
        let name = status_consumer(&self.cluster);
        if *fresh {
            // Absent on the first start; any other failure shows below.
            let _ = stream.delete_consumer(&name).await;
            *fresh = false;
        }
        let config = pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: status_filter(&self.cluster),
            deliver_policy: DeliverPolicy::LastPerSubject,
            ack_policy: AckPolicy::Explicit,
            ack_wait: self.timing.ack_wait,
            ..Default::default()
        };
        let consumer = stream
            .get_or_create_consumer(&name, config)
            .await
            .map_err(|e| Error::nats(format!("find or create the consumer {name}"), e))?;
        loop {
            let mut batch = consumer
                .batch()
                .max_messages(64)
                .expires(self.timing.fetch_wait)
                .messages()
                .await
                .map_err(|e| Error::nats("pull statuses", e))?;
            while let Some(message) = batch.next().await {
                let message = message.map_err(|e| Error::nats("pull statuses", e))?;
                self.take_status(&message);
                message
                    .ack()
                    .await
                    .map_err(|e| Error::nats("ack a status", e))?;
            }
        }
    }

    /// Keeps a status message if it is the newest for its request and its
    /// subject names what it claims.
    fn take_status(&self, message: &Message) {
        let Some(tokens) = tokens_after(message.subject.as_str(), "ferry.v1.status.", 3) else {
            tracing::warn!(subject = %message.subject, "a status on a subject Ferry does not use; ignored");
            return;
        };
        let Ok(Wire::Status {
            source,
            target,
            name,
            request_id,
            status,
        }) = Wire::from_bytes(&message.payload)
        else {
            tracing::warn!(subject = %message.subject, "a message that is not a status; ignored");
            return;
        };
        if [source.as_str(), target.as_str(), name.as_str()] != [tokens[0], tokens[1], tokens[2]]
            || source != self.cluster
        {
            tracing::warn!(subject = %message.subject, "a status whose content does not match its subject; ignored");
            return;
        }
        let sequence = message.info().map(|i| i.stream_sequence).unwrap_or(0);
        let mut memory = self.memory();
        let newer = memory
            .heard
            .get(&(target.clone(), name.clone()))
            .is_none_or(|h| h.sequence < sequence);
        if !newer {
            return;
        }
        let mirror = memory
            .mirrors
            .get(&name)
            .map(|namespace| ObjectRef::new(&name).within(namespace));
        memory.heard.insert(
            (target, name),
            Heard {
                sequence,
                request_id,
                status: *status,
            },
        );
        drop(memory);
        if let Some(mirror) = mirror {
            // No sender listening is fine: it polls.
            let _ = self.arrivals.send(mirror);
        }
    }
}
