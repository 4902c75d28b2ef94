//! A fleet through one NATS broker against the same fleet over the
//! Kubernetes transport, in one process: N sandbox clusters, one sender,
//! receiver (and, over NATS, bridge and status feed) each, every cluster
//! moving one Deployment to the next at once.
//!
//! `FERRY_BENCH_CLUSTERS=20 cargo bench --bench transport`
//!
//! The senders poll their targets at the operator's default interval (2 s,
//! `FERRY_BENCH_POLL_MS` sets another): over the Kubernetes API a sender
//! learns of the target's progress only by polling, over NATS the status is
//! pushed to it. Receivers poll their Deployments at the tests' short
//! interval on both transports, so that part of a move costs the same.
//!
//! Reports per transport: migrations per second, median and p99 decision →
//! `Completed`, broker messages per migration (NATS), resident memory per
//! cluster, and the credentials the fleet needs (N for NATS, N×(N−1) for
//! the Kubernetes transport). The run stops itself after ten minutes.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use ferry::crd::{ClusterPeer, MigrationPhase, Transport, WorkloadMigration};
use ferry::migration::nats::{
    NatsReceiverContext, REQUEST_STREAM, STATUS_STREAM, run_nats_receiver,
};
use ferry::migration::{
    KeyRing, MigrationRequest, ReceiverContext, SenderConfig, SenderContext, run_receiver,
    run_sender, start_migration,
};
use ferry::peers::{PeerContext, PeerSet, run_peer_controller};
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::await_condition;
use support::cluster::world::{
    NS, create_deployment, peer_config, phase, receiver_config, sender_config, wait_available,
};
use support::cluster::{
    Task, TestCluster, ensure_namespace, peer_spec, put_kubeconfig_secret, start_clusters,
};
use support::nats::NatsServer;

/// The longest the whole benchmark runs.
const WALL: Duration = Duration::from_secs(600);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let n: usize = std::env::var("FERRY_BENCH_CLUSTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        .max(2);
    let poll = std::env::var("FERRY_BENCH_POLL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(SenderConfig::default().poll_interval, Duration::from_millis);
    let deadline = Instant::now() + WALL;
    println!(
        "fleet of {n} clusters, each moving one Deployment to the next at once; senders poll every {poll:?}"
    );
    for transport in [Transport::Nats, Transport::Kube] {
        match tokio::time::timeout_at(deadline.into(), fleet(n, transport, poll)).await {
            Ok(report) => report.print(n, transport),
            Err(_) => {
                println!("{transport:?}: stopped at the ten-minute cap");
                return;
            }
        }
    }
}

struct Report {
    per_second: f64,
    median: Duration,
    p99: Duration,
    messages_per_move: Option<f64>,
    rss_per_cluster_mib: f64,
}

impl Report {
    fn print(&self, n: usize, transport: Transport) {
        let credentials = match transport {
            Transport::Nats => n,
            Transport::Kube => n * (n - 1),
        };
        println!(
            "{transport:?}: {:.2} migrations/s, decision→Completed median {:?} p99 {:?}, {} broker messages per migration, {:.1} MiB resident per cluster, {credentials} credentials",
            self.per_second,
            self.median,
            self.p99,
            self.messages_per_move
                .map_or("no".to_owned(), |m| format!("{m:.1}")),
            self.rss_per_cluster_mib,
        );
    }
}

fn resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

async fn register(
    home: &TestCluster,
    peer: &str,
    peer_cluster: &TestCluster,
    transport: Transport,
    keys: &ferry::trust::ClusterKeys,
) {
    let mut spec = peer_spec(peer, true);
    spec.public_keys = keys.public_keys();
    spec.probe_interval = ferry::crd::Duration::new("60s");
    spec.transport = transport;
    spec.admission.rate_limit.burst = 1000;
    if transport == Transport::Kube {
        put_kubeconfig_secret(
            &home.client,
            peer,
            &peer_cluster.peer_kubeconfig(home.name()),
        )
        .await;
    } else {
        spec.kubeconfig_secret_ref = None;
    }
    Api::<ClusterPeer>::all(home.client.clone())
        .patch(
            peer,
            &PatchParams::apply("bench").force(),
            &Patch::Apply(&ClusterPeer::new(peer, spec)),
        )
        .await
        .expect("ClusterPeer written");
}

async fn fleet(n: usize, transport: Transport, poll: Duration) -> Report {
    let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let rss_before = resident_mib();
    let clusters = start_clusters(&refs, Duration::ZERO).await;
    let broker = match transport {
        Transport::Nats => {
            let broker = NatsServer::start(&refs).await;
            broker.provision().await;
            Some(broker)
        }
        Transport::Kube => None,
    };
    let mut keys = Vec::new();
    for c in &clusters {
        keys.push(c.keys().await);
    }
    for (i, home) in clusters.iter().enumerate() {
        for (j, peer) in clusters.iter().enumerate().filter(|(j, _)| *j != i) {
            register(home, &names[j], peer, transport, &keys[j]).await;
        }
        ensure_namespace(&home.client, NS).await;
        create_deployment(&home.client, NS, &format!("w{i}"), 1, serde_json::json!({})).await;
    }
    let mut tasks = Vec::new();
    let mut senders = Vec::new();
    for (i, c) in clusters.iter().enumerate() {
        let peers = PeerSet::new();
        tasks.push(Task::spawn(run_peer_controller(PeerContext {
            client: c.ferry.clone(),
            peers: peers.clone(),
            config: peer_config(),
        })));
        let config = SenderConfig {
            poll_interval: poll,
            ..sender_config()
        };
        let mut sender =
            SenderContext::with_config(c.ferry.clone(), &names[i], peers.clone(), config)
                .with_keys(KeyRing::new(c.keys().await));
        if let Some(broker) = &broker {
            let link = broker.link(&names[i]).await;
            sender = sender.with_nats(link.clone());
            tasks.push(Task::spawn(link.run_status_feed()));
            let bridge = NatsReceiverContext::new(
                c.ferry.clone(),
                peers.clone(),
                broker.link(&names[i]).await,
                KeyRing::new(c.keys().await),
            );
            tasks.push(Task::spawn(run_nats_receiver(bridge)));
        }
        tasks.push(Task::spawn(run_sender(sender.clone())));
        let receiver = ReceiverContext::new(c.ferry.clone(), peers.clone(), receiver_config())
            .with_keys(KeyRing::new(c.keys().await));
        tasks.push(Task::spawn(run_receiver(receiver)));
        senders.push((sender, peers));
    }
    for (i, c) in clusters.iter().enumerate() {
        wait_available(&c.client, &format!("w{i}"), 1).await;
        let next = &names[(i + 1) % n];
        let peers = &senders[i].1;
        support::cluster::until("the next peer known", support::cluster::WAIT, || {
            let ok = peers.get(next).is_some_and(|p| {
                p.spec.transport == transport
                    && (transport == Transport::Nats || p.client.is_some())
            });
            async move { ok }
        })
        .await;
    }

    // Every cluster decides at once, as independent operators would: one
    // task each starts its move and watches its mirror to the end.
    let start = Instant::now();
    let mut pending = Vec::new();
    for (i, (sender, _)) in senders.iter().enumerate() {
        let request = MigrationRequest::deployment(NS, &format!("w{i}"), &names[(i + 1) % n]);
        let sender = sender.clone();
        let mirrors: Api<WorkloadMigration> = Api::namespaced(clusters[i].client.clone(), NS);
        pending.push(tokio::spawn(async move {
            let decided = Instant::now();
            let name = match start_migration(&sender, request).await.expect("started") {
                ferry::migration::StartOutcome::Created { name } => name,
                other => panic!("{other:?}"),
            };
            let ended = await_condition(mirrors, &name, |m: Option<&WorkloadMigration>| {
                m.is_some_and(|m| phase(m).is_terminal())
            })
            .await
            .expect("watch the mirror")
            .expect("the mirror exists");
            assert_eq!(phase(&ended), MigrationPhase::Completed, "{name} ended");
            decided.elapsed()
        }));
    }
    let mut took: Vec<Duration> = futures::future::join_all(pending)
        .await
        .into_iter()
        .map(|r| r.expect("the move's task"))
        .collect();
    let total = start.elapsed();
    took.sort();
    let messages_per_move = match &broker {
        Some(broker) => {
            let admin = broker.admin().await;
            let mut messages = 0;
            for stream in [REQUEST_STREAM, STATUS_STREAM] {
                messages += admin
                    .get_stream(stream)
                    .await
                    .unwrap()
                    .get_info()
                    .await
                    .unwrap()
                    .state
                    .last_sequence;
            }
            Some(messages as f64 / n as f64)
        }
        None => None,
    };
    let rss = resident_mib() - rss_before;
    for task in tasks {
        task.stop().await;
    }
    drop(broker);
    for c in clusters {
        c.shutdown().await;
    }
    Report {
        per_second: n as f64 / total.as_secs_f64(),
        median: took[took.len() / 2],
        p99: took[(took.len() * 99 / 100).min(took.len() - 1)],
        messages_per_move,
        rss_per_cluster_mib: rss / n as f64,
    }
}
