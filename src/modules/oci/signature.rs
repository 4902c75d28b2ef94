//! cosign-compatible signatures of a module's manifest, key-based and
//! offline: the simple-signing payload that names the manifest digest,
//! signed with ECDSA P-256 over SHA-256 (ASN.1 DER signature, base64), as
//! cosign's signature specification describes. Keys are PEM: a PKCS#8
//! `PRIVATE KEY` to sign, a `PUBLIC KEY` (SubjectPublicKeyInfo) to verify.
//! cosign's own encrypted key format is not read. Pure: no I/O.

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};

/// The media type of the signed payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that carries the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of a cosign image signature.
pub const COSIGN_SIGNATURE_TYPE: &str = "cosign container image signature";

/// The DER header of a P-256 SubjectPublicKeyInfo, before the 65-byte
/// uncompressed point: SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 },
/// BIT STRING }.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the key file holds no PEM block {label:?}{hint}")]
    NoPemBlock {
        label: &'static str,
        hint: &'static str,
    },
    #[error("the PEM block {label:?} holds invalid base64")]
    BadBase64 { label: &'static str },
    #[error("the private key is not an unencrypted PKCS#8 ECDSA P-256 key (with its public key)")]
    NotP256PrivateKey,
    #[error("the public key is not an ECDSA P-256 SubjectPublicKeyInfo")]
    NotP256PublicKey,
}

/// A signing key.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    rng: SystemRandom,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(P-256)")
    }
}

impl SigningKey {
    /// Reads a PEM `PRIVATE KEY` (PKCS#8, unencrypted).
    pub fn from_pem(pem: &[u8]) -> Result<Self, KeyError> {
        let hint = if contains(pem, "ENCRYPTED SIGSTORE PRIVATE KEY")
            || contains(pem, "ENCRYPTED COSIGN PRIVATE KEY")
        {
            " (cosign's encrypted key format is not supported; see docs/policy-distribution.md)"
        } else if contains(pem, "EC PRIVATE KEY") {
            " (an SEC1 key: convert it with `openssl pkcs8 -topk8 -nocrypt`)"
        } else {
            ""
        };
        let der = pem_block(pem, "PRIVATE KEY", hint)?;
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der, &rng)
            .map_err(|_| KeyError::NotP256PrivateKey)?;
        Ok(SigningKey { pair, rng })
    }

    /// Generates a new key: the private key as PKCS#8 PEM, and the signer.
    pub fn generate() -> Result<(String, Self), KeyError> {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|_| KeyError::NotP256PrivateKey)?;
        let pem = to_pem("PRIVATE KEY", der.as_ref());
        let key = SigningKey::from_pem(pem.as_bytes())?;
        Ok((pem, key))
    }

    /// The matching public key, as PEM.
    pub fn public_key_pem(&self) -> String {
        let mut der = P256_SPKI_PREFIX.to_vec();
        der.extend_from_slice(self.pair.public_key().as_ref());
        to_pem("PUBLIC KEY", &der)
    }

    /// The base64 signature of `payload`.
    pub fn sign(&self, payload: &[u8]) -> Result<String, KeyError> {
        let signature = self
            .pair
            .sign(&self.rng, payload)
            .map_err(|_| KeyError::NotP256PrivateKey)?;
        Ok(base64::engine::general_purpose::STANDARD.encode(signature.as_ref()))
    }
}

/// A verifying key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    point: Vec<u8>,
}

impl PublicKey {
    /// Reads a PEM `PUBLIC KEY` (as `cosign generate-key-pair` and
    /// `openssl ec -pubout` write it).
    pub fn from_pem(pem: &[u8]) -> Result<Self, KeyError> {
        let der = pem_block(pem, "PUBLIC KEY", "")?;
        let point = der
            .strip_prefix(P256_SPKI_PREFIX.as_slice())
            .filter(|point| point.len() == 65 && point[0] == 4)
            .ok_or(KeyError::NotP256PublicKey)?;
        Ok(PublicKey {
            point: point.to_vec(),
        })
    }

    /// Whether `signature_b64` is this key's signature of `payload`.
    pub fn verifies(&self, payload: &[u8], signature_b64: &str) -> bool {
        let Ok(signature) = base64::engine::general_purpose::STANDARD.decode(signature_b64.trim())
        else {
            return false;
        };
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(payload, &signature)
            .is_ok()
    }
}

/// The tag cosign's tag-based discovery stores the signatures of
/// `manifest_digest` under: `sha256-<hex>.sig`.
pub fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replacen(':', "-", 1))
}

/// The simple-signing payload for the manifest `digest` of `repository`
/// (`registry/path`, as cosign writes `docker-reference`).
pub fn simple_signing_payload(repository: &str, digest: &str) -> Vec<u8> {
    let payload = serde_json::json!({
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": COSIGN_SIGNATURE_TYPE,
        },
        "optional": null,
    });
    serde_json::to_vec(&payload).unwrap_or_default()
}

/// Checks that a verified payload is about the manifest `digest`: a valid
/// signature of another manifest proves nothing about this one.
pub fn check_payload(payload: &[u8], digest: &str) -> Result<(), String> {
    let value: serde_json::Value = serde_json::from_slice(payload)
        .map_err(|e| format!("the signed payload is not JSON ({e})"))?;
    let critical = field(&value, "critical").ok_or("the signed payload has no `critical`")?;
    let kind = field(critical, "type").and_then(|t| t.as_str());
    if kind != Some(COSIGN_SIGNATURE_TYPE) {
        return Err(format!(
            "the signed payload's critical.type is {kind:?}, not {COSIGN_SIGNATURE_TYPE:?}"
        ));
    }
    let signed = field(critical, "image")
        .and_then(|image| field(image, "docker-manifest-digest"))
        .and_then(|d| d.as_str());
    if signed != Some(digest) {
        return Err(format!(
            "the signature is for manifest {}, not {digest}",
            signed.unwrap_or("(none)")
        ));
    }
    Ok(())
}

/// An object member by name, ignoring ASCII case as cosign's (Go) reader does.
fn field<'a>(value: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    value
        .as_object()?
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// The DER bytes of the first `label` block of a PEM file.
fn pem_block(pem: &[u8], label: &'static str, hint: &'static str) -> Result<Vec<u8>, KeyError> {
    let text = String::from_utf8_lossy(pem);
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let body = text
        .split_once(&begin)
        .and_then(|(_, rest)| rest.split_once(&end))
        .map(|(body, _)| body)
        .ok_or(KeyError::NoPemBlock { label, hint })?;
    let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|_| KeyError::BadBase64 { label })
}

fn to_pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    pem
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:6c3c624b58dbbcd3c0dd82b4c53f04194d1247c6eebdaab7c610cf7d66709b3b";

    #[test]
    fn a_signature_verifies_with_its_key_only() {
        let (pem, key) = SigningKey::generate().unwrap();
        assert!(SigningKey::from_pem(pem.as_bytes()).is_ok());
        let public = PublicKey::from_pem(key.public_key_pem().as_bytes()).unwrap();
        let payload = simple_signing_payload("registry.example/p", DIGEST);
        let signature = key.sign(&payload).unwrap();
        assert!(public.verifies(&payload, &signature));
        let mut changed = payload.clone();
        changed[10] ^= 1;
        assert!(!public.verifies(&changed, &signature));
        let (_, other) = SigningKey::generate().unwrap();
        let other = PublicKey::from_pem(other.public_key_pem().as_bytes()).unwrap();
        assert!(!other.verifies(&payload, &signature));
        assert!(!public.verifies(&payload, "not base64!"));
    }

    #[test]
    fn the_payload_names_the_manifest_as_cosign_writes_it() {
        let payload = simple_signing_payload("registry.example/p", DIGEST);
        let json: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(json["critical"]["image"]["docker-manifest-digest"], DIGEST);
        assert_eq!(
            json["critical"]["identity"]["docker-reference"],
            "registry.example/p"
        );
        assert_eq!(json["critical"]["type"], COSIGN_SIGNATURE_TYPE);
        assert!(check_payload(&payload, DIGEST).is_ok());
        let other = DIGEST.replace('6', "7");
        assert!(
            check_payload(&payload, &other)
                .unwrap_err()
                .contains("is for manifest")
        );
        // Go's JSON reader ignores case; so does this check.
        let upper = String::from_utf8(payload)
            .unwrap()
            .replace("docker-manifest-digest", "Docker-manifest-digest");
        assert!(check_payload(upper.as_bytes(), DIGEST).is_ok());
        assert!(check_payload(br#"{"critical":{"type":"x"}}"#, DIGEST).is_err());
        assert_eq!(
            signature_tag(DIGEST),
            "sha256-6c3c624b58dbbcd3c0dd82b4c53f04194d1247c6eebdaab7c610cf7d66709b3b.sig"
        );
    }

    #[test]
    fn unsupported_key_files_say_what_they_are() {
        let err = SigningKey::from_pem(b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAA==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n").unwrap_err();
        assert!(err.to_string().contains("encrypted key format"), "{err}");
        let err = SigningKey::from_pem(
            b"-----BEGIN EC PRIVATE KEY-----\nAA==\n-----END EC PRIVATE KEY-----\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("openssl pkcs8"), "{err}");
        let (_, key) = SigningKey::generate().unwrap();
        let rsa_like = key.public_key_pem().replace("MFkw", "MFow");
        assert!(PublicKey::from_pem(rsa_like.as_bytes()).is_err());
        assert!(PublicKey::from_pem(b"nothing").is_err());
    }
}
