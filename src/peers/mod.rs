//! Peer clusters: `ClusterPeer` objects turned into `kube::Client`s, probed
//! for health, and shared with the control loop and the migration
//! controllers through a [`PeerSet`]. This cluster's own key Secret is
//! loaded, created and rotated in [`keys`]; [`join`] peers two clusters
//! (`ferry peer join` and `ferry peer rotate`).
//!
//! This part must never hand out a client built from a kubeconfig that skips
//! TLS verification, talks plain http, runs a credential plugin or reads
//! local files, unless the peer sets the `spec.insecure` switch for exactly
//! that (and, for plugins, the operator allows them at all). It never reads
//! a Secret a `ClusterPeer` names outside the operator's own namespace. The
//! operator never writes anything to a peer cluster; only [`join`], run by a
//! person with admin access to both, does.

mod controller;
mod error;
pub mod join;
pub mod keys;
mod kubeconfig;
mod set;
mod spec_rules;

pub use controller::{PeerConfig, PeerContext, run_peer_controller};
pub use error::{Error, Result};
pub use kubeconfig::{
    Allowances, KubeconfigRefusal, PLUGINS_FLAG, check_kubeconfig, client_from_kubeconfig,
};
pub use set::{Peer, PeerSet};
pub use spec_rules::{SpecRefusal, check_kubeconfig_ref, check_prometheus, token_over_plain_http};

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
    /// The kubeconfig is refused: insecure TLS, plain http, credentials over
    /// plain http, a credential plugin or a local file reference, without the
    /// `spec.insecure` switch the message names.
    pub const INSECURE_KUBECONFIG: &str = "InsecureKubeconfig";
    /// The kubeconfig uses a credential plugin the peer allows but the
    /// operator was not started with `--allow-credential-plugins`.
    pub const CREDENTIAL_PLUGINS_DISABLED: &str = "CredentialPluginsDisabled";
    /// A Secret reference (the field is in the message) names a namespace
    /// other than the operator's; the Secret was not read.
    pub const SECRET_OUTSIDE_NAMESPACE: &str = "SecretOutsideNamespace";
    /// `spec.prometheus` is plain http without `insecure.plainHTTP`, or would
    /// send its bearer token over plain http without
    /// `insecure.credentialsOverPlainHTTP`.
    pub const INSECURE_PROMETHEUS: &str = "InsecurePrometheus";
    /// A `Nats` peer without a kubeconfig: requests travel over NATS.
    pub const CARRIED_BY_NATS: &str = "CarriedByNats";
    /// A `Kube` peer without `spec.kubeconfigSecretRef`.
    pub const KUBECONFIG_MISSING: &str = "KubeconfigMissing";
    /// Connected and usable.
    pub const PEER_READY: &str = "PeerReady";
}
