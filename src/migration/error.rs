//! Errors of the migration protocol, classed for the controllers' error
//! policy: an invalid object waits for a change, a transient failure
//! requeues with backoff.

use super::sanitize::Objection;

/// What went wrong in the migration protocol.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to an API server (local or peer) failed.
    #[error("cannot {action}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// The peer is not in the registry or has no client.
    #[error("peer {peer} is unknown or has no usable kubeconfig")]
    PeerUnavailable { peer: String },
    /// The workload to move does not exist in the local cluster.
    #[error("{kind} {namespace}/{name} does not exist")]
    WorkloadNotFound {
        kind: String,
        namespace: String,
        name: String,
    },
    /// The workload cannot move (kind, manifest, Secrets).
    #[error("the workload cannot move")]
    Refused(#[from] Objection),
    /// Another migration of the workload is still active.
    #[error("{namespace}/{workload} already has an active migration {existing}")]
    ActiveMigration {
        namespace: String,
        workload: String,
        existing: String,
    },
    /// The workload's namespace does not exist in the target peer.
    #[error("namespace {namespace} does not exist in peer {peer}; create it there first")]
    TargetNamespaceMissing { peer: String, namespace: String },
    /// This cluster's keys are not loaded yet.
    #[error("this cluster's keys are not loaded yet")]
    KeysNotLoaded,
    /// A signature could not be made or did not verify.
    #[error("{what}")]
    Untrusted {
        what: String,
        #[source]
        source: crate::trust::TrustError,
    },
    /// A call to the NATS broker failed (connect, publish, pull, ack).
    #[error("cannot {action} over NATS")]
    Nats {
        action: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The NATS settings cannot work.
    #[error("the NATS settings are invalid: {message}")]
    NatsConfig { message: String },
    /// A `WorkloadMigration` the controllers cannot work with.
    #[error("WorkloadMigration {name} is invalid: {message}")]
    InvalidRequest { name: String, message: String },
}

impl Error {
    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Error::Kube {
            action: action.into(),
            source,
        }
    }

    pub(crate) fn nats(
        action: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Error::Nats {
            action: action.into(),
            source: source.into(),
        }
    }

    /// Whether retrying later may succeed without any object changing.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Kube { source, .. } => match source {
                kube::Error::Api(status) => !(status.is_invalid() || status.is_forbidden()),
                _ => true,
            },
            // Keys load at start-up; a peer's status may verify once its
            // new keys are published (a rotation in progress).
            Error::PeerUnavailable { .. }
            | Error::KeysNotLoaded
            | Error::Untrusted { .. }
            | Error::Nats { .. } => true,
            _ => false,
        }
    }

    /// Whether the failure means the peer could not be reached at all
    /// (connection refused, timeout, TLS) rather than an answer.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Error::Kube { source, .. } => !matches!(source, kube::Error::Api(_)),
            Error::PeerUnavailable { .. } | Error::Nats { .. } => true,
            _ => false,
        }
    }
}

/// The result of migration operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether a kube error is a 404.
pub(crate) fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.is_not_found())
}

/// Whether a kube error is a 409 Conflict: the object changed since it
/// was read.
pub(crate) fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.is_conflict())
}

/// Whether a kube error is a 409 AlreadyExists.
pub(crate) fn is_already_exists(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.is_already_exists())
}
