//! What can go wrong talking to a registry or checking what it served.

use super::auth::DockerConfigError;
use super::reference::ReferenceError;

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    #[error(
        "registry {registry} would be reached over plain http: refused (the command line allows it with --plain-http)"
    )]
    PlainHttpRefused { registry: String },
    #[error("{action}: {message}")]
    Transport { action: String, message: String },
    #[error("{action}: the registry answered {status}{detail}")]
    Status {
        action: String,
        status: u16,
        detail: String,
    },
    #[error("{action}: the registry refused the credentials ({status}){hint}")]
    Unauthorized {
        action: String,
        status: u16,
        hint: &'static str,
    },
    #[error("{what} does not exist in the registry")]
    NotFound { what: String },
    #[error("{what} is over the {limit}-byte limit")]
    TooLarge { what: String, limit: u64 },
    #[error("{what} has digest {actual}, not {expected}")]
    DigestMismatch {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("{reference} is not a WebAssembly artifact: {detail}")]
    NotWasmArtifact { reference: String, detail: String },
    #[error("{reference} has no signature (no manifest at tag {tag})")]
    Unsigned { reference: String, tag: String },
    #[error("{reference}: no signature verifies with the key: {detail}")]
    SignatureInvalid { reference: String, detail: String },
    #[error("{0}")]
    Key(String),
    #[error(transparent)]
    DockerConfig(#[from] DockerConfigError),
}

impl OciError {
    /// The `ModuleLoaded=False` reason this error gives a policy whose
    /// module it kept from loading.
    pub fn reason(&self) -> &'static str {
        match self {
            OciError::DigestMismatch { .. } => "DigestMismatch",
            OciError::TooLarge { .. } => "TooLarge",
            OciError::NotWasmArtifact { .. } => "NotWasmArtifact",
            OciError::Unsigned { .. } => "Unsigned",
            OciError::SignatureInvalid { .. } | OciError::Key(_) => "SignatureInvalid",
            _ => "FetchFailed",
        }
    }

    /// Whether a later try may succeed without any change: the registry
    /// was unreachable, busy, or does not have the tag yet.
    pub fn is_transient(&self) -> bool {
        match self {
            OciError::Transport { .. } | OciError::NotFound { .. } => true,
            OciError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}
