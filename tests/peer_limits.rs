//! What bounds a peer's traffic and what a move leaves behind: sealed
//! Secret data cleared once applied (and refused when put back), the count
//! cap on a peer's inbox, a sender's moves toward a peer that was removed,
//! and two sources sending one name at once. Each test uses the
//! least-privilege credentials the chart renders, as `peer_trust` does.

mod support;
use support::cluster as support_cluster;

use std::time::Duration;

use ferry::crd::{MigrationPhase, WorkloadMigration};
use ferry::migration::{ANNOTATION_MIGRATED_TO, SENDER_FINALIZER, start_migration, verify_request};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support_cluster::inventory::{assert_unchanged, inventory};
use support_cluster::world::*;

const KUBELET: Duration = Duration::from_millis(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealed_data_put_back_after_it_was_cleared_is_refused_and_the_move_rolls_back() {
    let mut world = World::start(KUBELET).await;
    world.mount_a_secret().await;
    world.b.sandbox.kubelet().set_rollouts_ready(false);
    world.start_sender();
    world.start_receiver();
    let mut request = world.request();
    request.allow_secret_copy = true;
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    wait_phase(&world.targets(), &name, MigrationPhase::Progressing).await;

    // The Secret exists in b: the receiver clears the ciphertext, and the
    // request still verifies.
    let cleared = support_cluster::eventually("the sealed data to be cleared", WAIT, || {
        let (targets, name) = (world.targets(), name.clone());
        async move {
            let wm = targets.get(&name).await.ok()?;
            wm.spec.secrets[0].get("sealedData").is_none().then_some(wm)
        }
    })
    .await;
    verify_request(&world.keys_a.public_keys(), &cleared.spec).expect("the request verifies");
    let b_secrets = Api::<Secret>::namespaced(world.b.client.clone(), NS);
    assert!(b_secrets.get_opt("web-secret").await.unwrap().is_some());

    // The peer puts other ciphertext back, validly sealed to b's key.
    let other = ferry::trust::seal(
        &world.keys_b.public_keys()[0],
        b"anything",
        br#"{"data":{"password":"ZXZpbA=="}}"#,
    )
    .unwrap();
    let inbox: Api<WorkloadMigration> = Api::namespaced(world.peer_a_in_b().await, INBOX_A);
    let mut tampered = inbox.get(&name).await.unwrap();
    tampered.spec.secrets[0]["sealedData"] = serde_json::to_value(other).unwrap();
    inbox
        .replace(&name, &PostParams::default(), &tampered)
        .await
        .unwrap();

    let refused = wait_phase(&world.targets(), &name, MigrationPhase::Rejected).await;
    assert_eq!(
        refused.status.unwrap().reason.as_deref(),
        Some("BadSignature")
    );
    wait_event(&world.b.client, INBOX_A, &name, "BadSignature").await;
    assert_eq!(world.receiver_ctx.metrics.refusals("a", "BadSignature"), 1);
    // The move rolls back: both copies go, the source never moved.
    support_cluster::until("the copies in b to go", WAIT, || {
        let (b, b_secrets) = (world.b.client.clone(), b_secrets.clone());
        async move {
            get_deployment(&b, WORKLOAD).await.is_none()
                && b_secrets.get_opt("web-secret").await.unwrap().is_none()
        }
    })
    .await;
    wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    world.shutdown().await;
}

/// Creates `name` in a's inbox in b with a's peer credential.
async fn send(inbox: &Api<WorkloadMigration>, request: WorkloadMigration) {
    inbox
        .create(&PostParams::default(), &request)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_inbox_drops_its_oldest_finished_requests_and_refuses_only_when_moves_in_flight_fill_it()
 {
    let mut world = World::start(KUBELET).await;
    world.b.sandbox.kubelet().set_rollouts_ready(false);
    world.receiver_ctx.config.max_requests_per_peer = 3;
    world.start_receiver();
    let inbox: Api<WorkloadMigration> = Api::namespaced(world.peer_a_in_b().await, INBOX_A);
    let targets = world.targets();

    // Two finished requests (refused: they claim another source).
    for name in ["done-1", "done-2"] {
        send(&inbox, world.signed_request(name, "c")).await;
        wait_phase(&targets, name, MigrationPhase::Rejected).await;
    }
    // Moves in flight (their copies never become available): each new one
    // makes room by dropping the oldest finished request.
    send(&inbox, world.signed_request("flight-1", "a")).await;
    wait_phase(&targets, "flight-1", MigrationPhase::Progressing).await;
    assert!(
        targets.get_opt("done-1").await.unwrap().is_some(),
        "room left"
    );
    send(&inbox, world.signed_request("flight-2", "a")).await;
    wait_phase(&targets, "flight-2", MigrationPhase::Progressing).await;
    assert!(targets.get_opt("done-1").await.unwrap().is_none());
    assert!(targets.get_opt("done-2").await.unwrap().is_some());
    send(&inbox, world.signed_request("flight-3", "a")).await;
    wait_phase(&targets, "flight-3", MigrationPhase::Progressing).await;
    assert!(targets.get_opt("done-2").await.unwrap().is_none());

    // Three moves in flight fill the cap: the next request is refused, and
    // nothing else changes.
    let before = inventory(&world.b.client).await;
    send(&inbox, world.signed_request("flight-4", "a")).await;
    let refused = wait_phase(&targets, "flight-4", MigrationPhase::Rejected).await;
    assert_eq!(refused.status.unwrap().reason.as_deref(), Some("InboxFull"));
    wait_event(&world.b.client, INBOX_A, "flight-4", "InboxFull").await;
    assert_eq!(world.receiver_ctx.metrics.refusals("a", "InboxFull"), 1);
    // The copies in flight are compared by uid: the sandbox's kubelet
    // still writes their status.
    let after = inventory(&world.b.client).await;
    assert_unchanged(
        "cluster b",
        &before,
        &after,
        &[
            "WorkloadMigration/ferry-inbox-a/flight-4",
            "Deployment/apps/flight-",
        ],
    );
    for name in ["flight-1", "flight-2", "flight-3"] {
        let wm = targets.get(name).await.unwrap();
        assert_eq!(phase(&wm), MigrationPhase::Progressing, "{name}");
        let key = format!("Deployment/{NS}/{name}");
        let uid = |inventory: &support_cluster::inventory::Inventory| {
            inventory[&key].split('@').next().unwrap().to_owned()
        };
        assert_eq!(uid(&before), uid(&after), "{key}");
    }
    world.shutdown().await;
}

/// a's administrator removes its ClusterPeer for b.
async fn remove_peer_b_in_a(world: &World) {
    Api::<ferry::crd::ClusterPeer>::all(world.a.client.clone())
        .delete("b", &DeleteParams::default())
        .await
        .unwrap();
}

/// Waits until the mirror `name` ended for its removed peer, and checks it
/// let go of its finalizer.
async fn wait_ended_for_removed_peer(world: &World, name: &str) {
    let mirror = wait_phase(&world.mirrors(), name, MigrationPhase::RolledBack).await;
    assert_eq!(
        mirror.status.unwrap().reason.as_deref(),
        Some("PeerRemoved")
    );
    wait_event(&world.a.client, NS, name, "PeerRemoved").await;
    support_cluster::until("the sender's finalizer to go", WAIT, || {
        let (mirrors, name) = (world.mirrors(), name.to_owned());
        async move {
            let wm = mirrors.get(&name).await.unwrap();
            !wm.finalizers().iter().any(|f| f == SENDER_FINALIZER)
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_targets_cluster_peer_ends_a_move_in_flight_and_the_source_keeps_serving() {
    let mut world = World::start(KUBELET).await;
    let name = world.progressing_move().await;
    let checker = InvariantChecker::start(&world.a.client, &world.b.client, WORKLOAD, REPLICAS);
    remove_peer_b_in_a(&world).await;
    wait_ended_for_removed_peer(&world, &name).await;
    checker.finish().await;
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    assert!(!source.annotations().contains_key(ANNOTATION_MIGRATED_TO));
    // The mirror's deletion no longer waits for a peer that is gone.
    world
        .mirrors()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    support_cluster::until("the mirror to go", WAIT, || {
        let (mirrors, name) = (world.mirrors(), name.clone());
        async move { mirrors.get_opt(&name).await.unwrap().is_none() }
    })
    .await;
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_mirror_whose_target_peer_was_removed_releases_it() {
    let mut world = World::start(KUBELET).await;
    let name = world.progressing_move().await;
    world.stop_sender().await;
    remove_peer_b_in_a(&world).await;
    let peers = world.peers_a.clone();
    support_cluster::until("a to forget b", WAIT, || {
        let gone = peers.get("b").is_none();
        async move { gone }
    })
    .await;
    // The mirror is deleted while its move is in flight: there is no peer
    // left to withdraw the request from, so its finalizer just goes.
    world
        .mirrors()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    world.start_sender();
    support_cluster::until("the mirror to go", WAIT, || {
        let (mirrors, name) = (world.mirrors(), name.clone());
        async move { mirrors.get_opt(&name).await.unwrap().is_none() }
    })
    .await;
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    world.shutdown().await;
}

/// A move whose target reported `Ready` and whose source `a` scaled down,
/// but which b never heard was complete: b refuses every write until the
/// test clears its faults. Returns the move's name.
async fn ready_with_the_source_scaled_down(world: &mut World) -> String {
    world.start_receiver();
    let name = started_name(
        start_migration(&world.sender_ctx, world.request())
            .await
            .unwrap(),
    );
    wait_phase(&world.targets(), &name, MigrationPhase::Ready).await;
    world.b.sandbox.faults().set_error_rate(1.0);
    world.start_sender();
    wait_phase(&world.mirrors(), &name, MigrationPhase::Ready).await;
    support_cluster::until("the source to scale down", WAIT, || {
        let a = world.a.client.clone();
        async move {
            get_deployment(&a, WORKLOAD)
                .await
                .is_some_and(|d| d.spec.replicas == Some(0))
        }
    })
    .await;
    name
}

/// The source in `a` serves again with its replicas, and no longer says it
/// moved.
async fn assert_source_restored(world: &World) {
    wait_available(&world.a.client, WORKLOAD, REPLICAS).await;
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    assert!(!source.annotations().contains_key(ANNOTATION_MIGRATED_TO));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_targets_cluster_peer_after_the_source_scaled_down_restores_the_source() {
    let mut world = World::start(KUBELET).await;
    let name = ready_with_the_source_scaled_down(&mut world).await;
    remove_peer_b_in_a(&world).await;
    wait_ended_for_removed_peer(&world, &name).await;
    assert_source_restored(&world).await;
    world.b.sandbox.faults().clear();
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_rolled_back_after_the_source_scaled_down_gives_the_source_back() {
    let mut world = World::start(KUBELET).await;
    let name = ready_with_the_source_scaled_down(&mut world).await;
    world.stop_sender().await;
    world.b.sandbox.faults().clear();
    // Whoever holds a's peer credential asks b to roll the move back before
    // a could say it is complete; b removes its copy.
    let inbox: Api<WorkloadMigration> = Api::namespaced(world.peer_a_in_b().await, INBOX_A);
    let mut request = inbox.get(&name).await.unwrap();
    let intent = ferry::migration::signed_intent(
        &world.keys_a,
        &request.spec,
        ferry::crd::IntentAction::RollBack,
        2,
        None,
    )
    .unwrap();
    request.spec.intent = Some(intent);
    inbox
        .replace(&name, &PostParams::default(), &request)
        .await
        .unwrap();
    wait_phase(&world.targets(), &name, MigrationPhase::RolledBack).await;
    assert!(get_deployment(&world.b.client, WORKLOAD).await.is_none());

    // The sender finds its committed move rolled back: the source comes back.
    world.start_sender();
    wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
    assert_source_restored(&world).await;
    world.shutdown().await;
}

/// A third cluster `c`, peered with `b` both ways, with its own `apps/web`,
/// its own peer controller and a sender, beside `world`'s `a` and `b`.
struct Second {
    cluster: support_cluster::TestCluster,
    sender_ctx: ferry::migration::SenderContext,
    tasks: Vec<support_cluster::Task>,
}

impl Second {
    async fn join(world: &World) -> Second {
        let cluster = support_cluster::start_clusters(&["c"], KUBELET)
            .await
            .pop()
            .expect("c");
        // Each one's inbox and peer account for the other, as the chart
        // renders them for `peers: [b]` in c and `peers: [a, c]` in b.
        support_cluster::install_rbac(&cluster.client, &["b"]).await;
        support_cluster::install_rbac(&world.b.client, &["a", "c"]).await;
        let keys_c = cluster.keys().await;
        let mut b_in_c = support_cluster::peer_spec("b", false);
        b_in_c.public_keys = world.keys_b.public_keys();
        support_cluster::add_peer(&cluster.client, "b", &world.b.peer_kubeconfig("c"), b_in_c)
            .await;
        let mut c_in_b = support_cluster::peer_spec("c", true);
        c_in_b.public_keys = keys_c.public_keys();
        support_cluster::add_peer(&world.b.client, "c", &cluster.peer_kubeconfig("b"), c_in_b)
            .await;
        let peers = ferry::peers::PeerSet::new();
        let controller = support_cluster::Task::spawn(ferry::peers::run_peer_controller(
            ferry::peers::PeerContext {
                client: cluster.ferry.clone(),
                peers: peers.clone(),
                config: peer_config(),
            },
        ));
        support_cluster::ensure_namespace(&cluster.client, NS).await;
        create_deployment(&cluster.client, NS, WORKLOAD, REPLICAS, json!({})).await;
        wait_available(&cluster.client, WORKLOAD, REPLICAS).await;
        let (pc, pb) = (peers.clone(), world.peers_b.clone());
        support_cluster::until("c and b connected", WAIT, || {
            let ok = pc.client("b").is_some() && pb.client("c").is_some();
            async move { ok }
        })
        .await;
        let sender_ctx = ferry::migration::SenderContext::with_config(
            cluster.ferry.clone(),
            "c",
            peers,
            sender_config(),
        )
        .with_keys(ferry::migration::KeyRing::new(keys_c));
        let sender = support_cluster::Task::spawn(ferry::migration::run_sender(sender_ctx.clone()));
        Second {
            cluster,
            sender_ctx,
            tasks: vec![controller, sender],
        }
    }

    fn mirrors(&self) -> Api<WorkloadMigration> {
        Api::namespaced(self.cluster.client.clone(), NS)
    }

    async fn shutdown(mut self) {
        for task in self.tasks.drain(..) {
            task.stop().await;
        }
        self.cluster.shutdown().await;
    }
}

/// Waits until the mirror `name` in `mirrors` has ended.
async fn ended(mirrors: &Api<WorkloadMigration>, name: &str) -> WorkloadMigration {
    support_cluster::eventually(&format!("{name} to end"), WAIT, || {
        let (mirrors, name) = (mirrors.clone(), name.to_owned());
        async move {
            let wm = mirrors.get(&name).await.ok()?;
            phase(&wm).is_terminal().then_some(wm)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sources_sending_one_name_at_once_one_moves_and_the_other_keeps_serving() {
    let mut world = World::start(KUBELET).await;
    let c = Second::join(&world).await;
    world.start_sender();
    world.start_receiver();
    let checkers = [
        InvariantChecker::start(&world.a.client, &world.b.client, WORKLOAD, REPLICAS),
        InvariantChecker::start(&c.cluster.client, &world.b.client, WORKLOAD, REPLICAS),
    ];
    // a and c both move their apps/web to b, at the same moment.
    let (from_a, from_c) = tokio::join!(
        start_migration(&world.sender_ctx, world.request()),
        start_migration(&c.sender_ctx, world.request()),
    );
    let (name_a, name_c) = (started_name(from_a.unwrap()), started_name(from_c.unwrap()));
    let (mirror_a, mirror_c) = (
        ended(&world.mirrors(), &name_a).await,
        ended(&c.mirrors(), &name_c).await,
    );
    for checker in checkers {
        checker.finish().await;
    }

    // Exactly one moved; the other was refused and rolled back.
    let completed = [&mirror_a, &mirror_c]
        .iter()
        .filter(|m| phase(m) == MigrationPhase::Completed)
        .count();
    assert_eq!(
        completed, 1,
        "a: {:?}, c: {:?}",
        mirror_a.status, mirror_c.status
    );
    let (winner, winner_client, loser, loser_client, loser_mirror) =
        if phase(&mirror_a) == MigrationPhase::Completed {
            ("a", &world.a.client, "c", &c.cluster.client, &mirror_c)
        } else {
            ("c", &c.cluster.client, "a", &world.a.client, &mirror_a)
        };
    assert_eq!(phase(loser_mirror), MigrationPhase::RolledBack);
    let loser_status = loser_mirror.status.as_ref().unwrap();
    assert_eq!(loser_status.reason.as_deref(), Some("NameConflict"));
    assert_eq!(
        world.receiver_ctx.metrics.refusals(loser, "NameConflict"),
        1
    );

    // The workload runs exactly once per source: the winner's in b only,
    // the loser's in its own cluster only.
    let copy = get_deployment(&world.b.client, WORKLOAD).await.unwrap();
    assert_eq!(
        copy.annotations()
            .get(ferry::migration::ANNOTATION_MIGRATED_FROM)
            .map(String::as_str),
        Some(winner)
    );
    let moved = get_deployment(winner_client, WORKLOAD).await.unwrap();
    assert_eq!(
        moved.spec.replicas,
        Some(0),
        "{winner}'s source scaled down"
    );
    wait_available(loser_client, WORKLOAD, REPLICAS).await;
    let kept = get_deployment(loser_client, WORKLOAD).await.unwrap();
    assert_eq!(kept.spec.replicas, Some(REPLICAS), "{loser}'s source kept");
    assert!(!kept.annotations().contains_key(ANNOTATION_MIGRATED_TO));
    c.shutdown().await;
    world.shutdown().await;
}
