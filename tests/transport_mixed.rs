//! A mixed fleet: one operator sends to one peer through its Kubernetes API
//! and to another through NATS, with one set of guardrails (the same
//! sender, the same in-flight count) and the same signed envelope. The NATS
//! peers hold no kubeconfig of each other.

mod support;

use std::time::Duration;

use ferry::crd::{ClusterPeer, ClusterPeerSpec, MigrationPhase, Transport, is_condition_true};
use ferry::migration::nats::{NatsReceiverContext, run_nats_receiver};
use ferry::migration::{
    KeyRing, MigrationRequest, ReceiverContext, SenderContext, StartOutcome, count_in_flight,
    run_receiver, run_sender, start_migration,
};
use ferry::peers::{PeerContext, PeerSet, run_peer_controller};
use kube::Api;
use kube::api::{Patch, PatchParams};
use support::cluster::world::*;
use support::cluster::{Task, add_peer, ensure_namespace, peer_spec, start_clusters, until};
use support::nats::NatsServer;

/// A ClusterPeer with transport Nats and no kubeconfig.
async fn add_nats_peer(client: &kube::Client, name: &str, mut spec: ClusterPeerSpec) {
    spec.transport = Transport::Nats;
    spec.kubeconfig_secret_ref = None;
    let api: Api<ClusterPeer> = Api::all(client.clone());
    api.patch(
        name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&ClusterPeer::new(name, spec)),
    )
    .await
    .expect("ClusterPeer written");
}

fn name_of(outcome: StartOutcome) -> String {
    match outcome {
        StartOutcome::Created { name } => name,
        other => panic!("expected a new migration, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_operator_moves_to_a_kube_peer_and_a_nats_peer() {
    let mut clusters = start_clusters(&["a", "b", "c"], Duration::from_millis(30)).await;
    let c = clusters.pop().unwrap();
    let b = clusters.pop().unwrap();
    let a = clusters.pop().unwrap();
    let (keys_a, keys_b, keys_c) = (a.keys().await, b.keys().await, c.keys().await);
    let broker = NatsServer::start(&["a", "c"]).await;
    broker.provision().await;

    // a → b over b's API; a → c over NATS.
    let mut b_in_a = peer_spec("b", false);
    b_in_a.public_keys = keys_b.public_keys();
    add_peer(&a.client, "b", &b.peer_kubeconfig("a"), b_in_a).await;
    let mut c_in_a = peer_spec("c", false);
    c_in_a.public_keys = keys_c.public_keys();
    add_nats_peer(&a.client, "c", c_in_a).await;
    for (receiver, over_nats) in [(&b, false), (&c, true)] {
        let mut a_in = peer_spec("a", true);
        a_in.public_keys = keys_a.public_keys();
        if over_nats {
            add_nats_peer(&receiver.client, "a", a_in).await;
        } else {
            add_peer(
                &receiver.client,
                "a",
                &a.peer_kubeconfig(receiver.name()),
                a_in,
            )
            .await;
        }
    }
    let sets: Vec<PeerSet> = (0..3).map(|_| PeerSet::new()).collect();
    let mut tasks: Vec<Task> = [&a, &b, &c]
        .iter()
        .zip(&sets)
        .map(|(cluster, peers)| {
            Task::spawn(run_peer_controller(PeerContext {
                client: cluster.ferry.clone(),
                peers: peers.clone(),
                config: peer_config(),
            }))
        })
        .collect();
    for cluster in [&a, &b, &c] {
        ensure_namespace(&cluster.client, NS).await;
    }
    create_deployment(&a.client, NS, "web", REPLICAS, serde_json::json!({})).await;
    create_deployment(&a.client, NS, "api", REPLICAS, serde_json::json!({})).await;
    wait_available(&a.client, "web", REPLICAS).await;
    wait_available(&a.client, "api", REPLICAS).await;
    let (pa, pc) = (sets[0].clone(), sets[2].clone());
    until("peers known and usable", WAIT, || {
        let ok = pa.client("b").is_some()
            && pa
                .get("c")
                .is_some_and(|p| p.connected && p.client.is_none())
            && pc
                .get("a")
                .is_some_and(|p| p.spec.transport == Transport::Nats);
        async move { ok }
    })
    .await;
    // The NATS peer needs no kubeconfig: Connected, carried by NATS.
    let c_peer: ClusterPeer = Api::all(a.client.clone()).get("c").await.unwrap();
    let conditions = c_peer.status.unwrap().conditions;
    assert!(
        is_condition_true(&conditions, "Connected"),
        "{conditions:?}"
    );

    let link_a = broker.link("a").await;
    let sender = SenderContext::with_config(a.ferry.clone(), "a", sets[0].clone(), sender_config())
        .with_keys(KeyRing::new(a.keys().await))
        .with_nats(link_a.clone());
    tasks.push(Task::spawn(run_sender(sender.clone())));
    // The statuses the sender reads are the ones its own link's feed keeps.
    tasks.push(Task::spawn(link_a.run_status_feed()));
    for (cluster, peers) in [(&b, &sets[1]), (&c, &sets[2])] {
        let ctx = ReceiverContext::new(cluster.ferry.clone(), peers.clone(), receiver_config())
            .with_keys(KeyRing::new(cluster.keys().await));
        tasks.push(Task::spawn(run_receiver(ctx)));
    }
    let bridge = NatsReceiverContext::new(
        c.ferry.clone(),
        sets[2].clone(),
        broker.link("c").await,
        KeyRing::new(c.keys().await),
    );
    tasks.push(Task::spawn(run_nats_receiver(bridge)));

    let web = InvariantChecker::start(&a.client, &b.client, "web", REPLICAS);
    let api = InvariantChecker::start(&a.client, &c.client, "api", REPLICAS);
    let to_b = name_of(
        start_migration(&sender, MigrationRequest::deployment(NS, "web", "b"))
            .await
            .unwrap(),
    );
    let to_c = name_of(
        start_migration(&sender, MigrationRequest::deployment(NS, "api", "c"))
            .await
            .unwrap(),
    );
    let mirrors: Api<ferry::crd::WorkloadMigration> = Api::namespaced(a.client.clone(), NS);
    let mirror_b = wait_phase(&mirrors, &to_b, MigrationPhase::Completed).await;
    let mirror_c = wait_phase(&mirrors, &to_c, MigrationPhase::Completed).await;
    web.finish().await;
    api.finish().await;
    assert_eq!(mirror_b.spec.transport, Some(Transport::Kube));
    assert_eq!(mirror_c.spec.transport, Some(Transport::Nats));
    let inbox = |cluster: &support::cluster::TestCluster| {
        Api::<ferry::crd::WorkloadMigration>::namespaced(cluster.client.clone(), "ferry-inbox-a")
    };
    wait_phase(&inbox(&b), &to_b, MigrationPhase::Completed).await;
    wait_phase(&inbox(&c), &to_c, MigrationPhase::Completed).await;
    assert!(get_deployment(&b.client, "web").await.is_some());
    assert!(get_deployment(&c.client, "api").await.is_some());
    assert!(get_deployment(&c.client, "web").await.is_none());
    assert!(get_deployment(&b.client, "api").await.is_none());
    assert_eq!(count_in_flight(&a.client).await.unwrap(), 0);
    for task in tasks {
        task.stop().await;
    }
    for cluster in [a, b, c] {
        cluster.shutdown().await;
    }
}
