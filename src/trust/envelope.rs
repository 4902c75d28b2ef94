//! Detached signatures over canonical JSON, and the freshness check.
//!
//! What is signed is `ferry.dev signature v1`, a newline, the context (what
//! kind of message this is: [`context::REQUEST`], [`context::STATUS`],
//! [`context::INTENT`]), a newline, then the canonical JSON of the content
//! (see `canonical.rs`). The context is domain separation: a signature over
//! a status can never be replayed as a request or an intent.
//!
//! This file must never accept a message it could not verify: every path
//! that is not a good signature by a listed key is an error. Pure: no I/O.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use jiff::{SignedDuration, Timestamp};
use ring::signature::{ED25519, UnparsedPublicKey};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::canonical::canonical_json;
use super::error::{Result, TrustError};
use super::keys::{ClusterKeys, PublicKeys};

/// The kinds of signed message. Each signature is bound to one.
pub mod context {
    /// A `WorkloadMigration` request, as its sender wrote it.
    pub const REQUEST: &str = "ferry.dev/v1 request";
    /// A request's status, as its receiver wrote it.
    pub const STATUS: &str = "ferry.dev/v1 status";
    /// The sender's sequence-numbered intent (proceed, complete, roll back).
    pub const INTENT: &str = "ferry.dev/v1 intent";
}

/// Starts every signed message, so that Ferry's signatures can never be
/// mistaken for another protocol's that uses the same keys.
const DOMAIN: &[u8] = b"ferry.dev signature v1\n";
const CONTEXT_MAX: usize = 128;
const SIGNATURE_LEN: usize = 64;

/// A detached Ed25519 signature and the key that made it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Signature {
    /// The id of the signing key's generation (see `PublicKeys.keyId`).
    pub key_id: String,
    /// The signature: base64 of 64 bytes.
    pub value: String,
}

impl ClusterKeys {
    /// Signs `content` as a message of kind `context` with the current key.
    pub fn sign(&self, context: &str, content: &impl Serialize) -> Result<Signature> {
        let message = message(context, content)?;
        let current = self.current();
        let signature = current.signing.sign(&message);
        Ok(Signature {
            key_id: current.key_id.clone(),
            value: BASE64.encode(signature.as_ref()),
        })
    }
}

/// Verifies that `sig` is a signature over `content` as a message of kind
/// `context` by one of `keys` (a peer's published keys, or this cluster's
/// own for its own mirrors). `None`, or a signature with an empty value, is
/// [`TrustError::Unsigned`].
pub fn verify<'s>(
    keys: &[PublicKeys],
    context: &str,
    content: &impl Serialize,
    sig: impl Into<Option<&'s Signature>>,
) -> Result<()> {
    let sig = match sig.into() {
        Some(sig) if !sig.value.is_empty() => sig,
        _ => return Err(TrustError::Unsigned),
    };
    let (index, key) = keys
        .iter()
        .enumerate()
        .find(|(_, k)| k.key_id == sig.key_id)
        .ok_or_else(|| TrustError::UnknownKey {
            key_id: sig.key_id.clone(),
        })?;
    let key = key
        .checked()
        .map_err(|e| e.within(&format!("publicKeys[{index}]")))?;
    let value = BASE64
        .decode(&sig.value)
        .map_err(|e| TrustError::malformed("signature.value", format!("is not base64: {e}")))?;
    if value.len() != SIGNATURE_LEN {
        return Err(TrustError::malformed(
            "signature.value",
            format!("is {} bytes, not {SIGNATURE_LEN}", value.len()),
        ));
    }
    let message = message(context, content)?;
    UnparsedPublicKey::new(&ED25519, &key.signing)
        .verify(&message, &value)
        .map_err(|_| TrustError::BadSignature)
}

/// The bytes a signature covers.
fn message(context: &str, content: &impl Serialize) -> Result<Vec<u8>> {
    let valid = !context.is_empty()
        && context.len() <= CONTEXT_MAX
        && context.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    if !valid {
        return Err(TrustError::malformed(
            "context",
            format!("must be 1 to {CONTEXT_MAX} printable ASCII characters"),
        ));
    }
    let content = canonical_json(content)?;
    let mut message = Vec::with_capacity(DOMAIN.len() + context.len() + 1 + content.len());
    message.extend_from_slice(DOMAIN);
    message.extend_from_slice(context.as_bytes());
    message.push(b'\n');
    message.extend_from_slice(&content);
    Ok(message)
}

/// Whether a message issued at `issued_at` and valid until `expires_at` may
/// be acted on at `now`, allowing `max_skew` of clock difference between
/// the clusters at either end. Pure: the caller reads the clock.
pub fn check_fresh(
    issued_at: Timestamp,
    expires_at: Timestamp,
    now: Timestamp,
    max_skew: std::time::Duration,
) -> Result<()> {
    if expires_at < issued_at {
        return Err(TrustError::malformed(
            "expiresAt",
            format!("{expires_at} is before issuedAt {issued_at}"),
        ));
    }
    let skew = SignedDuration::try_from(max_skew).unwrap_or(SignedDuration::MAX);
    if issued_at > now.checked_add(skew).unwrap_or(Timestamp::MAX) {
        return Err(TrustError::NotYetValid {
            issued_at,
            now,
            max_skew,
        });
    }
    if now > expires_at.checked_add(skew).unwrap_or(Timestamp::MAX) {
        return Err(TrustError::Expired {
            expires_at,
            now,
            max_skew,
        });
    }
    Ok(())
}
