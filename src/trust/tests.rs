//! The room's behaviour as a caller sees it: signatures that verify only for
//! exactly what was signed, rotation that drops nothing, sealed values that
//! open only for their key and associated data.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use jiff::Timestamp;
use serde_json::{Value, json};

use super::*;

fn request() -> Value {
    json!({
        "requestId": "wm-1234",
        "sourceCluster": "a",
        "targetCluster": "b",
        "nonce": "n-1",
        "deadline": "2026-01-01T00:05:00Z",
        "workload": {"kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
                     "spec": {"replicas": 3, "ratio": 0.25}},
    })
}

fn verified(keys: &[PublicKeys], ctx: &str, content: &Value, sig: &Signature) -> Result<()> {
    verify(keys, ctx, content, sig)
}

#[test]
fn a_signature_verifies_for_exactly_what_was_signed() {
    let keys = ClusterKeys::generate().unwrap();
    let sig = keys.sign(context::REQUEST, &request()).unwrap();
    assert_eq!(sig.key_id, keys.key_id());
    verified(&keys.public_keys(), context::REQUEST, &request(), &sig).unwrap();
}

#[test]
fn any_changed_byte_of_the_content_fails() {
    let keys = ClusterKeys::generate().unwrap();
    let content = request();
    let sig = keys.sign(context::REQUEST, &content).unwrap();
    let text = serde_json::to_string(&content).unwrap();
    let mut checked = 0;
    for i in 0..text.len() {
        let mut bytes = text.clone().into_bytes();
        bytes[i] ^= 0x01;
        // Only changes that still parse are content a receiver could see.
        let Ok(changed) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        if changed == content {
            continue;
        }
        checked += 1;
        assert!(
            matches!(
                verify(&keys.public_keys(), context::REQUEST, &changed, &sig),
                Err(TrustError::BadSignature)
            ),
            "byte {i} changed and still verified: {}",
            String::from_utf8_lossy(&bytes)
        );
    }
    assert!(checked > 50, "only {checked} changes were tried");
}

#[test]
fn any_changed_bit_of_the_signature_fails() {
    let keys = ClusterKeys::generate().unwrap();
    let sig = keys.sign(context::STATUS, &request()).unwrap();
    let raw = BASE64.decode(&sig.value).unwrap();
    for bit in 0..raw.len() * 8 {
        let mut bad = raw.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        let sig = Signature {
            value: BASE64.encode(&bad),
            ..sig.clone()
        };
        assert!(matches!(
            verified(&keys.public_keys(), context::STATUS, &request(), &sig),
            Err(TrustError::BadSignature)
        ));
    }
}

#[test]
fn a_signature_for_one_kind_of_message_is_no_signature_for_another() {
    let keys = ClusterKeys::generate().unwrap();
    let sig = keys.sign(context::STATUS, &request()).unwrap();
    for other in [context::REQUEST, context::INTENT, "ferry.dev/v1 status "] {
        assert!(matches!(
            verified(&keys.public_keys(), other, &request(), &sig),
            Err(TrustError::BadSignature)
        ));
    }
}

#[test]
fn another_clusters_key_does_not_verify() {
    let ours = ClusterKeys::generate().unwrap();
    let theirs = ClusterKeys::generate().unwrap();
    let sig = theirs.sign(context::REQUEST, &request()).unwrap();
    assert!(matches!(
        verified(&ours.public_keys(), context::REQUEST, &request(), &sig),
        Err(TrustError::UnknownKey { key_id }) if key_id == theirs.key_id()
    ));
    // Claiming our key id does not help a signature made with their key.
    let forged = Signature {
        key_id: ours.key_id().to_owned(),
        ..sig
    };
    assert!(matches!(
        verified(&ours.public_keys(), context::REQUEST, &request(), &forged),
        Err(TrustError::BadSignature)
    ));
}

#[test]
fn a_listed_key_whose_id_does_not_match_its_bytes_is_malformed() {
    let ours = ClusterKeys::generate().unwrap();
    let theirs = ClusterKeys::generate().unwrap();
    let sig = theirs.sign(context::REQUEST, &request()).unwrap();
    // Their id on our key bytes: a peer entry that lies about its id.
    let lying = PublicKeys {
        key_id: theirs.key_id().to_owned(),
        ..ours.public_keys().remove(0)
    };
    match verified(&[lying], context::REQUEST, &request(), &sig) {
        Err(TrustError::Malformed { field, .. }) => assert_eq!(field, "publicKeys[0].keyId"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_and_malformed_signatures_say_why() {
    let keys = ClusterKeys::generate().unwrap();
    let public = keys.public_keys();
    let content = request();
    assert!(matches!(
        verify(&public, context::REQUEST, &content, None),
        Err(TrustError::Unsigned)
    ));
    assert!(matches!(
        verified(&public, context::REQUEST, &content, &Signature::default()),
        Err(TrustError::Unsigned)
    ));
    let sig = keys.sign(context::REQUEST, &content).unwrap();
    for (value, why) in [("not base64!", "is not base64"), ("AAAA", "is 3 bytes")] {
        let bad = Signature {
            value: value.into(),
            ..sig.clone()
        };
        match verified(&public, context::REQUEST, &content, &bad) {
            Err(TrustError::Malformed { field, reason }) => {
                assert_eq!(field, "signature.value");
                assert!(reason.contains(why), "{reason}");
            }
            other => panic!("{value}: {other:?}"),
        }
    }
    assert!(matches!(
        verify(&[], context::REQUEST, &content, &sig),
        Err(TrustError::UnknownKey { .. })
    ));
    let broken = PublicKeys {
        signing: "???".into(),
        ..public[0].clone()
    };
    match verified(&[broken], context::REQUEST, &content, &sig) {
        Err(TrustError::Malformed { field, .. }) => assert_eq!(field, "publicKeys[0].signing"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn contexts_must_be_printable_and_bounded() {
    let keys = ClusterKeys::generate().unwrap();
    for bad in ["", "a\nb", "tab\there", &"x".repeat(129)] {
        assert!(matches!(
            keys.sign(bad, &request()),
            Err(TrustError::Malformed { field, .. }) if field == "context"
        ));
    }
}

#[test]
fn the_signature_and_digest_do_not_depend_on_key_order_or_number_spelling() {
    let keys = ClusterKeys::generate().unwrap();
    let sig = keys.sign(context::REQUEST, &request()).unwrap();
    // The same request as another JSON library or an API server writes it:
    // other member order, an integral float as an integer, a null member.
    let rewritten: Value = serde_json::from_str(
        r#"{"workload":{"spec":{"ratio":0.25,"replicas":3.0},"metadata":{"namespace":"shop",
            "name":"web","labels":null},"kind":"Deployment"},"targetCluster":"b","sourceCluster":"a",
            "requestId":"wm-1234","nonce":"n-1","deadline":"2026-01-01T00:05:00Z"}"#,
    )
    .unwrap();
    verified(&keys.public_keys(), context::REQUEST, &rewritten, &sig).unwrap();
    // The digest reads the content the same way.
    assert_eq!(digest(&request()).unwrap(), digest(&rewritten).unwrap());
    let mut changed = request();
    changed["workload"]["spec"]["replicas"] = 4.into();
    assert_ne!(digest(&request()).unwrap(), digest(&changed).unwrap());
    assert!(digest(&request()).unwrap().starts_with("sha256:"));
}

#[test]
fn typed_content_signs_like_its_json() {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Intent {
        sequence: u64,
        request_id: &'static str,
        action: &'static str,
    }
    let keys = ClusterKeys::generate().unwrap();
    let intent = Intent {
        sequence: 7,
        request_id: "wm-1",
        action: "proceed",
    };
    let sig = keys.sign(context::INTENT, &intent).unwrap();
    let as_json = json!({"action": "proceed", "requestId": "wm-1", "sequence": 7});
    verified(&keys.public_keys(), context::INTENT, &as_json, &sig).unwrap();
}

#[test]
fn after_a_rotation_old_and_new_signatures_verify_against_both_keys() {
    let mut keys = ClusterKeys::generate().unwrap();
    let old_public = keys.public_keys();
    let old_sig = keys.sign(context::REQUEST, &request()).unwrap();
    keys.rotate().unwrap();
    let new_sig = keys.sign(context::REQUEST, &request()).unwrap();
    assert_ne!(old_sig.key_id, new_sig.key_id);
    let both = keys.public_keys();
    assert_eq!(both.len(), 2);
    validate_public_keys(&both).unwrap();
    verified(&both, context::REQUEST, &request(), &old_sig).unwrap();
    verified(&both, context::REQUEST, &request(), &new_sig).unwrap();
    // A peer still holding only the old key refuses the new signature by id.
    assert!(matches!(
        verified(&old_public, context::REQUEST, &request(), &new_sig),
        Err(TrustError::UnknownKey { .. })
    ));
    // After a second rotation the first key is gone.
    keys.rotate().unwrap();
    assert!(matches!(
        verified(&keys.public_keys(), context::REQUEST, &request(), &old_sig),
        Err(TrustError::UnknownKey { .. })
    ));
}

#[test]
fn freshness_allows_skew_at_both_ends_and_nothing_more() {
    let t = |s: i64| Timestamp::from_second(1_767_225_600 + s).unwrap();
    let skew = std::time::Duration::from_secs(30);
    check_fresh(t(0), t(300), t(100), skew).unwrap();
    check_fresh(t(0), t(300), t(-30), skew).unwrap();
    check_fresh(t(0), t(300), t(330), skew).unwrap();
    assert!(matches!(
        check_fresh(t(0), t(300), t(-31), skew),
        Err(TrustError::NotYetValid { .. })
    ));
    assert!(matches!(
        check_fresh(t(0), t(300), t(331), skew),
        Err(TrustError::Expired { .. })
    ));
    assert!(matches!(
        check_fresh(t(10), t(0), t(5), skew),
        Err(TrustError::Malformed { field, .. }) if field == "expiresAt"
    ));
    // A huge skew saturates instead of overflowing.
    check_fresh(t(0), t(1), t(5), std::time::Duration::MAX).unwrap();
}

const AAD: &[u8] = b"wm-1234/secret/db-password";

#[test]
fn a_sealed_value_opens_with_its_key_and_aad() {
    let keys = ClusterKeys::generate().unwrap();
    let plaintext = vec![7u8; 4096];
    let sealed = seal(&keys.public_keys()[0], AAD, &plaintext).unwrap();
    assert_eq!(sealed.key_id, keys.key_id());
    assert!(!sealed.ciphertext.contains(&BASE64.encode(&plaintext[..48])));
    assert_eq!(keys.open(&sealed, AAD).unwrap(), plaintext);
    // Sealing twice gives different ciphertexts (a fresh ephemeral key).
    let again = seal(&keys.public_keys()[0], AAD, &plaintext).unwrap();
    assert_ne!(again.ciphertext, sealed.ciphertext);
}

#[test]
fn a_sealed_value_bound_to_another_request_does_not_open() {
    let keys = ClusterKeys::generate().unwrap();
    let sealed = seal(&keys.public_keys()[0], AAD, b"hunter2").unwrap();
    for aad in [
        &b"wm-9999/secret/db-password"[..],
        b"",
        b"wm-1234/secret/db-passwore",
    ] {
        assert!(matches!(
            keys.open(&sealed, aad),
            Err(TrustError::Open { .. })
        ));
    }
}

#[test]
fn a_sealed_value_does_not_open_with_another_key() {
    let ours = ClusterKeys::generate().unwrap();
    let theirs = ClusterKeys::generate().unwrap();
    let sealed = seal(&theirs.public_keys()[0], AAD, b"hunter2").unwrap();
    assert!(matches!(
        ours.open(&sealed, AAD),
        Err(TrustError::UnknownKey { .. })
    ));
    // Relabelled with our id, it still does not open.
    let relabelled = Sealed {
        key_id: ours.key_id().to_owned(),
        ..sealed
    };
    assert!(matches!(
        ours.open(&relabelled, AAD),
        Err(TrustError::Open { .. })
    ));
}

#[test]
fn a_tampered_sealed_value_does_not_open() {
    let keys = ClusterKeys::generate().unwrap();
    let sealed = seal(&keys.public_keys()[0], AAD, b"a secret of some length").unwrap();
    let raw = BASE64.decode(&sealed.ciphertext).unwrap();
    for i in 0..raw.len() {
        let mut bad = raw.clone();
        bad[i] ^= 0x80;
        let tampered = Sealed {
            ciphertext: BASE64.encode(&bad),
            ..sealed.clone()
        };
        assert!(matches!(
            keys.open(&tampered, AAD),
            Err(TrustError::Open { .. })
        ));
    }
    let mut enc = BASE64.decode(&sealed.encapsulated_key).unwrap();
    enc[0] ^= 1;
    let tampered = Sealed {
        encapsulated_key: BASE64.encode(&enc),
        ..sealed.clone()
    };
    assert!(matches!(
        keys.open(&tampered, AAD),
        Err(TrustError::Open { .. })
    ));
    let truncated = Sealed {
        ciphertext: BASE64.encode(&raw[..10]),
        ..sealed.clone()
    };
    assert!(matches!(
        keys.open(&truncated, AAD),
        Err(TrustError::Open { .. })
    ));
    for (sealed, field) in [
        (
            Sealed {
                ciphertext: "**".into(),
                ..sealed.clone()
            },
            "sealed.ciphertext",
        ),
        (
            Sealed {
                encapsulated_key: "AAAA".into(),
                ..sealed.clone()
            },
            "sealed.encapsulatedKey",
        ),
    ] {
        assert!(matches!(
            keys.open(&sealed, AAD),
            Err(TrustError::Malformed { field: f, .. }) if f == field
        ));
    }
}

#[test]
fn the_previous_key_still_opens_after_a_rotation() {
    let mut keys = ClusterKeys::generate().unwrap();
    let sealed = seal(&keys.public_keys()[0], AAD, b"sealed before").unwrap();
    keys.rotate().unwrap();
    let stored = ClusterKeys::from_secret_data(&keys.to_secret_data()).unwrap();
    assert_eq!(stored.open(&sealed, AAD).unwrap(), b"sealed before");
    let newer = seal(&stored.public_keys()[0], AAD, b"sealed after").unwrap();
    assert_eq!(newer.key_id, stored.key_id());
    assert_eq!(stored.open(&newer, AAD).unwrap(), b"sealed after");
}

#[test]
fn sealing_to_a_malformed_key_says_which_field() {
    let keys = ClusterKeys::generate().unwrap();
    let bad = PublicKeys {
        sealing: BASE64.encode([1u8; 16]),
        ..keys.public_keys().remove(0)
    };
    assert!(matches!(
        seal(&bad, AAD, b"x"),
        Err(TrustError::Malformed { field, .. }) if field == "sealing"
    ));
}

#[test]
fn errors_show_no_key_material() {
    let keys = ClusterKeys::generate().unwrap();
    let secrets: Vec<String> = keys
        .to_secret_data()
        .values()
        .map(|v| BASE64.encode(v))
        .collect();
    let sealed = seal(&keys.public_keys()[0], AAD, b"x").unwrap();
    let errors = [
        keys.open(&sealed, b"other").unwrap_err(),
        verify(&keys.public_keys(), context::REQUEST, &request(), None).unwrap_err(),
    ];
    for e in errors {
        let text = format!("{e} {e:?}");
        assert!(secrets.iter().all(|s| !text.contains(s.as_str())), "{text}");
    }
}
