//! Two clusters, `a` (sender) and `b` (receiver), peered both ways with the
//! real peer controllers, a Deployment `apps/web` serving in `a`, and the
//! migration controllers started and stopped at will. Plus the invariant
//! checker that samples both clusters while a test runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferry::crd::{MigrationPhase, WorkloadMigration};
use ferry::migration::{
    KeyRing, MigrationRequest, ReceiverConfig, ReceiverContext, SenderConfig, SenderContext,
    run_receiver, run_sender,
};
use ferry::peers::{PeerConfig, PeerContext, PeerSet, run_peer_controller};
use ferry::trust::ClusterKeys;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::Mutex;

use super::{Task, TestCluster, add_peer, ensure_namespace, eventually, peer_spec, start_clusters};

pub const NS: &str = "apps";
pub const WORKLOAD: &str = "web";
pub const REPLICAS: i32 = 3;
/// The inbox of `a` in `b`.
pub const INBOX_A: &str = "ferry-inbox-a";
pub use super::WAIT;

pub struct World {
    pub a: TestCluster,
    pub b: TestCluster,
    /// The keys of `a` and `b` (as in their key Secrets).
    pub keys_a: ClusterKeys,
    pub keys_b: ClusterKeys,
    pub peers_a: PeerSet,
    pub peers_b: PeerSet,
    pub sender_ctx: SenderContext,
    pub receiver_ctx: ReceiverContext,
    peer_controllers: Vec<Task>,
    sender: Option<Task>,
    receiver: Option<Task>,
}

pub fn sender_config() -> SenderConfig {
    SenderConfig {
        poll_interval: Duration::from_millis(20),
        backoff_base: Duration::from_millis(20),
        backoff_max: Duration::from_millis(400),
        ..SenderConfig::default()
    }
}

pub fn receiver_config() -> ReceiverConfig {
    ReceiverConfig {
        poll_interval: Duration::from_millis(50),
        backoff_base: Duration::from_millis(20),
        backoff_max: Duration::from_millis(400),
        operator_namespace: Some(super::FERRY_NAMESPACE.into()),
        ..ReceiverConfig::default()
    }
}

pub fn peer_config() -> PeerConfig {
    PeerConfig {
        connect_timeout: Duration::from_millis(500),
        read_timeout: Duration::from_secs(2),
        error_requeue: Duration::from_millis(100),
        namespace: Some(super::FERRY_NAMESPACE.into()),
        ..PeerConfig::default()
    }
}

impl World {
    /// Both clusters, peered, `apps/web` available in `a`; controllers off.
    pub async fn start(kubelet_delay: Duration) -> World {
        let mut clusters = start_clusters(&["a", "b"], kubelet_delay).await;
        let b = clusters.pop().expect("b");
        let a = clusters.pop().expect("a");
        // Peered as `ferry peer join` leaves them: each knows the other's
        // public keys.
        let (keys_a, keys_b) = (a.keys().await, b.keys().await);
        let mut b_in_a = peer_spec("b", false);
        b_in_a.public_keys = keys_b.public_keys();
        add_peer(&a.client, "b", &b.peer_kubeconfig("a"), b_in_a).await;
        let mut a_in_b = peer_spec("a", true);
        a_in_b.public_keys = keys_a.public_keys();
        // The tests send bursts of requests on purpose, and one into a
        // namespace that is allowed but does not exist.
        a_in_b.admission.rate_limit.burst = 1000;
        a_in_b.allowed_namespaces.push("nowhere".into());
        add_peer(&b.client, "a", &a.peer_kubeconfig("b"), a_in_b).await;
        let peers_a = PeerSet::new();
        let peers_b = PeerSet::new();
        let peer_controllers = vec![
            Task::spawn(run_peer_controller(PeerContext {
                client: a.ferry.clone(),
                peers: peers_a.clone(),
                config: peer_config(),
            })),
            Task::spawn(run_peer_controller(PeerContext {
                client: b.ferry.clone(),
                peers: peers_b.clone(),
                config: peer_config(),
            })),
        ];
        for c in [&a, &b] {
            ensure_namespace(&c.client, NS).await;
        }
        create_deployment(&a.client, NS, WORKLOAD, REPLICAS, serde_json::json!({})).await;
        wait_available(&a.client, WORKLOAD, REPLICAS).await;
        let (pa, pb) = (peers_a.clone(), peers_b.clone());
        eventually("peers connected", WAIT, || {
            let ok = pa.client("b").is_some() && pb.client("a").is_some();
            async move { ok.then_some(()) }
        })
        .await;
        let sender_ctx =
            SenderContext::with_config(a.ferry.clone(), "a", peers_a.clone(), sender_config())
                .with_keys(KeyRing::new(a.keys().await));
        let receiver_ctx =
            ReceiverContext::new(b.ferry.clone(), peers_b.clone(), receiver_config())
                .with_keys(KeyRing::new(b.keys().await));
        World {
            a,
            b,
            keys_a,
            keys_b,
            peers_a,
            peers_b,
            sender_ctx,
            receiver_ctx,
            peer_controllers,
            sender: None,
            receiver: None,
        }
    }

    pub fn start_sender(&mut self) {
        assert!(self.sender.is_none(), "sender already running");
        self.sender = Some(Task::spawn(run_sender(self.sender_ctx.clone())));
    }

    pub async fn stop_sender(&mut self) {
        if let Some(task) = self.sender.take() {
            task.stop().await;
        }
    }

    pub fn start_receiver(&mut self) {
        assert!(self.receiver.is_none(), "receiver already running");
        self.receiver = Some(Task::spawn(run_receiver(self.receiver_ctx.clone())));
    }

    pub async fn stop_receiver(&mut self) {
        if let Some(task) = self.receiver.take() {
            task.stop().await;
        }
    }

    pub fn request(&self) -> MigrationRequest {
        MigrationRequest::deployment(NS, WORKLOAD, "b")
    }

    pub fn mirrors(&self) -> Api<WorkloadMigration> {
        Api::namespaced(self.a.client.clone(), NS)
    }

    /// The requests `a` sent to `b`: in `b`, in the inbox of `a`.
    pub fn targets(&self) -> Api<WorkloadMigration> {
        Api::namespaced(self.b.client.clone(), INBOX_A)
    }

    /// Makes `apps/web` in `a` read the Secret `web-secret`, which then
    /// travels with its move.
    pub async fn mount_a_secret(&self) {
        let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "web-secret"}, "data": {"password": "aHVudGVyMg=="}}),
        )
        .unwrap();
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(self.a.client.clone(), NS)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let pod = super::restricted(
            serde_json::json!({"containers": [{"name": "app", "image": "nginx:1.27",
            "envFrom": [{"secretRef": {"name": "web-secret"}}]}]}),
        );
        Api::<Deployment>::namespaced(self.a.client.clone(), NS)
            .patch(
                WORKLOAD,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&serde_json::json!({"spec": {"template": {"spec": pod}}})),
            )
            .await
            .unwrap();
        wait_available(&self.a.client, WORKLOAD, REPLICAS).await;
    }

    /// What `a`'s Ferry holds for `b`: the peer credential the chart renders.
    pub async fn peer_a_in_b(&self) -> Client {
        super::client_for_kubeconfig(&self.b.peer_kubeconfig("a")).await
    }

    /// A plain request for `apps/<name>` as `a` would send it (claiming
    /// `source`), signed by `a`.
    pub fn signed_request(&self, name: &str, source: &str) -> WorkloadMigration {
        let workload = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": super::restricted(serde_json::json!({"containers": [{"name": "app", "image": "nginx:1.27"}]}))}},
        });
        request_object(
            name,
            source,
            NS,
            workload,
            serde_json::json!([]),
            Some(&self.keys_a),
        )
    }

    /// Starts a move of `apps/web` whose copy in b never becomes available,
    /// and waits until b has created it: a move in flight, not yet `Ready`.
    pub async fn progressing_move(&mut self) -> String {
        self.b.sandbox.kubelet().set_rollouts_ready(false);
        self.start_sender();
        self.start_receiver();
        let outcome = ferry::migration::start_migration(&self.sender_ctx, self.request())
            .await
            .unwrap();
        let name = started_name(outcome);
        wait_phase(&self.targets(), &name, MigrationPhase::Progressing).await;
        name
    }

    pub async fn shutdown(mut self) {
        self.stop_sender().await;
        self.stop_receiver().await;
        for task in self.peer_controllers.drain(..) {
            task.stop().await;
        }
        self.a.shutdown().await;
        self.b.shutdown().await;
    }
}

/// Creates a Deployment with `replicas`, merging `pod_spec_extra` into its pod spec.
pub async fn create_deployment(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
    pod_spec_extra: serde_json::Value,
) {
    let mut object = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
            },
        },
    });
    object["spec"]["template"]["spec"] =
        super::restricted(object["spec"]["template"]["spec"].take());
    if let Some(extra) = pod_spec_extra.as_object() {
        for (k, v) in extra {
            object["spec"]["template"]["spec"][k] = v.clone();
        }
    }
    let deployment: Deployment = serde_json::from_value(object).expect("deployment");
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment)
        .await
        .expect("deployment created");
}

pub async fn get_deployment(client: &Client, name: &str) -> Option<Deployment> {
    Api::<Deployment>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

pub async fn wait_available(client: &Client, name: &str, replicas: i32) {
    let client = client.clone();
    eventually("deployment available", WAIT, || {
        let client = client.clone();
        async move {
            let d = get_deployment(&client, name).await?;
            (d.status?.available_replicas? >= replicas).then_some(())
        }
    })
    .await;
}

/// The name of the move [`ferry::migration::start_migration`] started or found.
pub fn started_name(outcome: ferry::migration::StartOutcome) -> String {
    match outcome {
        ferry::migration::StartOutcome::Created { name }
        | ferry::migration::StartOutcome::AlreadyExists { name } => name,
    }
}

pub fn phase(wm: &WorkloadMigration) -> MigrationPhase {
    wm.status.as_ref().map(|s| s.phase).unwrap_or_default()
}

/// Waits until the request `name` in `api` reaches `wanted`.
pub async fn wait_phase(
    api: &Api<WorkloadMigration>,
    name: &str,
    wanted: MigrationPhase,
) -> WorkloadMigration {
    let api = api.clone();
    eventually(&format!("{name} to reach {wanted:?}"), WAIT, || {
        let api = api.clone();
        async move {
            let wm = api.get_opt(name).await.ok().flatten()?;
            (phase(&wm) == wanted).then_some(wm)
        }
    })
    .await
}

/// Samples both clusters every 20 ms: at every sample the workload must
/// have its desired available replicas in at least one of them (a cluster
/// that cannot be read counts as serving nothing).
pub struct InvariantChecker {
    stop: Arc<AtomicBool>,
    handle: tokio::task::JoinHandle<(usize, Vec<String>)>,
}

impl InvariantChecker {
    pub fn start(a: &Client, b: &Client, name: &str, desired: i32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (a, b, name, flag) = (a.clone(), b.clone(), name.to_owned(), stop.clone());
        let violations = Arc::new(Mutex::new(Vec::new()));
        let handle = tokio::spawn(async move {
            let mut samples = 0;
            while !flag.load(Ordering::SeqCst) {
                let available = |d: Option<Deployment>| {
                    d.and_then(|d| d.status)
                        .and_then(|s| s.available_replicas)
                        .unwrap_or(0)
                };
                let (da, db) = tokio::join!(get_deployment(&a, &name), get_deployment(&b, &name));
                let (aa, ab) = (available(da), available(db));
                samples += 1;
                if aa < desired && ab < desired {
                    violations.lock().await.push(format!(
                        "sample {samples}: available a={aa} b={ab}, desired {desired}"
                    ));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let v = violations.lock().await.clone();
            (samples, v)
        });
        Self { stop, handle }
    }

    /// Stops sampling; panics on any violation.
    pub async fn finish(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        let (samples, violations) = self.handle.await.expect("checker task");
        assert!(violations.is_empty(), "invariant broken: {violations:#?}");
        assert!(samples > 0, "the checker never sampled");
        samples
    }
}

/// How many clusters run the workload with replicas > 0.
pub async fn serving_copies(world: &World) -> usize {
    let mut n = 0;
    for client in [&world.a.client, &world.b.client] {
        if let Some(d) = get_deployment(client, WORKLOAD).await
            && d.spec.replicas.unwrap_or(1) > 0
        {
            n += 1;
        }
    }
    n
}

/// A request (role `Target`) as a sender would place it in an inbox,
/// claiming `source`, for the workload `workload` into `namespace`, signed
/// with `keys` (with its first intent) unless `None`.
pub fn request_object(
    name: &str,
    source: &str,
    namespace: &str,
    workload: serde_json::Value,
    secrets: serde_json::Value,
    keys: Option<&ferry::trust::ClusterKeys>,
) -> WorkloadMigration {
    let mut spec: ferry::crd::WorkloadMigrationSpec = serde_json::from_value(serde_json::json!({
        "requestId": name, "sourceCluster": source, "targetCluster": "b",
        "targetNamespace": namespace, "workload": workload, "secrets": secrets,
        "deadline": "2099-01-01T00:00:00Z", "role": "Target",
        "nonce": format!("nonce-{name}"), "issuedAt": jiff::Timestamp::now().to_string(),
        "intent": {"action": "Proceed", "sequence": 1},
    }))
    .expect("request spec");
    if let Some(keys) = keys {
        ferry::migration::sign_request(keys, &mut spec).expect("signed");
        let intent = ferry::migration::signed_intent(
            keys,
            &spec,
            ferry::crd::IntentAction::Proceed,
            1,
            None,
        )
        .expect("signed intent");
        spec.intent = Some(intent);
    }
    let mut wm = WorkloadMigration::new(name, spec);
    wm.metadata.labels = Some([("ferry.dev/role".to_owned(), "target".to_owned())].into());
    wm
}

/// Waits for an Event with `reason` about the request `name` in `namespace`.
pub async fn wait_event(client: &Client, namespace: &str, name: &str, reason: &str) {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), namespace);
    eventually(&format!("an Event {reason} on {name}"), WAIT, || {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.ok()?;
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                })
                .then_some(())
        }
    })
    .await;
}
