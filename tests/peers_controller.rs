//! The ClusterPeer controller against sandbox API servers: conditions,
//! Secret rotation and refused kubeconfigs.

mod support;
use support::cluster as support_cluster;

use std::time::Duration;

use ferry::crd::{ClusterPeer, WorkloadMigration, find_condition, types};
use ferry::peers::{PeerContext, PeerSet, reasons, run_peer_controller};
use kube::Api;
use support_cluster::world::peer_config;
use support_cluster::*;

/// Waits until peer `name`'s Connected condition has `status` and `reason`.
async fn wait_connected(
    client: &kube::Client,
    name: &str,
    status: &str,
    reason: &str,
) -> ClusterPeer {
    let api: Api<ClusterPeer> = Api::all(client.clone());
    eventually(
        &format!("{name} Connected={status} ({reason})"),
        WAIT,
        || {
            let api = api.clone();
            async move {
                let peer = api.get(name).await.ok()?;
                let c = find_condition(&peer.status.as_ref()?.conditions, types::CONNECTED)?;
                (c.status == status && c.reason == reason).then_some(peer)
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_kubeconfig_secret_rebuilds_the_client() {
    let clusters = start_clusters(&["home", "east", "west"], Duration::from_millis(20)).await;
    let (home, east, west) = (&clusters[0], &clusters[1], &clusters[2]);
    add_peer(
        &home.client,
        "remote",
        &east.peer_kubeconfig("home"),
        peer_spec("remote", false),
    )
    .await;
    let peers = PeerSet::new();
    let controller = Task::spawn(run_peer_controller(PeerContext {
        client: home.ferry.clone(),
        peers: peers.clone(),
        config: peer_config(),
    }));
    let peer = wait_connected(&home.client, "remote", "True", reasons::REACHABLE).await;
    let status = peer.status.unwrap();
    assert!(status.server_version.is_some());
    let ready = find_condition(&status.conditions, types::READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", reasons::PEER_READY)
    );

    // The registry's client talks to east: it sees a request that exists
    // only in east, in home's inbox there (all a peer credential may read).
    let only_in_east = only_in_east_request();
    Api::<WorkloadMigration>::namespaced(east.client.clone(), INBOX)
        .create(&Default::default(), &only_in_east)
        .await
        .unwrap();
    let client = peers.client("remote").expect("client");
    let inbox: Api<WorkloadMigration> = Api::namespaced(client, INBOX);
    assert!(inbox.get_opt("only-in-east").await.unwrap().is_some());

    // Rotation: the Secret now holds west's kubeconfig (another server, another token).
    put_kubeconfig_secret(&home.client, "remote", &west.peer_kubeconfig("home")).await;
    eventually("client rebuilt for west", WAIT, || {
        let peers = peers.clone();
        async move {
            let client = peers.client("remote")?;
            let inbox: Api<WorkloadMigration> = Api::namespaced(client, INBOX);
            inbox
                .get_opt("only-in-east")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    wait_connected(&home.client, "remote", "True", reasons::REACHABLE).await;

    // West goes down: Connected turns False with Unreachable, and back.
    let mut clusters = clusters;
    clusters[2].sandbox.stop().await;
    wait_connected(&clusters[0].client, "remote", "False", reasons::UNREACHABLE).await;
    assert!(
        peers.client("remote").is_none(),
        "an unreachable peer is not handed out as connected"
    );
    clusters[2].sandbox.restart().await.unwrap();
    wait_connected(&clusters[0].client, "remote", "True", reasons::REACHABLE).await;

    controller.stop().await;
    for c in clusters {
        c.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_or_missing_kubeconfigs_are_refused_with_a_reason() {
    let clusters = start_clusters(&["home", "east"], Duration::from_millis(20)).await;
    let (home, east) = (&clusters[0], &clusters[1]);
    let insecure = east.kubeconfig().replace(
        "    certificate-authority-data:",
        "    insecure-skip-tls-verify: true\n    x-was-ca:",
    );
    add_peer(
        &home.client,
        "skip-tls",
        &insecure,
        peer_spec("skip-tls", false),
    )
    .await;
    let plain_http = east.kubeconfig().replace("https://", "http://");
    add_peer(
        &home.client,
        "plain",
        &plain_http,
        peer_spec("plain", false),
    )
    .await;
    let exec = east.kubeconfig().replace(
        &format!("    token: {}", east.sandbox.token()),
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true",
    );
    add_peer(&home.client, "exec", &exec, peer_spec("exec", false)).await;
    // A Secret that does not exist.
    let api: Api<ClusterPeer> = Api::all(home.client.clone());
    let missing = ClusterPeer::new("missing", peer_spec("missing", false));
    api.patch(
        "missing",
        &kube::api::PatchParams::apply("test"),
        &kube::api::Patch::Apply(&missing),
    )
    .await
    .unwrap();
    // The insecure one is accepted when the peer opts in.
    let mut allowed = peer_spec("skip-tls-allowed", false);
    allowed.insecure.skip_tls_verify = true;
    add_peer(&home.client, "skip-tls-allowed", &insecure, allowed).await;

    let peers = PeerSet::new();
    let controller = Task::spawn(run_peer_controller(PeerContext {
        client: home.ferry.clone(),
        peers: peers.clone(),
        config: peer_config(),
    }));
    for (name, reason) in [
        ("skip-tls", reasons::INSECURE_KUBECONFIG),
        ("plain", reasons::INSECURE_KUBECONFIG),
        ("exec", reasons::INSECURE_KUBECONFIG),
        ("missing", reasons::SECRET_NOT_FOUND),
    ] {
        let peer = wait_connected(&home.client, name, "False", reason).await;
        let ready = find_condition(&peer.status.as_ref().unwrap().conditions, types::READY)
            .unwrap()
            .clone();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", reason),
            "{name}"
        );
        assert!(
            peers.get(name).expect("known").client.is_none(),
            "{name} got a client"
        );
    }
    wait_connected(&home.client, "skip-tls-allowed", "True", reasons::REACHABLE).await;

    // Transition times move only on a change: at a later probe (Time is
    // written with whole seconds) the probe time moves and the transition
    // time does not.
    let before = wait_connected(&home.client, "skip-tls-allowed", "True", reasons::REACHABLE).await;
    let probed_at = |p: &ClusterPeer| p.status.as_ref().unwrap().last_probe_time.clone();
    let after = eventually("a later probe of skip-tls-allowed", WAIT, || {
        let (client, earlier) = (home.client.clone(), probed_at(&before));
        async move {
            let peer =
                wait_connected(&client, "skip-tls-allowed", "True", reasons::REACHABLE).await;
            (probed_at(&peer) != earlier).then_some(peer)
        }
    })
    .await;
    let time = |p: &ClusterPeer| {
        find_condition(&p.status.as_ref().unwrap().conditions, types::CONNECTED)
            .unwrap()
            .last_transition_time
            .clone()
    };
    assert_eq!(time(&before), time(&after));

    // A deleted ClusterPeer leaves the registry.
    api.delete("missing", &Default::default()).await.unwrap();
    eventually("missing pruned", WAIT, || {
        let gone = peers.get("missing").is_none();
        async move { gone.then_some(()) }
    })
    .await;

    controller.stop().await;
    for c in clusters {
        c.shutdown().await;
    }
}

/// home's inbox in the other clusters.
const INBOX: &str = "ferry-inbox-home";

/// A request that marks which cluster a client reaches.
fn only_in_east_request() -> WorkloadMigration {
    let spec = serde_json::from_value(serde_json::json!({
        "requestId": "marker", "sourceCluster": "home", "targetCluster": "east",
        "targetNamespace": "apps", "workload": {}, "deadline": "2099-01-01T00:00:00Z",
        "role": "Target",
    }))
    .unwrap();
    WorkloadMigration::new("only-in-east", spec)
}
