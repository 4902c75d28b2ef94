//! Progressive cutover and partial moves on two sandbox clusters: the
//! target grows a step at a time and the source shrinks by the same amount
//! only after the step's replicas are ready and the health gate, read from
//! a real Prometheus, passes; a partial move carries only some replicas and
//! leaves the rest. A sampler reads both clusters all along and fails the
//! test if the ready replicas summed over both ever fall below
//! `minAvailable`.

mod support;
use support::cluster as support_cluster;
use support::prometheus::Prometheus;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use ferry::crd::{GateQuery, MigrationPhase, MigrationStrategy, ReplicaCount, StrategyType};
use ferry::metrics::{MetricsSource, PrometheusConfig, PrometheusEndpoint, PrometheusSource};
use ferry::migration::{GateMetrics, start_migration};
use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Client, ResourceExt};
use support_cluster::world::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

const KUBELET: Duration = Duration::from_millis(30);

fn progressive(pause: &str, gate: Vec<GateQuery>) -> MigrationStrategy {
    MigrationStrategy {
        type_: StrategyType::Progressive,
        step: Some(ReplicaCount::Count(1)),
        pause: Some(ferry::crd::Duration::new(pause)),
        min_available: None,
        gate,
    }
}

/// What the sampler saw of `apps/web` in both clusters.
#[derive(Default, Clone, Debug)]
struct Seen {
    samples: usize,
    /// Every distinct (source replicas, target replicas) pair, in order.
    replicas: Vec<(i32, i32)>,
    /// Samples where ready(a) + ready(b) < the floor.
    breaches: Vec<String>,
}

/// Samples both clusters every 10 ms, recording the desired replicas of
/// each side and checking the summed ready replicas against `floor`. It
/// also publishes the target's desired replicas for the metrics endpoint.
struct Sampler {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    handle: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(a: &Client, b: &Client, floor: i32, target_replicas: Arc<AtomicI32>) -> Sampler {
        let (a, b) = (a.clone(), b.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (flag, record) = (stop.clone(), seen.clone());
        let handle = tokio::spawn(async move {
            let counts = |d: Option<Deployment>| {
                d.map_or((0, 0), |d| {
                    let desired = d.spec.replicas.unwrap_or(0);
                    let ready = d.status.and_then(|s| s.ready_replicas).unwrap_or(0);
                    (desired, ready)
                })
            };
            while !flag.load(Ordering::SeqCst) {
                let (da, db) =
                    tokio::join!(get_deployment(&a, WORKLOAD), get_deployment(&b, WORKLOAD));
                let ((want_a, ready_a), (want_b, ready_b)) = (counts(da), counts(db));
                target_replicas.store(want_b, Ordering::SeqCst);
                let mut seen = record.lock().await;
                seen.samples += 1;
                if seen.replicas.last() != Some(&(want_a, want_b)) {
                    seen.replicas.push((want_a, want_b));
                }
                if ready_a + ready_b < floor {
                    let n = seen.samples;
                    seen.breaches.push(format!(
                        "sample {n}: ready a={ready_a} b={ready_b}, below minAvailable {floor}"
                    ));
                }
                drop(seen);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        Sampler { stop, seen, handle }
    }

    /// Stops sampling; fails on any breach of the floor.
    async fn finish(self) -> Seen {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.await.expect("sampler task");
        let seen = self.seen.lock().await.clone();
        assert!(seen.samples > 0, "the sampler never sampled");
        assert!(
            seen.breaches.is_empty(),
            "minAvailable breached: {:#?}",
            seen.breaches
        );
        seen
    }
}

/// Every desired replica count the source Deployment had, in order, from
/// a watch (which, unlike sampling, misses no change).
struct ReplicaHistory {
    handle: tokio::task::JoinHandle<()>,
    counts: Arc<Mutex<Vec<i32>>>,
}

impl ReplicaHistory {
    async fn watch(client: &Client) -> ReplicaHistory {
        use futures::StreamExt;
        use kube::runtime::watcher;
        let api: kube::Api<Deployment> = kube::Api::namespaced(client.clone(), NS);
        let counts: Arc<Mutex<Vec<i32>>> = Arc::default();
        let record = counts.clone();
        let (started, ready) = tokio::sync::oneshot::channel();
        let handle = tokio::spawn(async move {
            let mut started = Some(started);
            let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let deployment = match event {
                    Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => d,
                    Ok(watcher::Event::InitDone) => {
                        if let Some(s) = started.take() {
                            let _ = s.send(());
                        }
                        continue;
                    }
                    _ => continue,
                };
                if deployment.name_any() != WORKLOAD {
                    continue;
                }
                let replicas = deployment.spec.replicas.unwrap_or(1);
                let mut counts = record.lock().await;
                if counts.last() != Some(&replicas) {
                    counts.push(replicas);
                }
            }
        });
        ready.await.expect("the watch lists the source");
        ReplicaHistory { handle, counts }
    }

    async fn finish(self) -> Vec<i32> {
        self.handle.abort();
        self.counts.lock().await.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progressive_move_shrinks_the_source_a_step_after_the_target_grows() {
    let mut world = World::start(KUBELET).await;
    world.start_receiver();
    world.start_sender();
    // Three replicas with the Deployment's default maxUnavailable (25%,
    // rounded down: none): all three must stay ready throughout.
    let sampler = Sampler::start(&world.a.client, &world.b.client, REPLICAS, Arc::default());
    let history = ReplicaHistory::watch(&world.a.client).await;
    let mut request = world.request();
    request.strategy = Some(progressive("0s", Vec::new()));
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    let seen = sampler.finish().await;

    assert_eq!(
        history.finish().await,
        vec![3, 2, 1, 0],
        "the source shrinks a replica per step (sampled: {:?})",
        seen.replicas
    );
    let progress = mirror
        .status
        .unwrap()
        .progress
        .expect("the mirror's progress");
    assert_eq!((progress.step, progress.steps), (3, 3));
    assert_eq!(progress.target_replicas, REPLICAS);
    let target = get_deployment(&world.b.client, WORKLOAD).await.unwrap();
    assert_eq!(target.spec.replicas, Some(REPLICAS));
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(0));
    assert_eq!(
        source
            .annotations()
            .get("ferry.dev/migrated-to")
            .map(String::as_str),
        Some("b")
    );
    world.shutdown().await;
}

/// `/metrics` serving an error ratio for `apps`: none while the target
/// runs at most one replica, 20% once it runs more, as if the new cluster
/// failed under real traffic.
async fn error_ratio_endpoint(
    target_replicas: Arc<AtomicI32>,
) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let handle = tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let ratio = if target_replicas.load(Ordering::SeqCst) > 1 {
                0.2
            } else {
                0.0
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let body = format!(
                    "# TYPE app_error_ratio gauge\napp_error_ratio{{namespace=\"{NS}\"}} {ratio}\n"
                );
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    (address, handle)
}

/// The target cluster's Prometheus, read as the operator reads it.
struct Gate(PrometheusSource);

impl GateMetrics for Gate {
    fn values<'a>(
        &'a self,
        cluster: &'a str,
        query: &'a str,
    ) -> BoxFuture<'a, Result<Vec<f64>, String>> {
        Box::pin(async move {
            self.0
                .instant_values(cluster, query)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_gate_walks_the_move_back_step_by_step() {
    let target_replicas = Arc::new(AtomicI32::new(0));
    let (address, server) = error_ratio_endpoint(target_replicas.clone()).await;
    let prometheus = Prometheus::scraping(&address, Duration::from_millis(100));
    let mut world = World::start(KUBELET).await;
    let endpoint = PrometheusEndpoint {
        url: prometheus.url().to_owned(),
        bearer_token: None,
        ca_pem: None,
        cluster_label: None,
        allow_token_over_plain_http: false,
    };
    let source =
        PrometheusSource::new(PrometheusConfig::default(), [("b".to_owned(), endpoint)]).unwrap();
    world.sender_ctx = world
        .sender_ctx
        .clone()
        .with_gate_metrics(Arc::new(Gate(source)));
    world.start_receiver();
    world.start_sender();
    let sampler = Sampler::start(
        &world.a.client,
        &world.b.client,
        REPLICAS,
        target_replicas.clone(),
    );
    let history = ReplicaHistory::watch(&world.a.client).await;
    // The worst value of the last hour: once the target served errors, the
    // gate stays failed. The pause gives Prometheus many scrapes of each
    // step before the gate is read.
    let gate = vec![GateQuery {
        name: "error-ratio".into(),
        query: r#"max_over_time(app_error_ratio{namespace="$namespace"}[1h])"#.into(),
        below: Some(0.01),
        above: None,
    }];
    let mut request = world.request();
    request.strategy = Some(progressive("2s", gate));
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::RolledBack).await;
    sampler.finish().await;
    server.abort();

    let status = mirror.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("HealthGateFailed"));
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("error-ratio returned 0.2") && message.contains("not below 0.01"),
        "{message}"
    );
    assert!(
        !message.contains("step 1 of 3"),
        "step 1 served no errors and passed: {message}"
    );
    // Down a step after step 1 passed, back up one step at a time.
    let steps = history.finish().await;
    assert_eq!(&steps[..2], &[3, 2], "{steps:?}");
    assert_eq!(steps.last(), Some(&3), "{steps:?}");
    assert!(
        steps.windows(2).all(|w| (w[0] - w[1]).abs() == 1),
        "one replica per step, down and back up: {steps:?}"
    );
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(REPLICAS));
    assert!(
        !source.annotations().contains_key("ferry.dev/migration"),
        "the rollback clears the move's record from the source"
    );
    assert!(get_deployment(&world.b.client, WORKLOAD).await.is_none());
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_move_carries_some_replicas_and_leaves_the_rest() {
    let mut world = World::start(KUBELET).await;
    world.start_receiver();
    world.start_sender();
    // A partial move that asks to delete the source is refused before
    // anything is written: the replicas left there would go too.
    let mut request = world.request();
    request.replicas = Some(1);
    request.source_action = ferry::crd::SourceAction::Delete;
    let refused = start_migration(&world.sender_ctx, request)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("sourceAction Delete"),
        "{refused}"
    );
    assert!(
        world
            .mirrors()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let sampler = Sampler::start(&world.a.client, &world.b.client, REPLICAS, Arc::default());
    let mut request = world.request();
    request.replicas = Some(2);
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    sampler.finish().await;

    let partial = mirror.spec.partial.expect("the request says it is partial");
    assert_eq!((partial.replicas, partial.of), (2, REPLICAS));
    let source = get_deployment(&world.a.client, WORKLOAD).await.unwrap();
    let target = get_deployment(&world.b.client, WORKLOAD).await.unwrap();
    assert_eq!(source.spec.replicas, Some(1), "the rest stays");
    assert_eq!(target.spec.replicas, Some(2));
    let placement = |d: &Deployment| {
        d.annotations()
            .get("ferry.dev/placement")
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(placement(&source), "1 of 3 replicas here, 2 in b");
    assert_eq!(placement(&target), "2 of 3 replicas here, 1 in a");
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_progressive_move_steps_up_to_what_moves() {
    let mut world = World::start(KUBELET).await;
    world.start_receiver();
    world.start_sender();
    let sampler = Sampler::start(&world.a.client, &world.b.client, REPLICAS, Arc::default());
    let history = ReplicaHistory::watch(&world.a.client).await;
    let mut request = world.request();
    request.replicas = Some(2);
    request.strategy = Some(progressive("0s", Vec::new()));
    let name = started_name(start_migration(&world.sender_ctx, request).await.unwrap());
    let mirror = wait_phase(&world.mirrors(), &name, MigrationPhase::Completed).await;
    sampler.finish().await;

    assert_eq!(history.finish().await, vec![3, 2, 1]);
    let progress = mirror.status.unwrap().progress.unwrap();
    assert_eq!(
        (progress.step, progress.steps, progress.target_replicas),
        (2, 2, 2)
    );
    let target = get_deployment(&world.b.client, WORKLOAD).await.unwrap();
    assert_eq!(target.spec.replicas, Some(2));
    world.shutdown().await;
}
