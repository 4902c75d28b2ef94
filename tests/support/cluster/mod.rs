//! A shared test harness: several sandbox clusters in one process, each
//! with Ferry's CRDs installed and a `kube::Client` built from its
//! kubeconfig, plus helpers to make them peers of each other.
//!
//! RBAC is enforced, as in a real cluster: each sandbox gets the chart's
//! rendered ServiceAccount, roles and bindings (release `ferry` in the
//! `ferry` namespace, one peer ServiceAccount per other cluster). The admin
//! client is for the tests' own setup and assertions; the code under test
//! gets [`TestCluster::ferry`] (the `ferry` ServiceAccount's token) and
//! peers get [`TestCluster::peer_kubeconfig`] (a peer ServiceAccount's), so
//! a verb the chart lacks fails the test with a 403.

pub mod inventory;
pub mod world;

use std::future::Future;
use std::time::Duration;

use ferry::crd::{ClusterPeer, ClusterPeerSpec, SecretKeyRef};
use ferry::sandbox::{Sandbox, SandboxConfig};
use ferry::trust::{ClusterKeys, PublicKeys};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// The namespace holding peer kubeconfig Secrets.
pub const FERRY_NAMESPACE: &str = "ferry";

/// How long the tokens the harness mints live: longer than any test.
const TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

/// One sandbox cluster, an admin client for it, and a client acting as
/// Ferry's ServiceAccount.
pub struct TestCluster {
    pub sandbox: Sandbox,
    /// The admin's: for setup and assertions only.
    pub client: Client,
    /// The chart's `ferry` ServiceAccount's: for the code under test.
    pub ferry: Client,
}

impl TestCluster {
    pub fn name(&self) -> &str {
        self.sandbox.name()
    }

    /// This cluster's keys, as its Ferry finds them in its key Secret
    /// (created on first call, as the operator does on first start).
    pub async fn keys(&self) -> ClusterKeys {
        ferry::peers::keys::load_or_create(
            &self.client,
            FERRY_NAMESPACE,
            ferry::peers::keys::KEY_SECRET_NAME,
        )
        .await
        .expect("the cluster's keys")
    }

    /// This cluster's public keys, for its peers' `ClusterPeer`s.
    pub async fn public_keys(&self) -> Vec<PublicKeys> {
        self.keys().await.public_keys()
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> String {
        self.sandbox.kubeconfig_yaml()
    }

    /// The `ferry` ServiceAccount's kubeconfig: what the operator runs with.
    pub fn ferry_kubeconfig(&self) -> String {
        self.sandbox
            .kubeconfig_for_service_account(FERRY_NAMESPACE, "ferry", TOKEN_TTL)
            .expect("a token for the ferry ServiceAccount")
    }

    /// The kubeconfig the cluster `from` reaches this one with as a peer: a
    /// token of the chart's ServiceAccount `ferry-peer-<from>`, bound to the
    /// peer ClusterRole in the inbox namespace `ferry-inbox-<from>` only.
    pub fn peer_kubeconfig(&self, from: &str) -> String {
        self.sandbox
            .kubeconfig_for_service_account(
                FERRY_NAMESPACE,
                &format!("ferry-peer-{from}"),
                TOKEN_TTL,
            )
            .unwrap_or_else(|e| panic!("no peer ServiceAccount for {from}: {e}"))
    }

    pub async fn shutdown(self) {
        self.sandbox.shutdown().await;
    }
}

/// Starts one sandbox per name (kubelet delay `kubelet_delay`), installs
/// Ferry's CRDs and the `ferry` namespace in each.
pub async fn start_clusters(names: &[&str], kubelet_delay: Duration) -> Vec<TestCluster> {
    let mut clusters = Vec::new();
    for name in names {
        let sandbox = Sandbox::start(SandboxConfig {
            kubelet_delay,
            ..SandboxConfig::new(*name)
        })
        .await
        .expect("sandbox starts");
        let client = client_for_kubeconfig(&sandbox.kubeconfig_yaml()).await;
        install_crds(&client).await;
        ensure_namespace(&client, FERRY_NAMESPACE).await;
        let peers: Vec<&str> = names.iter().copied().filter(|n| n != name).collect();
        install_rbac(&client, &peers).await;
        let ferry = sandbox
            .kubeconfig_for_service_account(FERRY_NAMESPACE, "ferry", TOKEN_TTL)
            .expect("a token for the ferry ServiceAccount");
        let ferry = client_for_kubeconfig(&ferry).await;
        clusters.push(TestCluster {
            sandbox,
            client,
            ferry,
        });
    }
    clusters
}

/// Applies the chart's ServiceAccounts, roles, bindings and inbox
/// namespaces (rendered by `helm template`, release `ferry` in
/// [`FERRY_NAMESPACE`], with `peers` bound to the peer role in their
/// inboxes), as the admin.
pub async fn install_rbac(client: &Client, peers: &[&str]) {
    let objects = super::chart::render_in(FERRY_NAMESPACE, &[("peers", serde_json::json!(peers))]);
    let mut applied = 0;
    for object in objects.values() {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or(FERRY_NAMESPACE);
        let params = PatchParams::apply("ferry-test").force();
        let result = match kind {
            // The release namespace exists already; the inboxes are new.
            "Namespace" if name == FERRY_NAMESPACE => continue,
            "Namespace" => Api::<Namespace>::all(client.clone())
                .patch(name, &params, &Patch::Apply(object))
                .await
                .map(drop),
            "ServiceAccount" => Api::<ServiceAccount>::namespaced(client.clone(), FERRY_NAMESPACE)
                .patch(name, &params, &Patch::Apply(object))
                .await
                .map(drop),
            "ClusterRole" => Api::<ClusterRole>::all(client.clone())
                .patch(name, &params, &Patch::Apply(object))
                .await
                .map(drop),
            "ClusterRoleBinding" => Api::<ClusterRoleBinding>::all(client.clone())
                .patch(name, &params, &Patch::Apply(object))
                .await
                .map(drop),
            "Role" => Api::<Role>::namespaced(client.clone(), FERRY_NAMESPACE)
                .patch(name, &params, &Patch::Apply(object))
                .await
                .map(drop),
            "RoleBinding" => Api::<RoleBinding>::namespaced(client.clone(), namespace)
                .patch(name, &params, &Patch::Apply(object))
                .await
                .map(drop),
            _ => continue,
        };
        result.unwrap_or_else(|e| panic!("applying the chart's {kind} {name}: {e}"));
        applied += 1;
    }
    // The ferry ServiceAccount, its ClusterRole, Role and two bindings, the
    // peer role with an inbox, an account and a binding per peer, and the
    // view and edit roles aggregated for users.
    assert_eq!(
        applied,
        8 + 3 * peers.len(),
        "the chart's RBAC objects changed"
    );
}

/// A client from kubeconfig text, as a user would build one.
pub async fn client_for_kubeconfig(yaml: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    Client::try_from(config).expect("client builds")
}

/// Creates Ferry's CRDs.
pub async fn install_crds(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in ferry::crd::all() {
        match api.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => panic!("CRD create failed: {e}"),
        }
    }
}

/// Creates a namespace if missing.
pub async fn ensure_namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))
        .expect("namespace object");
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => panic!("namespace create failed: {e}"),
    }
}

/// Writes (or replaces) the Secret `ferry/<peer>-kubeconfig` holding `kubeconfig`.
pub async fn put_kubeconfig_secret(client: &Client, peer: &str, kubeconfig: &str) {
    let api: Api<Secret> = Api::namespaced(client.clone(), FERRY_NAMESPACE);
    let secret = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": format!("{peer}-kubeconfig"), "namespace": FERRY_NAMESPACE},
        "stringData": {"kubeconfig": kubeconfig},
    });
    api.patch(
        &format!("{peer}-kubeconfig"),
        &PatchParams::apply("test").force(),
        &Patch::Apply(&secret),
    )
    .await
    .expect("kubeconfig Secret written");
}

/// The namespaces a test peer may send workloads into: every namespace the
/// tests move workloads in (an empty `allowedNamespaces` allows none).
pub const PEER_NAMESPACES: &[&str] = &["apps", "shop"];

/// A ClusterPeer spec reading `ferry/<peer>-kubeconfig`, allowed into
/// [`PEER_NAMESPACES`].
pub fn peer_spec(peer: &str, accept_from: bool) -> ClusterPeerSpec {
    serde_json::from_value(serde_json::json!({
        "kubeconfigSecretRef": {"namespace": FERRY_NAMESPACE, "name": format!("{peer}-kubeconfig"), "key": "kubeconfig"},
        "region": format!("region-{peer}"),
        "acceptFrom": accept_from,
        "allowedNamespaces": PEER_NAMESPACES,
        "probeInterval": "200ms",
    }))
    .expect("peer spec")
}

/// Registers `to` as ClusterPeer `peer` in `from`'s cluster: the kubeconfig
/// Secret and the ClusterPeer object.
pub async fn add_peer(from: &Client, peer: &str, kubeconfig: &str, spec: ClusterPeerSpec) {
    put_kubeconfig_secret(from, peer, kubeconfig).await;
    let api: Api<ClusterPeer> = Api::all(from.clone());
    let object = ClusterPeer::new(peer, spec);
    api.patch(
        peer,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&object),
    )
    .await
    .expect("ClusterPeer written");
}

/// The SecretKeyRef of a peer's kubeconfig Secret.
pub fn secret_ref(peer: &str) -> SecretKeyRef {
    SecretKeyRef {
        namespace: FERRY_NAMESPACE.into(),
        name: format!("{peer}-kubeconfig"),
        key: "kubeconfig".into(),
    }
}

/// Applies a Deployment with per-pod requests, labels and annotations.
pub async fn apply_deployment(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    replicas: i32,
    (cpu_millis, memory_mib): (u32, u32),
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) {
    ensure_namespace(client, namespace).await;
    let mut all_labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).into()))
        .collect();
    all_labels.insert("app".to_owned(), name.into());
    let annotations: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).into()))
        .collect();
    let object = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": all_labels, "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": restricted(serde_json::json!({"containers": [{"name": name, "image": "registry.example/app:1",
                    "resources": {"requests": {"cpu": format!("{cpu_millis}m"), "memory": format!("{memory_mib}Mi")}}}]})),
            },
        },
    });
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("ferry-test").force(),
            &Patch::Apply(&object),
        )
        .await
        .expect("Deployment applies");
    // Wait for the rollout, so later changes are the operator's, not the kubelet's.
    let api = Api::<Deployment>::namespaced(client.clone(), namespace);
    until("the Deployment to be available", WAIT, || {
        let api = api.clone();
        async move {
            api.get(name)
                .await
                .is_ok_and(|d| d.status.and_then(|s| s.available_replicas).unwrap_or(0) == replicas)
        }
    })
    .await;
}

/// `pod_spec` made to meet Pod Security `restricted` and Ferry's rules, as
/// a receiver admits by default: non-root, the runtime's seccomp profile,
/// no privilege escalation, every capability dropped, no token mounted.
pub fn restricted(mut pod_spec: serde_json::Value) -> serde_json::Value {
    pod_spec["automountServiceAccountToken"] = false.into();
    pod_spec["securityContext"]["runAsNonRoot"] = true.into();
    pod_spec["securityContext"]["seccompProfile"] = serde_json::json!({"type": "RuntimeDefault"});
    for field in ["containers", "initContainers"] {
        if let Some(containers) = pod_spec[field].as_array_mut() {
            for container in containers {
                let security = &mut container["securityContext"];
                if security.get("allowPrivilegeEscalation").is_none() {
                    security["allowPrivilegeEscalation"] = false.into();
                }
                if security.get("capabilities").is_none() {
                    security["capabilities"] = serde_json::json!({"drop": ["ALL"]});
                }
            }
        }
    }
    pod_spec
}

/// How long a test waits for something that must happen. It bounds only a
/// test that has already failed: a wait that succeeds ends as soon as its
/// check holds, so this is generous enough that no machine is too busy.
pub const WAIT: Duration = Duration::from_secs(120);

/// Polls `check` every 20 ms until it returns Some, for at most `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`eventually`] for a condition that holds or not.
pub async fn until<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually(what, timeout, || {
        let holds = check();
        async move { holds.await.then_some(()) }
    })
    .await
}

/// A task that is aborted when dropped.
pub struct Task(Option<tokio::task::JoinHandle<()>>);

impl Task {
    pub fn spawn(future: impl Future<Output = ()> + Send + 'static) -> Self {
        Task(Some(tokio::spawn(future)))
    }

    /// Aborts it and waits until it has stopped.
    pub async fn stop(mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
            let _ = handle.await;
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
        }
    }
}
