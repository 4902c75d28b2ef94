//! The `ClusterPeer` reconciler: Secret → client (rebuilt on rotation) →
//! `/version` probe → `Connected`/`Ready` conditions, and the [`PeerSet`]
//! entry the rest of the operator reads.
//!
//! Status is written with server-side apply (field manager `ferry`) only when
//! it changes or a probe is due, so its own writes do not feed a reconcile
//! storm: a reconcile woken by our status write finds the probe fresh and
//! only requeues.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, ResourceExt};

use super::kubeconfig::{Allowances, client_from_kubeconfig};
use super::set::{Peer, PeerSet};
use super::spec_rules::{check_kubeconfig_ref, check_prometheus};
use super::{Error, Result, reasons};
use crate::crd::{ClusterPeer, ClusterPeerStatus, Transport, new_condition, set_condition, types};

/// The field manager of `ClusterPeer` status writes.
pub const FIELD_MANAGER: &str = "ferry";

/// Timeouts, limits and the operator's own rules for peers.
#[derive(Clone, Debug)]
pub struct PeerConfig {
    /// Time to establish a connection to a peer's API server.
    pub connect_timeout: Duration,
    /// Time to wait for each response read from a peer.
    pub read_timeout: Duration,
    /// Requeue after a failure to read the local Secret or write status.
    pub error_requeue: Duration,
    /// The operator's namespace, the only one whose Secrets a `ClusterPeer`
    /// may reference. `None` (unset): the operator's `Config::namespace` when
    /// the operator starts the controller; a controller started without one
    /// reads no Secret at all.
    pub namespace: Option<String>,
    /// Whether a peer may opt in to `exec` and `auth-provider` credential
    /// plugins at all (`ferry run --allow-credential-plugins`).
    pub allow_credential_plugins: bool,
}

impl Default for PeerConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(15),
            error_requeue: Duration::from_secs(5),
            namespace: None,
            allow_credential_plugins: false,
        }
    }
}

/// What the peer controller needs.
#[derive(Clone)]
pub struct PeerContext {
    /// The local cluster (ClusterPeers and their Secrets live here).
    pub client: Client,
    /// The registry this controller keeps up to date.
    pub peers: PeerSet,
    /// Timeouts.
    pub config: PeerConfig,
}

struct Ctx {
    shared: PeerContext,
    store: Store<ClusterPeer>,
}

/// Runs the `ClusterPeer` controller until the future is dropped.
pub async fn run_peer_controller(ctx: PeerContext) {
    let api: Api<ClusterPeer> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watcher::Config::default());
    let store = controller.store();
    let ctx = Arc::new(Ctx { shared: ctx, store });
    let prune = prune_removed(ctx.clone());
    let run = controller
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "ClusterPeer reconcile failed");
            }
        });
    tokio::select! {
        () = run => {}
        () = prune => {}
    }
}

/// Deleted `ClusterPeer`s leave the registry (a reconcile never runs for an
/// object that is gone).
async fn prune_removed(ctx: Arc<Ctx>) {
    let _ = ctx.store.wait_until_ready().await;
    loop {
        let present: std::collections::BTreeSet<String> =
            ctx.store.state().iter().map(|p| p.name_any()).collect();
        ctx.shared.peers.retain(|name| present.contains(name));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn error_policy(_peer: Arc<ClusterPeer>, error: &Error, ctx: Arc<Ctx>) -> Action {
    if error.is_transient() {
        Action::requeue(ctx.shared.config.error_requeue)
    } else {
        Action::await_change()
    }
}

/// The outcome of reading the Secret and building a client.
enum Built {
    Client(Client),
    Refused(&'static str, String),
    /// A NATS peer without a kubeconfig: nothing to probe.
    NatsOnly,
}

/// What a reconcile observed: the Connected condition's status, reason and
/// message, and the Ready condition's.
struct Observed {
    connected: (bool, &'static str, String),
    ready: (bool, &'static str, String),
}

#[tracing::instrument(skip_all, fields(peer = %peer.name_any()))]
async fn reconcile(peer: Arc<ClusterPeer>, ctx: Arc<Ctx>) -> Result<Action> {
    let name = peer.name_any();
    let interval = peer
        .spec
        .probe_interval
        .to_std()
        .map_err(|e| Error::InvalidPeer {
            name: name.clone(),
            message: format!("spec.probeInterval: {e}"),
        })?;
    let peers = &ctx.shared.peers;
    let generation = peer.metadata.generation;
    let namespace = ctx.shared.config.namespace.as_deref();

    // The reference is checked before the Secret is read: one outside the
    // operator's namespace is never followed, not even to see if it exists.
    let scope = kubeconfig_scope(&peer, namespace);
    let secret = match scope {
        Ok(()) => read_kubeconfig_secret(&ctx.shared.client, &peer).await?,
        Err(_) => None,
    };
    let secret_version = secret.as_ref().and_then(|s| s.resource_version());
    let known = peers.get(&name);
    let unchanged = known.as_ref().is_some_and(|k| {
        k.secret_version == secret_version && k.generation == generation && k.spec == peer.spec
    });
    let last_probe = peer
        .status
        .as_ref()
        .and_then(|s| s.last_probe_time.as_ref());
    if unchanged && let Some(at) = last_probe.filter(|t| elapsed_since(t) < interval) {
        let wait = interval.saturating_sub(elapsed_since(at));
        return Ok(Action::requeue(wait.max(Duration::from_millis(10))));
    }

    let reuse = known.filter(|_| unchanged).and_then(|known| known.client);
    let client = match (scope, reuse) {
        (Err((reason, message)), _) => Built::Refused(reason, message),
        (Ok(()), Some(client)) => Built::Client(client),
        (Ok(()), None) => build(&ctx.shared, &peer, secret.as_ref()).await,
    };

    let mut status = peer.status.clone().unwrap_or_default();
    let mut entry = Peer::new(&name, peer.spec.clone());
    entry.secret_version = secret_version;
    entry.generation = generation;
    let connected = probe(&ctx.shared, client, &mut entry).await;
    status.server_version = entry.server_version.clone().or(status.server_version);
    let observed = Observed {
        ready: readiness(&peer, namespace, &connected),
        connected,
    };
    entry.connected = observed.connected.0;
    entry.ready = observed.ready.0;
    peers.insert(entry);

    set_conditions(&mut status, &observed, generation);
    status.observed_generation = generation;
    write_status(&ctx.shared.client, &name, status).await?;
    Ok(Action::requeue(interval))
}

/// Whether the kubeconfig reference may be followed, and the refusal's
/// reason and message when not.
fn kubeconfig_scope(
    peer: &ClusterPeer,
    namespace: Option<&str>,
) -> Result<(), (&'static str, String)> {
    let Some(namespace) = namespace else {
        return Err((
            reasons::SECRET_OUTSIDE_NAMESPACE,
            "the operator's namespace is not configured, so no Secret is read".to_owned(),
        ));
    };
    check_kubeconfig_ref(&peer.spec, namespace).map_err(|r| (r.reason(), r.to_string()))
}

async fn read_kubeconfig_secret(client: &Client, peer: &ClusterPeer) -> Result<Option<Secret>> {
    let Some(secret_ref) = &peer.spec.kubeconfig_secret_ref else {
        return Ok(None);
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &secret_ref.namespace);
    secrets
        .get_opt(&secret_ref.name)
        .await
        .map_err(|source| Error::Kube {
            action: "read the kubeconfig Secret",
            source,
        })
}

/// Probes `/version` with the client, if one was built; fills the entry's
/// client and server version. The Connected condition's fields.
async fn probe(ctx: &PeerContext, client: Built, entry: &mut Peer) -> (bool, &'static str, String) {
    let client = match client {
        Built::Refused(reason, message) => return (false, reason, message),
        Built::NatsOnly => {
            return (
                true,
                reasons::CARRIED_BY_NATS,
                "requests travel over NATS; the peer has no kubeconfig to probe".to_owned(),
            );
        }
        Built::Client(client) => client,
    };
    entry.client = Some(client.clone());
    match tokio::time::timeout(ctx.config.read_timeout, client.apiserver_version()).await {
        Ok(Ok(info)) => {
            entry.server_version = Some(info.git_version);
            (
                true,
                reasons::REACHABLE,
                "the peer's API server answered /version".to_owned(),
            )
        }
        Ok(Err(error)) => (
            false,
            reasons::UNREACHABLE,
            format!("probing /version failed: {error}"),
        ),
        Err(_) => (
            false,
            reasons::UNREACHABLE,
            "probing /version timed out".to_owned(),
        ),
    }
}

/// Ready: connected, and the rest of the spec is usable (its Prometheus may
/// be read as configured). Pure.
fn readiness(
    peer: &ClusterPeer,
    namespace: Option<&str>,
    connected: &(bool, &'static str, String),
) -> (bool, &'static str, String) {
    if !connected.0 {
        return connected.clone();
    }
    match namespace.map(|ns| check_prometheus(&peer.spec, ns)) {
        Some(Ok(())) => (
            true,
            reasons::PEER_READY,
            "the peer is connected and usable".to_owned(),
        ),
        Some(Err(refusal)) => (false, refusal.reason(), refusal.to_string()),
        // Unreachable in practice: without a namespace nothing connects.
        None => (
            false,
            reasons::SECRET_OUTSIDE_NAMESPACE,
            "the operator's namespace is not configured".to_owned(),
        ),
    }
}

fn set_conditions(status: &mut ClusterPeerStatus, observed: &Observed, generation: Option<i64>) {
    let now = Time(jiff::Timestamp::now());
    for (kind, (ok, reason, message)) in [
        (types::CONNECTED, &observed.connected),
        (types::READY, &observed.ready),
    ] {
        set_condition(
            &mut status.conditions,
            new_condition(kind, *ok, reason, message, generation, &now),
            now.clone(),
        );
    }
    status.last_probe_time = Some(now);
}

async fn build(ctx: &PeerContext, peer: &ClusterPeer, secret: Option<&Secret>) -> Built {
    let Some(secret_ref) = &peer.spec.kubeconfig_secret_ref else {
        return match peer.spec.transport {
            Transport::Nats => Built::NatsOnly,
            Transport::Kube => Built::Refused(
                reasons::KUBECONFIG_MISSING,
                "spec.kubeconfigSecretRef is required for transport Kube".to_owned(),
            ),
        };
    };
    let Some(secret) = secret else {
        return Built::Refused(
            reasons::SECRET_NOT_FOUND,
            format!(
                "Secret {}/{} does not exist",
                secret_ref.namespace, secret_ref.name
            ),
        );
    };
    let text = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&secret_ref.key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(&secret_ref.key).cloned())
        });
    let Some(text) = text else {
        return Built::Refused(
            reasons::KEY_NOT_FOUND,
            format!(
                "Secret {}/{} has no key {}",
                secret_ref.namespace, secret_ref.name, secret_ref.key
            ),
        );
    };
    let allow = Allowances {
        switches: peer.spec.insecure,
        credential_plugins: ctx.config.allow_credential_plugins,
    };
    match client_from_kubeconfig(
        &text,
        allow,
        ctx.config.connect_timeout,
        ctx.config.read_timeout,
    )
    .await
    {
        Ok(client) => Built::Client(client),
        Err(refusal) => Built::Refused(refusal.reason(), refusal.to_string()),
    }
}

async fn write_status(client: &Client, name: &str, status: ClusterPeerStatus) -> Result<()> {
    let api: Api<ClusterPeer> = Api::all(client.clone());
    let patch = serde_json::json!({
        "apiVersion": "ferry.dev/v1alpha1",
        "kind": "ClusterPeer",
        "metadata": {"name": name},
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|source| Error::Kube {
        action: "write ClusterPeer status",
        source,
    })?;
    Ok(())
}

fn elapsed_since(time: &Time) -> Duration {
    let now = jiff::Timestamp::now();
    let span = now.duration_since(time.0);
    Duration::try_from(span).unwrap_or(Duration::ZERO)
}
