//! Errors of `ferry peer join` and `ferry peer rotate`.

/// What stopped a join, an accept or a rotation. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// A call to a cluster's API server failed.
    #[error("cannot {action} in cluster {cluster}")]
    Kube {
        cluster: String,
        action: String,
        #[source]
        source: kube::Error,
    },
    /// Ferry's chart is not installed where the grant needs it.
    #[error(
        "cluster {cluster} has no ClusterRole {role}: install Ferry's chart in {cluster} first \
         (release {release}), then run join again"
    )]
    ChartMissing {
        cluster: String,
        role: String,
        release: String,
    },
    /// A name, flag or field of the grant file is unusable.
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// An object join would write exists and belongs to something else.
    #[error("{kind} {name} in cluster {cluster} exists and is not join's: {reason}")]
    Conflict {
        cluster: String,
        kind: &'static str,
        name: String,
        reason: String,
    },
    /// The grant's keys share no key with the keys already trusted for that
    /// peer: either a stale or forged file, or two rotations without an
    /// accept in between.
    #[error(
        "the grant for {peer} carries keys {offered:?}, none of which is among the keys cluster \
         {cluster} trusts for it ({trusted:?}); check where the file came from, then pass \
         --replace-keys to trust only the new keys"
    )]
    UnrelatedKeys {
        cluster: String,
        peer: String,
        offered: Vec<String>,
        trusted: Vec<String>,
    },
    /// The key Secret could not be read, created or rotated.
    #[error("the keys of cluster {cluster}")]
    Keys {
        cluster: String,
        #[source]
        source: Box<super::super::Error>,
    },
}

impl JoinError {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        JoinError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// The result of join operations.
pub type Result<T, E = JoinError> = std::result::Result<T, E>;
