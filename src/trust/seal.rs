//! Secret data in transit, sealed to the receiver's public X25519 key with
//! HPKE (RFC 9180): mode Base, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
//! ChaCha20-Poly1305. Only the holder of the matching private key opens it,
//! and only with the same associated data, which binds a sealed value to
//! the request and Secret it belongs to.
//!
//! This file must never implement cryptography itself, and never return
//! plaintext that did not authenticate. Pure: no I/O.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hpke::aead::ChaCha20Poly1305;
use hpke::kdf::HkdfSha256;
use hpke::{Deserializable, Kem, OpModeR, OpModeS, Serializable};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::error::{Result, TrustError};
use super::keys::{ClusterKeys, PublicKeys, SealingKem};

/// HPKE's `info`: binds every sealed value to Ferry and this purpose.
const INFO: &[u8] = b"ferry.dev/v1 sealed secret data";

/// A value sealed to one generation of a cluster's keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sealed {
    /// The id of the recipient's key generation it is sealed to.
    pub key_id: String,
    /// HPKE's encapsulated key: base64 of 32 bytes.
    pub encapsulated_key: String,
    /// The ciphertext with its authentication tag, base64.
    pub ciphertext: String,
}

/// Seals `plaintext` to the cluster whose public keys are `to`, bound to
/// `aad` (for example the request id and the Secret's name).
pub fn seal(to: &PublicKeys, aad: &[u8], plaintext: &[u8]) -> Result<Sealed> {
    let to = to.checked()?;
    let recipient = <SealingKem as Kem>::PublicKey::from_bytes(&to.sealing)
        .map_err(|_| TrustError::malformed("sealing", "is no X25519 public key"))?;
    let (encapsulated, ciphertext) = hpke::single_shot_seal::<
        ChaCha20Poly1305,
        HkdfSha256,
        SealingKem,
    >(&OpModeS::Base, &recipient, INFO, plaintext, aad)
    .map_err(|_| TrustError::Seal {
        key_id: to.key_id.clone(),
    })?;
    Ok(Sealed {
        key_id: to.key_id,
        encapsulated_key: BASE64.encode(encapsulated.to_bytes()),
        ciphertext: BASE64.encode(ciphertext),
    })
}

impl ClusterKeys {
    /// Opens a value sealed to this cluster, with the generation it names
    /// (the current one, or the previous one after a rotation), only if
    /// `aad` is the one it was sealed with.
    pub fn open(&self, sealed: &Sealed, aad: &[u8]) -> Result<Vec<u8>> {
        let pair = self
            .generations()
            .find(|pair| pair.key_id == sealed.key_id)
            .ok_or_else(|| TrustError::UnknownKey {
                key_id: sealed.key_id.clone(),
            })?;
        let encapsulated = BASE64.decode(&sealed.encapsulated_key).map_err(|e| {
            TrustError::malformed("sealed.encapsulatedKey", format!("is not base64: {e}"))
        })?;
        let encapsulated = <SealingKem as Kem>::EncappedKey::from_bytes(&encapsulated)
            .map_err(|_| TrustError::malformed("sealed.encapsulatedKey", "is not 32 bytes"))?;
        let ciphertext = BASE64.decode(&sealed.ciphertext).map_err(|e| {
            TrustError::malformed("sealed.ciphertext", format!("is not base64: {e}"))
        })?;
        hpke::single_shot_open::<ChaCha20Poly1305, HkdfSha256, SealingKem>(
            &OpModeR::Base,
            &pair.sealing,
            &encapsulated,
            INFO,
            &ciphertext,
            aad,
        )
        .map_err(|_| TrustError::Open {
            key_id: sealed.key_id.clone(),
        })
    }
}
