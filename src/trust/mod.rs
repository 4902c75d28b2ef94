//! Trust between clusters: this cluster's keys, detached signatures over
//! canonical JSON, freshness, and Secrets sealed to a peer's key.
//!
//! Every cross-cluster message is hostile until [`verify`] says a listed key
//! signed exactly this content as exactly this kind of message. The
//! algorithms are Ed25519 (ring) for signatures and HPKE (RFC 9180, X25519,
//! HKDF-SHA256, ChaCha20-Poly1305) for sealing; nothing here is home-made
//! cryptography.
//!
//! Pure: no clock, no files, no network, no Kubernetes API. The key Secret
//! is read and written by `peers::keys`. Private keys never appear in
//! Debug output, errors or anything serialised.

mod canonical;
mod envelope;
mod error;
mod keys;
mod seal;
#[cfg(test)]
mod tests;

pub use canonical::digest;
pub use envelope::{Signature, check_fresh, context, verify};
pub use error::{Result, TrustError};
pub use keys::{ClusterKeys, KEY_ID_PREFIX, PublicKeys, validate_public_keys};
pub use seal::{Sealed, seal};
