//! The receiver controller: checks each request (role `Target`) that a peer
//! placed in its inbox namespace in this cluster, creates the workload with
//! this cluster's own credential, reports in the status it alone writes,
//! and removes exactly what it created on a rollback, a deletion or its own
//! deadline.
//!
//! It must never act on a request outside the inbox of a known peer, never
//! believe `spec.sourceCluster` over the inbox, never overwrite or delete an
//! object it did not create for that very request, and never roll back a
//! `Completed` move.

mod capacity;
mod check;
mod create;
mod lifecycle;
mod serving;
mod stateful;
mod steps;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};

pub use capacity::DEFAULT_MAX_REQUESTS_PER_PEER;

use super::envelope::KeyRing;
use super::error::{Error, Result};
use super::metrics::ReceiverMetrics;
use super::names::{LABEL_MIGRATION, inbox_namespace, inbox_peer};
use crate::admission::RateLimiter;
use crate::crd::{MigrationRole, WorkloadMigration};
use crate::peers::PeerSet;

/// How many peers' request rates the receiver remembers at once.
const MAX_RATE_LIMITED_PEERS: usize = 1024;

/// The receiver's rules and timing.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Ferry's own namespace: never a target, whatever the peer allows.
    pub operator_namespace: Option<String>,
    /// How often a progressing workload is re-read (its Deployment's watch
    /// events also wake the request).
    pub poll_interval: Duration,
    /// First retry delay after a failure (doubles per attempt).
    pub backoff_base: Duration,
    /// Longest retry delay.
    pub backoff_max: Duration,
    /// How long a finished request stays before it is deleted (the journal
    /// and Events keep the history).
    pub finished_ttl: Duration,
    /// How many requests one peer's inbox stores: beyond it the oldest
    /// finished ones are deleted, and a new request is refused
    /// (`InboxFull`) only when those in flight alone fill it.
    pub max_requests_per_peer: usize,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            operator_namespace: None,
            poll_interval: Duration::from_secs(5),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
            finished_ttl: Duration::from_secs(24 * 3600),
            max_requests_per_peer: DEFAULT_MAX_REQUESTS_PER_PEER,
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
    /// Refusal counters.
    pub metrics: ReceiverMetrics,
    /// This cluster's keys: every status it writes is signed with them.
    pub keys: KeyRing,
    recorder: Recorder,
    /// Each peer's request rate.
    limiter: Arc<Mutex<RateLimiter>>,
    /// Requests that already took their token: a retry after a transient
    /// failure takes none.
    charged: Arc<Mutex<Charged>>,
    attempts: Arc<Mutex<BTreeMap<String, u32>>>,
}

impl ReceiverContext {
    /// A receiver context with counters of its own.
    pub fn new(client: Client, peers: PeerSet, config: ReceiverConfig) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "ferry-receiver".to_owned(),
                instance: None,
            },
        );
        Self {
            client,
            peers,
            config,
            metrics: ReceiverMetrics::default(),
            keys: KeyRing::default(),
            recorder,
            limiter: Arc::new(Mutex::new(RateLimiter::new(MAX_RATE_LIMITED_PEERS))),
            charged: Arc::default(),
            attempts: Arc::default(),
        }
    }

    /// The same context signing with `keys`.
    pub fn with_keys(mut self, keys: KeyRing) -> Self {
        self.keys = keys;
        self
    }

    /// The same context counting into `metrics` (the operator's registry).
    pub fn with_metrics(mut self, metrics: ReceiverMetrics) -> Self {
        self.metrics = metrics;
        self
    }
}

/// Runs the receiver controller until the future is dropped.
pub async fn run_receiver(ctx: ReceiverContext) {
    // Every request, whatever its labels say: a peer may edit the labels of
    // its own requests, so only the namespace and the spec's role count.
    let requests: Api<WorkloadMigration> = Api::all(ctx.client.clone());
    let deployments: Api<Deployment> = Api::all(ctx.client.clone());
    let peers = ctx.peers.clone();
    Controller::new(requests, watcher::Config::default())
        .watches(
            deployments,
            watcher::Config::default().labels(LABEL_MIGRATION),
            move |deployment| {
                // The request lives in the inbox of the peer the copy came
                // from; the copy's label names it.
                let name = deployment.labels().get(LABEL_MIGRATION)?.clone();
                let from = deployment
                    .annotations()
                    .get(super::names::ANNOTATION_MIGRATED_FROM)?
                    .clone();
                peers.get(&from)?;
                Some(ObjectRef::new(&name).within(&inbox_namespace(&from)))
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

#[tracing::instrument(skip_all, fields(migration = %key(&wm)))]
async fn reconcile(wm: Arc<WorkloadMigration>, ctx: Arc<ReceiverContext>) -> Result<Action> {
    let namespace = wm.namespace().unwrap_or_default();
    // Never act outside an inbox: a request anywhere else was not delivered
    // by a peer's credential, whatever it says.
    let Some(peer) = inbox_peer(&namespace) else {
        return Ok(Action::await_change());
    };
    if wm.spec.role != MigrationRole::Target {
        return Ok(Action::await_change());
    }
    let request = steps::Request {
        api: Api::namespaced(ctx.client.clone(), &namespace),
        ctx: &ctx,
        peer: peer.to_owned(),
    };
    let action = request.reconcile((*wm).clone()).await?;
    ctx.attempts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key(&wm));
    Ok(action)
}

/// How many requests' uids [`Charged`] remembers; the oldest go first. A
/// request still Pending after this many newer ones is charged again.
const MAX_CHARGED: usize = 4096;

/// The uids of requests that took a rate-limit token, oldest first, bounded.
#[derive(Debug, Default)]
pub(super) struct Charged {
    order: std::collections::VecDeque<String>,
    set: std::collections::HashSet<String>,
}

impl Charged {
    /// Records `uid`; false when it was already recorded.
    pub(super) fn first_time(&mut self, uid: &str) -> bool {
        if self.set.contains(uid) {
            return false;
        }
        if self.order.len() >= MAX_CHARGED
            && let Some(oldest) = self.order.pop_front()
        {
            self.set.remove(&oldest);
        }
        self.order.push_back(uid.to_owned());
        self.set.insert(uid.to_owned());
        true
    }

    /// Forgets `uid` (its token was refused, so it took none).
    pub(super) fn forget(&mut self, uid: &str) {
        if self.set.remove(uid) {
            self.order.retain(|u| u != uid);
        }
    }
}

#[cfg(test)]
mod charged_tests {
    use super::*;

    #[test]
    fn a_request_is_charged_once_and_memory_stays_bounded() {
        let mut charged = Charged::default();
        assert!(charged.first_time("a"));
        assert!(!charged.first_time("a"), "a retry takes no second token");
        charged.forget("a");
        assert!(charged.first_time("a"), "a refused token was never taken");
        for i in 0..MAX_CHARGED * 2 {
            charged.first_time(&i.to_string());
        }
        assert_eq!(charged.order.len(), MAX_CHARGED);
        assert_eq!(charged.set.len(), MAX_CHARGED);
        assert!(charged.first_time("a"), "the oldest were forgotten");
    }
}
