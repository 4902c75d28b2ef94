//! Secret data in a request: sealed to the receiver's key by the sender,
//! opened by the receiver only as it creates the Secret, and cleared from
//! the request once the Secret exists.
//!
//! Each travelling Secret carries `sealedData` (its `data` and `binaryData`
//! sealed with `trust::seal`, bound to the request and the Secret's name)
//! and `sealedDigest`, the digest of the canonical form of `sealedData`.
//! The request's signature covers the digest, not the ciphertext, so the
//! receiver can remove the ciphertext and the request still verifies; any
//! ciphertext that is present must match its signed digest, so other
//! ciphertext put back by a peer is refused.
//!
//! This file must never open sealed data that does not match its signed
//! digest. Pure: no I/O.

use serde_json::Value;

use crate::crd::WorkloadMigrationSpec;
use crate::trust::{self, ClusterKeys, PublicKeys, TrustError};

/// The field of a travelling Secret that holds its sealed `data`.
pub(crate) const SEALED_DATA: &str = "sealedData";

/// The field of a travelling Secret that holds the digest of its
/// `sealedData`: what the request's signature covers in its place.
pub(crate) const SEALED_DIGEST: &str = "sealedDigest";

/// What a Secret's sealed data is bound to: the request and the Secret.
fn secret_aad(spec: &WorkloadMigrationSpec, name: &str) -> Vec<u8> {
    format!("{}/{}/{name}", spec.request_id, spec.nonce).into_bytes()
}

fn name_of(secret: &Value) -> &str {
    secret
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Seals each travelling Secret's `data` (and `binaryData`) to `to`: the
/// plaintext is replaced by `sealedData`, which only the holder of `to`'s
/// private key can open, for this request and this Secret only, and by
/// `sealedDigest`, which the request's signature covers.
pub(crate) fn seal_secrets(
    to: &PublicKeys,
    spec: &mut WorkloadMigrationSpec,
) -> Result<(), TrustError> {
    let mut sealed_all = Vec::with_capacity(spec.secrets.len());
    for secret in &spec.secrets {
        let mut secret = secret.clone();
        let name = name_of(&secret).to_owned();
        let mut plain = serde_json::Map::new();
        for field in ["data", "binaryData"] {
            if let Some(value) = secret.as_object_mut().and_then(|o| o.remove(field)) {
                plain.insert(field.to_owned(), value);
            }
        }
        let bytes = serde_json::to_vec(&plain)
            .map_err(|e| TrustError::malformed("secrets", e.to_string()))?;
        let sealed = trust::seal(to, &secret_aad(spec, &name), &bytes)?;
        secret[SEALED_DIGEST] = trust::digest(&sealed)?.into();
        secret[SEALED_DATA] = serde_json::to_value(sealed)
            .map_err(|e| TrustError::malformed("secrets", e.to_string()))?;
        sealed_all.push(secret);
    }
    spec.secrets = sealed_all;
    Ok(())
}

/// Checks the sealed data still present in each Secret against the digest
/// beside it (which the request's signature covers).
pub(crate) fn verify_sealed_data(spec: &WorkloadMigrationSpec) -> Result<(), TrustError> {
    for (index, secret) in spec.secrets.iter().enumerate() {
        let Some(sealed) = secret.get(SEALED_DATA).filter(|v| !v.is_null()) else {
            continue;
        };
        let signed = secret.get(SEALED_DIGEST).and_then(Value::as_str);
        if signed != Some(trust::digest(sealed)?.as_str()) {
            return Err(TrustError::malformed(
                format!("spec.secrets[{index}].{SEALED_DATA}"),
                format!("does not match the {SEALED_DIGEST} the sender signed"),
            ));
        }
    }
    Ok(())
}

/// The Secrets without their sealed data: what the signature and the
/// receiver's accepted digest cover, and what stays in the request once
/// the receiver has created the Secrets.
pub(crate) fn without_sealed_data(secrets: &[Value]) -> Vec<Value> {
    secrets
        .iter()
        .map(|secret| {
            let mut secret = secret.clone();
            if let Some(object) = secret.as_object_mut() {
                object.remove(SEALED_DATA);
            }
            secret
        })
        .collect()
}

/// Whether any Secret of the request still carries sealed data.
pub(crate) fn holds_sealed_data(spec: &WorkloadMigrationSpec) -> bool {
    spec.secrets
        .iter()
        .any(|s| s.get(SEALED_DATA).is_some_and(|v| !v.is_null()))
}

/// The `data` and `binaryData` of the travelling Secret at `index`, opened
/// with this cluster's keys (an empty map when it carries none). Sealed
/// data that was cleared, or that does not match its signed digest, is an
/// error.
pub(crate) fn open_secret(
    keys: &ClusterKeys,
    spec: &WorkloadMigrationSpec,
    index: usize,
) -> Result<serde_json::Map<String, Value>, TrustError> {
    let field = format!("spec.secrets[{index}].{SEALED_DATA}");
    let Some(secret) = spec.secrets.get(index) else {
        return Ok(serde_json::Map::new());
    };
    let Some(sealed) = secret.get(SEALED_DATA).filter(|v| !v.is_null()) else {
        if secret.get(SEALED_DIGEST).is_some() {
            return Err(TrustError::malformed(
                &field,
                "is missing: it was removed before the Secret was created",
            ));
        }
        return Ok(serde_json::Map::new());
    };
    verify_sealed_data(spec)?;
    let sealed: trust::Sealed = serde_json::from_value(sealed.clone())
        .map_err(|e| TrustError::malformed(&field, e.to_string()))?;
    let bytes = keys.open(&sealed, &secret_aad(spec, name_of(secret)))?;
    serde_json::from_slice(&bytes).map_err(|e| TrustError::malformed(&field, e.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::migration::envelope::{sign_request, verify_request};

    static SENDER: std::sync::LazyLock<ClusterKeys> =
        std::sync::LazyLock::new(|| ClusterKeys::generate().unwrap());
    static RECEIVER: std::sync::LazyLock<ClusterKeys> =
        std::sync::LazyLock::new(|| ClusterKeys::generate().unwrap());

    /// A request carrying one Secret, sealed to the receiver and signed.
    fn sealed_request(password: &str) -> WorkloadMigrationSpec {
        let mut spec: WorkloadMigrationSpec = serde_json::from_value(json!({
            "requestId": "r", "sourceCluster": "a", "targetCluster": "b",
            "targetNamespace": "apps", "deadline": "2099-01-01T00:00:00Z", "role": "Target",
            "nonce": "n", "workload": {"kind": "Deployment", "metadata": {"name": "web"}},
            "secrets": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                "data": {"password": password}}],
        }))
        .unwrap();
        seal_secrets(&RECEIVER.public_keys()[0], &mut spec).unwrap();
        sign_request(&SENDER, &mut spec).unwrap();
        spec
    }

    #[test]
    fn only_ciphertext_and_its_digest_travel_and_the_receiver_opens_it() {
        let spec = sealed_request("aHVudGVyMg==");
        let secret = &spec.secrets[0];
        assert!(secret.get("data").is_none(), "{secret}");
        assert!(
            secret[SEALED_DIGEST]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
        let opened = open_secret(&RECEIVER, &spec, 0).unwrap();
        assert_eq!(opened["data"]["password"], "aHVudGVyMg==");
    }

    #[test]
    fn a_cleared_request_still_verifies_and_cannot_be_opened() {
        let mut spec = sealed_request("aHVudGVyMg==");
        assert!(holds_sealed_data(&spec));
        spec.secrets = without_sealed_data(&spec.secrets);
        assert!(!holds_sealed_data(&spec));
        verify_request(&SENDER.public_keys(), &spec).expect("the cleared request verifies");
        let error = open_secret(&RECEIVER, &spec, 0).unwrap_err();
        assert!(error.to_string().contains("is missing"), "{error}");
    }

    #[test]
    fn other_ciphertext_put_back_does_not_verify() {
        let mut spec = sealed_request("aHVudGVyMg==");
        // Validly sealed to the receiver for this very request and Secret,
        // but not what the sender signed.
        let other = sealed_request("ZXZpbA==");
        spec.secrets[0][SEALED_DATA] = other.secrets[0][SEALED_DATA].clone();
        let error = verify_request(&SENDER.public_keys(), &spec).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("does not match the sealedDigest"),
            "{error}"
        );
        assert!(open_secret(&RECEIVER, &spec, 0).is_err());
        // Changing the digest to match breaks the signature instead.
        spec.secrets[0][SEALED_DIGEST] = other.secrets[0][SEALED_DIGEST].clone();
        assert!(matches!(
            verify_request(&SENDER.public_keys(), &spec),
            Err(TrustError::BadSignature)
        ));
    }
}
