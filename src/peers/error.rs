//! Errors of the peer part.

/// What went wrong while handling a `ClusterPeer`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the local API server failed.
    #[error("cannot {action} in the local cluster")]
    Kube {
        action: &'static str,
        #[source]
        source: kube::Error,
    },
    /// The `ClusterPeer` has a spec the operator cannot use.
    #[error("ClusterPeer {name} is invalid: {message}")]
    InvalidPeer { name: String, message: String },
    /// This cluster's key Secret holds no usable keys (or new ones could not
    /// be made). Never repaired by replacing it: peers trust those keys.
    #[error("the key Secret {namespace}/{name} is unusable")]
    InvalidKeys {
        namespace: String,
        name: String,
        #[source]
        source: crate::trust::TrustError,
    },
    /// The key Secret changed between reading and writing it (another
    /// rotation); read it again before rotating again.
    #[error("the key Secret {namespace}/{name} changed while it was being rotated")]
    KeysChanged { namespace: String, name: String },
}

impl Error {
    /// Whether retrying the same object later may succeed without a change.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Kube { .. })
    }
}

/// The result of peer operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
