//! The shared registry of peers, read by the control loop and the migration
//! controllers, written by the peer controller (or by hand in tests and the demo).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use kube::Client;

use crate::crd::ClusterPeerSpec;

/// What is known about one peer.
#[derive(Clone)]
pub struct Peer {
    /// The `ClusterPeer` name.
    pub name: String,
    /// The spec as last read (acceptFrom, allowedNamespaces, region, labels).
    pub spec: ClusterPeerSpec,
    /// A client for the peer's API server; `None` while the kubeconfig is
    /// missing, invalid or refused.
    pub client: Option<Client>,
    /// The last probe reached the API server.
    pub connected: bool,
    /// Connected and the spec is usable.
    pub ready: bool,
    /// The peer's `gitVersion` from the last successful probe.
    pub server_version: Option<String>,
    /// The Secret's resourceVersion the client was built from (a change is a
    /// rotation and rebuilds the client).
    pub(crate) secret_version: Option<String>,
    /// The ClusterPeer generation the client was built for.
    pub(crate) generation: Option<i64>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("name", &self.name)
            .field("has_client", &self.client.is_some())
            .field("connected", &self.connected)
            .field("ready", &self.ready)
            .field("server_version", &self.server_version)
            .finish()
    }
}

impl Peer {
    /// A peer known only by its spec (no client yet).
    pub fn new(name: impl Into<String>, spec: ClusterPeerSpec) -> Self {
        Self {
            name: name.into(),
            spec,
            client: None,
            connected: false,
            ready: false,
            server_version: None,
            secret_version: None,
            generation: None,
        }
    }

    /// A peer with a client, marked connected and ready (for tests and the
    /// demo, where no peer controller runs).
    pub fn with_client(name: impl Into<String>, spec: ClusterPeerSpec, client: Client) -> Self {
        Self {
            client: Some(client),
            connected: true,
            ready: true,
            ..Self::new(name, spec)
        }
    }
}

/// Peer name → [`Peer`]. Cheap to clone: every clone shares the same map.
#[derive(Clone, Default, Debug)]
pub struct PeerSet {
    inner: Arc<RwLock<BTreeMap<String, Peer>>>,
}

impl PeerSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Peer>> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Peer>> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The peer of that name.
    pub fn get(&self, name: &str) -> Option<Peer> {
        self.read().get(name).cloned()
    }

    /// The client of a peer that has one and answered its last probe.
    pub fn client(&self, name: &str) -> Option<Client> {
        self.read()
            .get(name)
            .filter(|p| p.connected)
            .and_then(|p| p.client.clone())
    }

    /// The client of a peer whatever its last probe said (the migration
    /// sender retries through it: a failed probe must not stall a move that
    /// may already be able to proceed).
    pub fn any_client(&self, name: &str) -> Option<Client> {
        self.read().get(name).and_then(|p| p.client.clone())
    }

    /// Every peer, by name.
    pub fn all(&self) -> Vec<Peer> {
        self.read().values().cloned().collect()
    }

    /// Every peer name.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Adds or replaces a peer.
    pub fn insert(&self, peer: Peer) {
        self.write().insert(peer.name.clone(), peer);
    }

    /// Removes a peer.
    pub fn remove(&self, name: &str) -> Option<Peer> {
        self.write().remove(name)
    }

    /// Keeps only the peers `keep` says yes to.
    pub(crate) fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.write().retain(|name, _| keep(name));
    }
}
