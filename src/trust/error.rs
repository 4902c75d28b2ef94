//! The one error type of the trust room. Messages say what failed and where
//! (a field path) and never carry key material or the content signed.

use jiff::Timestamp;

/// Why a signature, a key or a sealed value was refused.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The message carries no signature at all.
    #[error("the message is not signed")]
    Unsigned,
    /// The signature or sealed value names a key id none of the known keys has.
    #[error("no known key has the id {key_id:?}")]
    UnknownKey { key_id: String },
    /// The signature does not verify: the content, the context or the
    /// signature changed, or another key made it.
    #[error("the signature does not match the content")]
    BadSignature,
    /// A field does not decode (base64, length, id) or is out of range.
    #[error("{field} is malformed: {reason}")]
    Malformed { field: String, reason: String },
    /// The message's lifetime ended, even allowing for clock skew.
    #[error("the message expired at {expires_at} (now {now}, clock skew allowed {max_skew:?})")]
    Expired {
        expires_at: Timestamp,
        now: Timestamp,
        max_skew: std::time::Duration,
    },
    /// The message claims to be issued later than now, beyond the clock
    /// skew allowed.
    #[error(
        "the message is issued at {issued_at}, in the future (now {now}, clock skew allowed {max_skew:?})"
    )]
    NotYetValid {
        issued_at: Timestamp,
        now: Timestamp,
        max_skew: std::time::Duration,
    },
    /// The content cannot be written as canonical JSON (for example a map
    /// with keys that are not strings).
    #[error("the content cannot be encoded canonically")]
    Canonical {
        #[source]
        source: serde_json::Error,
    },
    /// The operating system's random number generator failed.
    #[error("the system random number generator failed")]
    Random,
    /// HPKE refused to seal (the recipient's public key is unusable, for
    /// example a low-order point).
    #[error("cannot seal to the key {key_id:?}")]
    Seal { key_id: String },
    /// The sealed value does not open: it was sealed to another key, bound
    /// to other associated data, or changed in transit.
    #[error(
        "the sealed value does not open with the key {key_id:?}: wrong key, wrong associated data, or tampered"
    )]
    Open { key_id: String },
}

impl TrustError {
    pub(crate) fn malformed(field: impl Into<String>, reason: impl Into<String>) -> Self {
        TrustError::Malformed {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The same error with `prefix.` before its field path, for a caller
    /// that knows where the failing value sits (`publicKeys[1].signing`).
    pub fn within(self, prefix: &str) -> Self {
        match self {
            TrustError::Malformed { field, reason } => TrustError::Malformed {
                field: format!("{prefix}.{field}"),
                reason,
            },
            other => other,
        }
    }
}

/// The result of trust operations.
pub type Result<T, E = TrustError> = std::result::Result<T, E>;
