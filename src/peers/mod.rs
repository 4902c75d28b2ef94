//! Peer clusters: `ClusterPeer` objects turned into `kube::Client`s, probed
//! for health, and shared with the control loop and the migration
//! controllers through a [`PeerSet`]. This cluster's own key Secret is
//! loaded, created and rotated in [`keys`].
//!
//! This part must never hand out a client built from a kubeconfig that skips
//! TLS verification, talks plain http, runs a credential plugin or reads
//! local files, unless the peer explicitly sets `allowInsecure`. It never
//! writes anything to a peer cluster itself.

mod controller;
mod error;
pub mod keys;
mod kubeconfig;
mod set;

pub use controller::{PeerConfig, PeerContext, run_peer_controller};
pub use error::{Error, Result};
pub use kubeconfig::{KubeconfigRefusal, check_kubeconfig, client_from_kubeconfig};
pub use set::{Peer, PeerSet};

/// Condition reasons of `ClusterPeer` conditions.
pub mod reasons {
    /// The last probe of `/version` answered.
    pub const REACHABLE: &str = "Reachable";
    /// The last probe failed (connection refused, timeout, an error status).
    pub const UNREACHABLE: &str = "Unreachable";
    /// The referenced Secret does not exist.
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// The Secret exists but lacks the referenced key.
    pub const KEY_NOT_FOUND: &str = "KeyNotFound";
    /// The kubeconfig does not parse or names no usable context.
    pub const INVALID_KUBECONFIG: &str = "InvalidKubeconfig";
    /// The kubeconfig is refused: insecure TLS, plain http, a credential
    /// plugin or a local file reference, without `allowInsecure`.
    pub const INSECURE_KUBECONFIG: &str = "InsecureKubeconfig";
    /// Connected and usable.
    pub const PEER_READY: &str = "PeerReady";
}
