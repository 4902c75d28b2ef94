//! This cluster's key pairs and the public keys a peer publishes.
//!
//! A generation of keys is an Ed25519 signing key and an X25519 sealing key
//! (for HPKE), named by one key id derived from both public keys. The key
//! Secret keeps the current generation and, after a rotation, the previous
//! one, so that peers that still hold the old public keys keep working.
//!
//! Private key bytes leave this file only through
//! [`ClusterKeys::to_secret_data`]; they never appear in Debug output,
//! errors or anything serialised. Pure: no I/O.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, Kem, Serializable};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{Ed25519KeyPair, KeyPair as _};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::error::{Result, TrustError};

/// The HPKE KEM of sealed values.
pub(crate) type SealingKem = X25519HkdfSha256;
type SealingPrivateKey = <SealingKem as Kem>::PrivateKey;

/// Every key id starts with the algorithms of its generation.
pub const KEY_ID_PREFIX: &str = "ed25519-x25519:";
/// Raw length of every key Ferry stores or publishes (both algorithms).
const KEY_LEN: usize = 32;
/// How many hex digits of the SHA-256 of the public keys name a generation.
const KEY_ID_HEX: usize = 16;
/// A peer publishes its current keys and, during a rotation, its previous.
const MAX_PUBLISHED: usize = 2;

/// Where each private key sits in the key Secret's data.
const CURRENT: &str = "current";
const PREVIOUS: &str = "previous";
const SIGNING: &str = "signing";
const SEALING: &str = "sealing";

/// The public half of one generation of a cluster's keys, as a peer
/// publishes it in `ClusterPeer.spec.publicKeys`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicKeys {
    /// `ed25519-x25519:` and the first 16 hex digits of the SHA-256 of the
    /// signing and then the sealing public key. Checked against the keys.
    pub key_id: String,
    /// The Ed25519 public key that verifies signatures: base64 of 32 bytes.
    pub signing: String,
    /// The X25519 public key Secrets are sealed to (HPKE): base64 of 32 bytes.
    pub sealing: String,
}

/// Public keys checked for length and id, ready for use.
pub(crate) struct CheckedPublicKeys {
    pub(crate) key_id: String,
    pub(crate) signing: [u8; KEY_LEN],
    pub(crate) sealing: [u8; KEY_LEN],
}

impl PublicKeys {
    /// Decodes and checks both keys and the id; errors name the field
    /// (`signing`, `sealing`, `keyId`).
    pub fn validate(&self) -> Result<()> {
        self.checked().map(drop)
    }

    pub(crate) fn checked(&self) -> Result<CheckedPublicKeys> {
        let signing = decode_key("signing", &self.signing)?;
        let sealing = decode_key("sealing", &self.sealing)?;
        let expected = key_id(&signing, &sealing);
        if self.key_id != expected {
            return Err(TrustError::malformed(
                "keyId",
                format!(
                    "{:?} does not name these keys (they are {expected:?})",
                    self.key_id
                ),
            ));
        }
        Ok(CheckedPublicKeys {
            key_id: expected,
            signing,
            sealing,
        })
    }
}

/// Checks a peer's published key list: one or two generations (current,
/// and previous during a rotation), each well-formed, no id twice. Errors
/// name the entry: `publicKeys[1].sealing`.
pub fn validate_public_keys(keys: &[PublicKeys]) -> Result<()> {
    if keys.is_empty() || keys.len() > MAX_PUBLISHED {
        return Err(TrustError::malformed(
            "publicKeys",
            format!(
                "lists {} entries; 1 or {MAX_PUBLISHED} are allowed",
                keys.len()
            ),
        ));
    }
    for (i, key) in keys.iter().enumerate() {
        key.validate()
            .map_err(|e| e.within(&format!("publicKeys[{i}]")))?;
        if keys[..i].iter().any(|k| k.key_id == key.key_id) {
            return Err(TrustError::malformed(
                format!("publicKeys[{i}].keyId"),
                format!("{:?} is listed twice", key.key_id),
            ));
        }
    }
    Ok(())
}

/// The id of a generation: the algorithms, then a digest of both keys.
fn key_id(signing: &[u8; KEY_LEN], sealing: &[u8; KEY_LEN]) -> String {
    let digest = Sha256::new()
        .chain_update(signing)
        .chain_update(sealing)
        .finalize();
    let hex = hex::encode(digest);
    format!("{KEY_ID_PREFIX}{}", &hex[..KEY_ID_HEX])
}

fn decode_key(field: &str, text: &str) -> Result<[u8; KEY_LEN]> {
    let bytes = BASE64
        .decode(text)
        .map_err(|e| TrustError::malformed(field, format!("is not base64: {e}")))?;
    bytes.try_into().map_err(|b: Vec<u8>| {
        TrustError::malformed(field, format!("is {} bytes, not {KEY_LEN}", b.len()))
    })
}

/// One generation of private keys.
pub(crate) struct KeyPair {
    pub(crate) key_id: String,
    signing_seed: Zeroizing<[u8; KEY_LEN]>,
    pub(crate) signing: Ed25519KeyPair,
    pub(crate) sealing: SealingPrivateKey,
    signing_public: [u8; KEY_LEN],
    sealing_public: [u8; KEY_LEN],
}

impl KeyPair {
    fn generate(rng: &SystemRandom) -> Result<Self> {
        let mut seed = Zeroizing::new([0u8; KEY_LEN]);
        rng.fill(&mut seed[..]).map_err(|_| TrustError::Random)?;
        let mut ikm = Zeroizing::new([0u8; KEY_LEN]);
        rng.fill(&mut ikm[..]).map_err(|_| TrustError::Random)?;
        let (sealing, _) = SealingKem::derive_keypair(&ikm[..]);
        let signing = Ed25519KeyPair::from_seed_unchecked(&seed[..]).map_err(|_| {
            TrustError::malformed(format!("{CURRENT}.{SIGNING}"), "is no Ed25519 seed")
        })?;
        Ok(Self::from_parts(seed, signing, sealing))
    }

    fn from_parts(
        signing_seed: Zeroizing<[u8; KEY_LEN]>,
        signing: Ed25519KeyPair,
        sealing: SealingPrivateKey,
    ) -> Self {
        let mut signing_public = [0u8; KEY_LEN];
        signing_public.copy_from_slice(signing.public_key().as_ref());
        let mut sealing_public = [0u8; KEY_LEN];
        sealing_public.copy_from_slice(&SealingKem::sk_to_pk(&sealing).to_bytes());
        KeyPair {
            key_id: key_id(&signing_public, &sealing_public),
            signing_seed,
            signing,
            sealing,
            signing_public,
            sealing_public,
        }
    }

    /// Rebuilds a generation from its stored private keys; `at` names it in
    /// errors (`current`, `previous`).
    fn from_bytes(signing_seed: &[u8], sealing: &[u8], at: &str) -> Result<Self> {
        let field = |which: &str| format!("{at}.{which}");
        let seed: [u8; KEY_LEN] = signing_seed.try_into().map_err(|_| {
            TrustError::malformed(
                field(SIGNING),
                format!("is {} bytes, not {KEY_LEN}", signing_seed.len()),
            )
        })?;
        let seed = Zeroizing::new(seed);
        let signing = Ed25519KeyPair::from_seed_unchecked(&seed[..])
            .map_err(|_| TrustError::malformed(field(SIGNING), "is no Ed25519 seed"))?;
        let sealing = SealingPrivateKey::from_bytes(sealing).map_err(|_| {
            TrustError::malformed(
                field(SEALING),
                format!("is {} bytes, not {KEY_LEN}", sealing.len()),
            )
        })?;
        Ok(Self::from_parts(seed, signing, sealing))
    }

    fn public_keys(&self) -> PublicKeys {
        PublicKeys {
            key_id: self.key_id.clone(),
            signing: BASE64.encode(self.signing_public),
            sealing: BASE64.encode(self.sealing_public),
        }
    }

    fn write(&self, at: &str, data: &mut BTreeMap<String, Vec<u8>>) {
        data.insert(format!("{at}.{SIGNING}"), self.signing_seed.to_vec());
        data.insert(format!("{at}.{SEALING}"), self.sealing.to_bytes().to_vec());
    }

    fn read(data: &BTreeMap<String, Vec<u8>>, at: &str) -> Result<Option<Self>> {
        let signing_key = format!("{at}.{SIGNING}");
        let sealing_key = format!("{at}.{SEALING}");
        match (data.get(&signing_key), data.get(&sealing_key)) {
            (Some(signing), Some(sealing)) => Self::from_bytes(signing, sealing, at).map(Some),
            (None, None) => Ok(None),
            (Some(_), None) => Err(TrustError::malformed(sealing_key, "is missing")),
            (None, Some(_)) => Err(TrustError::malformed(signing_key, "is missing")),
        }
    }
}

/// This cluster's keys: the current generation, which signs, and the
/// previous one (after a rotation), which still opens values sealed to it.
pub struct ClusterKeys {
    current: KeyPair,
    previous: Option<KeyPair>,
}

impl ClusterKeys {
    /// A fresh generation from the system's random number generator.
    pub fn generate() -> Result<Self> {
        Ok(ClusterKeys {
            current: KeyPair::generate(&SystemRandom::new())?,
            previous: None,
        })
    }

    /// The keys stored in a key Secret's data. An error names the data key
    /// that is missing or malformed (`current.signing`, `previous.sealing`).
    pub fn from_secret_data(data: &BTreeMap<String, Vec<u8>>) -> Result<Self> {
        let current = KeyPair::read(data, CURRENT)?
            .ok_or_else(|| TrustError::malformed(format!("{CURRENT}.{SIGNING}"), "is missing"))?;
        let previous = KeyPair::read(data, PREVIOUS)?;
        Ok(ClusterKeys { current, previous })
    }

    /// The data of the key Secret: the private keys, raw bytes. The only
    /// way private keys leave this type; write it only into that Secret.
    pub fn to_secret_data(&self) -> BTreeMap<String, Vec<u8>> {
        let mut data = BTreeMap::new();
        self.current.write(CURRENT, &mut data);
        if let Some(previous) = &self.previous {
            previous.write(PREVIOUS, &mut data);
        }
        data
    }

    /// A new current generation; the current one becomes the previous, and
    /// the previous one is dropped. Until peers have the new public keys
    /// they verify only the old signatures, so publish
    /// [`public_keys`](Self::public_keys) to them after rotating.
    pub fn rotate(&mut self) -> Result<()> {
        let fresh = KeyPair::generate(&SystemRandom::new())?;
        let old = std::mem::replace(&mut self.current, fresh);
        self.previous = Some(old);
        Ok(())
    }

    /// The id of the current generation, which signs.
    pub fn key_id(&self) -> &str {
        &self.current.key_id
    }

    /// The id of the previous generation, if there is one.
    pub fn previous_key_id(&self) -> Option<&str> {
        self.previous.as_ref().map(|p| p.key_id.as_str())
    }

    /// What peers need to verify and seal to this cluster: the current
    /// generation first, then the previous one.
    pub fn public_keys(&self) -> Vec<PublicKeys> {
        self.generations().map(KeyPair::public_keys).collect()
    }

    pub(crate) fn current(&self) -> &KeyPair {
        &self.current
    }

    /// Current, then previous.
    pub(crate) fn generations(&self) -> impl Iterator<Item = &KeyPair> {
        std::iter::once(&self.current).chain(self.previous.as_ref())
    }
}

/// Names the generations, never the key bytes.
impl fmt::Debug for ClusterKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterKeys")
            .field("current", &self.current.key_id)
            .field("previous", &self.previous_key_id())
            .field("private_keys", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_data_round_trips_both_generations() {
        let mut keys = ClusterKeys::generate().unwrap();
        let first = keys.key_id().to_owned();
        keys.rotate().unwrap();
        let back = ClusterKeys::from_secret_data(&keys.to_secret_data()).unwrap();
        assert_eq!(back.key_id(), keys.key_id());
        assert_eq!(back.previous_key_id(), Some(first.as_str()));
        assert_eq!(back.public_keys(), keys.public_keys());
        assert!(back.key_id().starts_with(KEY_ID_PREFIX));
    }

    #[test]
    fn rotation_keeps_one_previous_generation() {
        let mut keys = ClusterKeys::generate().unwrap();
        let ids: Vec<String> = (0..3)
            .map(|_| {
                keys.rotate().unwrap();
                keys.key_id().to_owned()
            })
            .collect();
        assert_eq!(keys.previous_key_id(), Some(ids[1].as_str()));
        assert_eq!(keys.public_keys().len(), 2);
        assert_eq!(keys.to_secret_data().len(), 4);
    }

    #[test]
    fn malformed_secret_data_names_the_key() {
        let keys = ClusterKeys::generate().unwrap();
        let cases: [(&str, Option<Vec<u8>>, &str); 5] = [
            ("current.signing", None, "current.signing"),
            ("current.sealing", None, "current.sealing"),
            ("current.signing", Some(vec![1; 31]), "current.signing"),
            ("current.sealing", Some(vec![1; 33]), "current.sealing"),
            ("previous.signing", Some(vec![1; 32]), "previous.sealing"),
        ];
        for (key, value, field) in cases {
            let mut data = keys.to_secret_data();
            match value {
                Some(v) => data.insert(key.to_owned(), v),
                None => data.remove(key),
            };
            match ClusterKeys::from_secret_data(&data) {
                Err(TrustError::Malformed { field: f, .. }) => assert_eq!(f, field, "{key}"),
                other => panic!("{key}: {other:?}"),
            }
        }
    }

    #[test]
    fn debug_output_shows_no_key_material() {
        let keys = ClusterKeys::generate().unwrap();
        let debug = format!("{keys:?}");
        assert!(debug.contains(keys.key_id()), "{debug}");
        for bytes in keys.to_secret_data().values() {
            assert!(!debug.contains(&BASE64.encode(bytes)), "{debug}");
            assert!(!debug.contains(&hex::encode(bytes)), "{debug}");
            assert!(!debug.contains(&format!("{bytes:?}")[1..20]), "{debug}");
        }
    }

    #[test]
    fn published_keys_are_checked_field_by_field() {
        let keys = ClusterKeys::generate().unwrap();
        let good = keys.public_keys().remove(0);
        good.validate().unwrap();
        let short = BASE64.encode([0u8; 31]);
        let cases = [
            (
                PublicKeys {
                    signing: "%%%".into(),
                    ..good.clone()
                },
                "signing",
            ),
            (
                PublicKeys {
                    sealing: short.clone(),
                    ..good.clone()
                },
                "sealing",
            ),
            (
                PublicKeys {
                    key_id: "ed25519-x25519:0000".into(),
                    ..good.clone()
                },
                "keyId",
            ),
            (
                PublicKeys {
                    sealing: good.signing.clone(),
                    ..good.clone()
                },
                "keyId",
            ),
        ];
        for (key, field) in cases {
            match key.validate() {
                Err(TrustError::Malformed { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_published_list_has_one_or_two_distinct_generations() {
        let mut keys = ClusterKeys::generate().unwrap();
        keys.rotate().unwrap();
        let list = keys.public_keys();
        validate_public_keys(&list).unwrap();
        validate_public_keys(&list[..1]).unwrap();
        let field = |r: Result<()>| match r {
            Err(TrustError::Malformed { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(validate_public_keys(&[])), "publicKeys");
        let three = [list.clone(), list[..1].to_vec()].concat();
        assert_eq!(field(validate_public_keys(&three)), "publicKeys");
        let twice = [list[0].clone(), list[0].clone()];
        assert_eq!(field(validate_public_keys(&twice)), "publicKeys[1].keyId");
        let bad = [
            list[0].clone(),
            PublicKeys {
                signing: "x".into(),
                ..list[1].clone()
            },
        ];
        assert_eq!(field(validate_public_keys(&bad)), "publicKeys[1].signing");
    }
}
