//! The migration protocol over NATS JetStream: a real nats-server (TLS,
//! file storage, per-cluster nkey users with the documented permissions)
//! between two sandbox clusters, with the real peer, sender, receiver and
//! bridge. The same invariant checker as the Kubernetes transport's tests:
//! at every sample one cluster serves the workload.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use ferry::crd::{ClusterPeer, MigrationPhase, Transport, WorkloadMigration, is_condition_true};
use ferry::migration::nats::{
    NatsLink, NatsReceiverContext, REQUEST_STREAM, Wire, request_consumer, request_subject,
    run_nats_receiver,
};
use ferry::migration::{StartOutcome, conditions, start_migration};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use support::cluster::world::*;
use support::cluster::{Task, until};
use support::nats::NatsServer;

const KUBELET: Duration = Duration::from_millis(30);

/// The two-cluster world with both ClusterPeers switched to transport
/// `Nats`, each cluster linked to the broker as its own user.
struct NatsWorld {
    world: World,
    broker: NatsServer,
    link_a: NatsLink,
    bridge_ctx: NatsReceiverContext,
    feed: Option<Task>,
    bridge: Option<Task>,
}

async fn use_nats(client: &kube::Client, peer: &str) {
    let api: Api<ClusterPeer> = Api::all(client.clone());
    let patch = serde_json::json!({"spec": {"transport": "Nats"}});
    api.patch(peer, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("ClusterPeer switched to NATS");
}

impl NatsWorld {
    async fn start() -> Self {
        Self::start_on(NatsServer::start(&["a", "b"]).await).await
    }

    async fn start_on(broker: NatsServer) -> Self {
        let mut world = World::start(KUBELET).await;
        broker.provision().await;
        use_nats(&world.a.client, "b").await;
        use_nats(&world.b.client, "a").await;
        let (pa, pb) = (world.peers_a.clone(), world.peers_b.clone());
        until("both peers known as NATS peers", WAIT, || {
            let ok = pa
                .get("b")
                .is_some_and(|p| p.spec.transport == Transport::Nats)
                && pb
                    .get("a")
                    .is_some_and(|p| p.spec.transport == Transport::Nats);
            async move { ok }
        })
        .await;
        let link_a = broker.link("a").await;
        let link_b = broker.link("b").await;
        world.sender_ctx = world.sender_ctx.clone().with_nats(link_a.clone());
        let bridge_ctx = NatsReceiverContext::new(
            world.b.ferry.clone(),
            world.peers_b.clone(),
            link_b,
            world.receiver_ctx.keys.clone(),
        )
        .with_metrics(world.receiver_ctx.metrics.clone());
        NatsWorld {
            world,
            broker,
            link_a,
            bridge_ctx,
            feed: None,
            bridge: None,
        }
    }

    /// The sender and its status feed in `a`.
    fn start_sending(&mut self) {
        self.world.start_sender();
        self.feed = Some(Task::spawn(self.link_a.clone().run_status_feed()));
    }

    /// The bridge and the receiver in `b`.
    fn start_receiving(&mut self) {
        self.start_bridge();
        self.world.start_receiver();
    }

    fn start_bridge(&mut self) {
        self.bridge = Some(Task::spawn(run_nats_receiver(self.bridge_ctx.clone())));
    }

    async fn shutdown(mut self) {
        if let Some(t) = self.feed.take() {
            t.stop().await;
        }
        if let Some(t) = self.bridge.take() {
            t.stop().await;
        }
        self.world.shutdown().await;
    }
}

fn created(outcome: StartOutcome) -> String {
    match outcome {
        StartOutcome::Created { name } => name,
        other => panic!("expected a new migration, got {other:?}"),
    }
}

async fn source_replicas(world: &World) -> Option<i32> {
    get_deployment(&world.a.client, WORKLOAD)
        .await
        .and_then(|d| d.spec.replicas)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_completes_over_nats_and_both_sides_name_the_transport() {
    let mut nw = NatsWorld::start().await;
    nw.start_sending();
    nw.start_receiving();
    let w = &nw.world;
    let checker = InvariantChecker::start(&w.a.client, &w.b.client, WORKLOAD, REPLICAS);
    let name = created(start_migration(&w.sender_ctx, w.request()).await.unwrap());
    let mirror = wait_phase(&w.mirrors(), &name, MigrationPhase::Completed).await;
    let target = wait_phase(&w.targets(), &name, MigrationPhase::Completed).await;
    checker.finish().await;
    assert_eq!(serving_copies(w).await, 1);
    assert_eq!(source_replicas(w).await, Some(0));
    assert_eq!(mirror.spec.transport, Some(Transport::Nats));
    assert_eq!(target.spec.transport, Some(Transport::Nats));
    // The receiver materialised it in a's inbox with its own credential.
    assert_eq!(target.namespace().as_deref(), Some(INBOX_A));
    nw.shutdown().await;
}

/// Each step's intent and the receiver's signed step reports travel over
/// the broker like any other: a progressive move completes step by step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progressive_move_steps_over_nats() {
    let mut nw = NatsWorld::start().await;
    nw.start_sending();
    nw.start_receiving();
    let w = &nw.world;
    let mut request = w.request();
    request.strategy = Some(ferry::crd::MigrationStrategy {
        step: Some(ferry::crd::ReplicaCount::Count(1)),
        ..ferry::crd::MigrationStrategy::progressive()
    });
    let name = created(start_migration(&w.sender_ctx, request).await.unwrap());
    let mirror = wait_phase(&w.mirrors(), &name, MigrationPhase::Completed).await;
    // Both sides end: the target verified the Complete intent, which names
    // no step, though the step intents before it did.
    let target = wait_phase(&w.targets(), &name, MigrationPhase::Completed).await;
    assert_eq!(target.spec.intent.unwrap().step, None);
    let progress = mirror.status.unwrap().progress.expect("stepped");
    assert_eq!((progress.step, progress.steps), (REPLICAS, REPLICAS));
    assert_eq!(source_replicas(w).await, Some(0));
    nw.shutdown().await;
}

/// A stateful move over the broker: the export runs in a before the
/// request is published, the claim and the import's Job in b before the
/// workload, and the receiver's signed status carries the import's state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_move_runs_its_hooks_over_nats() {
    use ferry::crd::{DataHook, DataHooks, HookKind, HookState, StatefulMoves};
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let mut nw = NatsWorld::start().await;
    let w = &nw.world;
    for cluster in [&w.a, &w.b] {
        cluster
            .sandbox
            .kubelet()
            .set_realistic(ferry::sandbox::KubeletRules::default());
    }
    let patch = serde_json::json!({"spec": {"admission": {"claims": {"allow": true}}}});
    Api::<ClusterPeer>::all(w.b.client.clone())
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let peers = w.peers_b.clone();
    support::cluster::eventually("b to take claims from a", WAIT, || {
        let allowed = peers
            .get("a")
            .is_some_and(|p| p.spec.admission.claims.allow);
        async move { allowed.then_some(()) }
    })
    .await;
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "cache", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(w.a.client.clone(), NS)
        .create(&Default::default(), &claim)
        .await
        .unwrap();
    create_deployment(
        &w.a.client,
        NS,
        "cache",
        1,
        serde_json::json!({"volumes": [{"name": "c", "persistentVolumeClaim": {"claimName": "cache"}}]}),
    )
    .await;
    wait_available(&w.a.client, "cache", 1).await;
    nw.start_sending();
    nw.start_receiving();
    let w = &nw.world;
    let hook = DataHook {
        image: "registry.example/backup:1".into(),
        ..DataHook::default()
    };
    let request = ferry::migration::MigrationRequest {
        stateful: Some(StatefulMoves {
            enabled: true,
            hooks: DataHooks {
                export: Some(hook.clone()),
                import: Some(hook),
            },
        }),
        ..ferry::migration::MigrationRequest::deployment(NS, "cache", "b")
    };
    let name = created(start_migration(&w.sender_ctx, request).await.unwrap());
    let mirror = wait_phase(&w.mirrors(), &name, MigrationPhase::Completed).await;
    let target = wait_phase(&w.targets(), &name, MigrationPhase::Completed).await;
    let state = |wm: &WorkloadMigration, kind: HookKind| {
        wm.status
            .as_ref()
            .and_then(|s| s.hooks.iter().find(|h| h.hook == kind))
            .map(|h| h.state)
    };
    assert_eq!(state(&mirror, HookKind::Export), Some(HookState::Succeeded));
    assert_eq!(state(&target, HookKind::Import), Some(HookState::Succeeded));
    assert_eq!(target.spec.transport, Some(Transport::Nats));
    let copy = Api::<PersistentVolumeClaim>::namespaced(w.b.client.clone(), NS)
        .get("cache")
        .await
        .unwrap();
    assert_eq!(copy.status.unwrap().phase.as_deref(), Some("Bound"));
    nw.shutdown().await;
}

/// Over NATS the target's statuses are pushed: a sender whose poll would
/// come only in an hour still follows the move to its end, woken by each
/// status as it arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_status_heard_wakes_the_sender_without_waiting_for_its_poll() {
    let mut nw = NatsWorld::start().await;
    nw.world.sender_ctx.config.poll_interval = Duration::from_secs(3600);
    nw.start_sending();
    nw.start_receiving();
    let w = &nw.world;
    let checker = InvariantChecker::start(&w.a.client, &w.b.client, WORKLOAD, REPLICAS);
    let name = created(start_migration(&w.sender_ctx, w.request()).await.unwrap());
    wait_phase(&w.mirrors(), &name, MigrationPhase::Completed).await;
    checker.finish().await;
    assert_eq!(serving_copies(w).await, 1);
    assert_eq!(source_replicas(w).await, Some(0));
    nw.shutdown().await;
}

/// A request `a` would send, signed by `keys` (or unsigned).
fn request_wire(name: &str, source: &str, keys: Option<&ferry::trust::ClusterKeys>) -> Wire {
    let workload = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "forged", "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "forged"}},
            "template": {"metadata": {"labels": {"app": "forged"}},
                "spec": support::cluster::restricted(serde_json::json!({"containers": [{"name": "app", "image": "nginx"}]}))}},
    });
    let wm = request_object(name, source, NS, workload, serde_json::json!([]), keys);
    Wire::Request {
        source: source.to_owned(),
        target: "b".to_owned(),
        name: name.to_owned(),
        spec: Box::new(wm.spec),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_messages_are_refused_and_change_nothing() {
    let mut nw = NatsWorld::start().await;
    nw.start_receiving();
    let admin = nw.broker.admin().await;
    let metrics = nw.world.receiver_ctx.metrics.clone();
    // Signed by b's keys but claiming a; unsigned; and a's own signature on
    // a message published as if from c on a's subject.
    let cases = [
        (
            "forged-key",
            request_wire("forged-key", "a", Some(&nw.world.keys_b)),
            "a",
            "UnknownKey",
        ),
        (
            "forged-none",
            request_wire("forged-none", "a", None),
            "a",
            "Unsigned",
        ),
        (
            "forged-claim",
            request_wire("forged-claim", "c", Some(&nw.world.keys_a)),
            "a",
            "SourceMismatch",
        ),
    ];
    for (id, wire, subject_source, _) in &cases {
        let payload = wire.to_bytes().unwrap();
        admin
            .publish(request_subject("b", subject_source), payload)
            .await
            .expect("published")
            .await
            .expect("stored");
        let _ = id;
    }
    for (id, _, peer, reason) in &cases {
        until(&format!("{id} refused as {reason}"), WAIT, || {
            let n = metrics.refusals(peer, reason);
            async move { n >= 1 }
        })
        .await;
    }
    let inbox = nw
        .world
        .targets()
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        inbox.items.is_empty(),
        "nothing was materialised: {:?}",
        inbox.items.iter().map(|w| w.name_any()).collect::<Vec<_>>()
    );
    assert!(get_deployment(&nw.world.b.client, "forged").await.is_none());
    nw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redeliveries_and_duplicates_change_nothing() {
    let mut nw = NatsWorld::start().await;
    // The first message is acted on but never acked: the broker delivers it
    // again after its ack wait.
    nw.bridge_ctx.skip_acks.store(1, Ordering::SeqCst);
    nw.start_sending();
    nw.start_receiving();
    let w = &nw.world;
    let checker = InvariantChecker::start(&w.a.client, &w.b.client, WORKLOAD, REPLICAS);
    let name = created(start_migration(&w.sender_ctx, w.request()).await.unwrap());
    wait_phase(&w.mirrors(), &name, MigrationPhase::Completed).await;
    wait_phase(&w.targets(), &name, MigrationPhase::Completed).await;
    // The receiver's last writes of a finished request (its finalizer
    // goes) come after `Completed`: compare against the request at rest.
    let targets = w.targets();
    until(
        "the receiver to let go of the finished request",
        WAIT,
        || {
            let targets = targets.clone();
            let name = name.clone();
            async move {
                targets
                    .get(&name)
                    .await
                    .is_ok_and(|r| r.metadata.finalizers.as_ref().is_none_or(Vec::is_empty))
            }
        },
    )
    .await;
    let done = targets.get(&name).await.unwrap();
    checker.finish().await;
    assert_eq!(
        nw.bridge_ctx.skip_acks.load(Ordering::SeqCst),
        0,
        "one ack was skipped"
    );

    // Every message of the move again: the request and its Complete intent,
    // once with their own message ids (the stream drops them) and once
    // with new ones (the bridge sees them and changes nothing).
    let admin = nw.broker.admin().await;
    let stream_before = admin
        .get_stream(REQUEST_STREAM)
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap()
        .state
        .messages;
    let request = request_wire_from(&done);
    for id in [
        format!("{}.request.1", done.spec.request_id),
        "replayed".to_owned(),
    ] {
        let ack = admin
            .send_publish(
                request_subject("b", "a"),
                async_nats::jetstream::message::PublishMessage::build()
                    .payload(request.to_bytes().unwrap())
                    .message_id(id),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        let _ = ack;
    }
    let stream_after = admin
        .get_stream(REQUEST_STREAM)
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap()
        .state
        .messages;
    assert_eq!(
        stream_after,
        stream_before + 1,
        "the duplicate id was dropped, the new one kept"
    );
    // Wait until the bridge has consumed everything, then nothing changed.
    let consumer = request_consumer("b");
    until("the bridge to consume the replays", WAIT, || {
        let admin = admin.clone();
        let consumer = consumer.clone();
        async move {
            let Ok(mut c) = admin
                .get_consumer_from_stream::<async_nats::jetstream::consumer::pull::Config, _, _>(
                    &consumer,
                    REQUEST_STREAM,
                )
                .await
            else {
                return false;
            };
            c.info()
                .await
                .is_ok_and(|i| i.num_pending == 0 && i.num_ack_pending == 0)
        }
    })
    .await;
    let after = nw.world.targets().get(&name).await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        done.metadata.resource_version
    );
    assert_eq!(serving_copies(&nw.world).await, 1);
    nw.shutdown().await;
}

fn request_wire_from(target: &WorkloadMigration) -> Wire {
    let mut spec = target.spec.clone();
    spec.transport = None;
    Wire::Request {
        source: "a".into(),
        target: "b".into(),
        name: target.name_any(),
        spec: Box::new(spec),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_mid_migration_loses_nothing() {
    let mut nw = NatsWorld::start().await;
    nw.start_sending();
    nw.start_bridge();
    let checker =
        InvariantChecker::start(&nw.world.a.client, &nw.world.b.client, WORKLOAD, REPLICAS);
    let name = created(
        start_migration(&nw.world.sender_ctx, nw.world.request())
            .await
            .unwrap(),
    );
    // Materialised in b, not yet worked on (b's receiver is off).
    let targets = nw.world.targets();
    until("the request to reach b", WAIT, || {
        let targets = targets.clone();
        let name = name.clone();
        async move { targets.get_opt(&name).await.ok().flatten().is_some() }
    })
    .await;
    nw.broker.restart().await;
    nw.world.start_receiver();
    wait_phase(&nw.world.mirrors(), &name, MigrationPhase::Completed).await;
    wait_phase(&nw.world.targets(), &name, MigrationPhase::Completed).await;
    checker.finish().await;
    assert_eq!(serving_copies(&nw.world).await, 1);
    nw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_cut_off_from_the_broker_is_unreachable_and_acts_on_nothing() {
    let mut nw = NatsWorld::start().await;
    nw.start_receiving();
    nw.broker.kill();
    nw.start_sending();
    let name = created(
        start_migration(&nw.world.sender_ctx, nw.world.request())
            .await
            .unwrap(),
    );
    let mirrors = nw.world.mirrors();
    until("the mirror to say PeerUnreachable", WAIT, || {
        let mirrors = mirrors.clone();
        let name = name.clone();
        async move {
            mirrors
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .is_some_and(|m| {
                    m.status.as_ref().is_some_and(|s| {
                        is_condition_true(&s.conditions, conditions::PEER_UNREACHABLE)
                    })
                })
        }
    })
    .await;
    assert_eq!(source_replicas(&nw.world).await, Some(REPLICAS));
    assert!(get_deployment(&nw.world.b.client, WORKLOAD).await.is_none());
    let mirror = mirrors.get(&name).await.unwrap();
    assert_eq!(phase(&mirror), MigrationPhase::Pending);
    nw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_passing_while_the_message_waits_rolls_back() {
    let mut nw = NatsWorld::start().await;
    nw.start_sending();
    let mut request = nw.world.request();
    request.timeout = Duration::from_secs(2);
    let name = created(
        start_migration(&nw.world.sender_ctx, request)
            .await
            .unwrap(),
    );
    let mirrors = nw.world.mirrors();
    until("the sender to start the rollback", WAIT, || {
        let mirrors = mirrors.clone();
        let name = name.clone();
        async move {
            mirrors
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .is_some_and(|m| {
                    m.status.as_ref().is_some_and(|s| {
                        is_condition_true(&s.conditions, conditions::ROLLBACK_STARTED)
                    })
                })
        }
    })
    .await;
    // Only now does b read its messages: the request is past its deadline.
    nw.start_receiving();
    let mirror = wait_phase(&mirrors, &name, MigrationPhase::RolledBack).await;
    assert_eq!(
        mirror.status.unwrap().reason.as_deref(),
        Some(conditions::DEADLINE_EXCEEDED)
    );
    assert_eq!(source_replicas(&nw.world).await, Some(REPLICAS));
    assert!(get_deployment(&nw.world.b.client, WORKLOAD).await.is_none());
    nw.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_stream_leader_of_a_three_server_cluster_loses_nothing() {
    let mut nw = NatsWorld::start_on(NatsServer::start_cluster(&["a", "b"]).await).await;
    nw.start_sending();
    nw.start_bridge();
    let w = &nw.world;
    let checker = InvariantChecker::start(&w.a.client, &w.b.client, WORKLOAD, REPLICAS);
    let name = created(start_migration(&w.sender_ctx, w.request()).await.unwrap());
    let targets = w.targets();
    until("the request to reach b", WAIT, || {
        let (targets, name) = (targets.clone(), name.clone());
        async move { targets.get_opt(&name).await.ok().flatten().is_some() }
    })
    .await;
    // Kill the server leading the request stream; the other two elect a
    // new leader and the clients move to them.
    let admin = nw.broker.admin().await;
    let info = admin
        .get_stream(REQUEST_STREAM)
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    let leader = info
        .cluster
        .and_then(|c| c.leader)
        .expect("a stream leader");
    let index: usize = leader
        .rsplit('-')
        .next()
        .and_then(|i| i.parse().ok())
        .expect("a ferry-test-<n> server");
    drop(admin);
    nw.broker.kill_node(index);
    nw.world.start_receiver();
    wait_phase(&nw.world.mirrors(), &name, MigrationPhase::Completed).await;
    wait_phase(&nw.world.targets(), &name, MigrationPhase::Completed).await;
    checker.finish().await;
    assert_eq!(serving_copies(&nw.world).await, 1);
    nw.shutdown().await;
}
