//! The canonical JSON form of content that is signed: the same bytes for the
//! same meaning, whichever side serialises it and whatever map order
//! `serde_json` keeps (the tree enables its `preserve_order` feature, so a
//! `Value`'s object order is insertion order, not sorted).
//!
//! The rules, chosen so that a value survives a round trip through an API
//! server and another JSON library:
//! - object members sorted by the bytes of their UTF-8 keys, recursively;
//!   members whose value is `null` are left out (an API server may prune
//!   them, and serde reads a missing member and `null` alike for `Option`);
//!   `null` inside arrays stays, since removing it would shift positions;
//! - no whitespace; strings escaped as `serde_json` escapes them;
//! - numbers: integers as integers; a float with an integral value below
//!   2^53 in magnitude as that integer (`1.0` → `1`, `-0.0` → `0`, as a Go
//!   API server re-encodes it); any other float in `serde_json`'s shortest
//!   form that reads back as the same `f64` (`0.1`, `1e+300`). Non-finite
//!   floats never reach here: `serde_json` turns them into `null`.
//!
//! Pure: never reads a clock, a file or the network.

use serde::Serialize;
use serde_json::{Map, Number, Value};

use super::error::{Result, TrustError};

/// Deeper nesting than this is refused rather than recursed into.
const MAX_DEPTH: usize = 128;

/// Largest magnitude below which every integer is exact in an `f64`.
const EXACT_FLOAT_INTEGER: f64 = 9_007_199_254_740_992.0; // 2^53

/// `sha256:` and the hex SHA-256 of the canonical JSON of `content`: the
/// same for the same meaning, so a signature may cover a value's digest
/// while the value itself travels, or is removed, separately.
pub fn digest(content: &impl Serialize) -> Result<String> {
    use sha2::{Digest, Sha256};
    Ok(format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(content)?))
    ))
}

/// The canonical JSON bytes of `content`.
pub(crate) fn canonical_json(content: &impl Serialize) -> Result<Vec<u8>> {
    let value = serde_json::to_value(content).map_err(|source| TrustError::Canonical { source })?;
    let mut out = Vec::with_capacity(1024);
    write_value(&mut out, &value, 0)?;
    Ok(out)
}

fn write_value(out: &mut Vec<u8>, value: &Value, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(TrustError::malformed(
            "content",
            format!("nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s)?,
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item, depth + 1)?;
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map, depth)?,
    }
    Ok(())
}

fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>, depth: usize) -> Result<()> {
    let mut members: Vec<(&String, &Value)> = map.iter().filter(|(_, v)| !v.is_null()).collect();
    // Keys of one object are distinct, so an unstable sort is deterministic.
    members.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (i, (key, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, key)?;
        out.push(b':');
        write_value(out, value, depth + 1)?;
    }
    out.push(b'}');
    Ok(())
}

fn write_string(out: &mut Vec<u8>, s: &str) -> Result<()> {
    serde_json::to_writer(&mut *out, s).map_err(|source| TrustError::Canonical { source })
}

fn write_number(out: &mut Vec<u8>, n: &Number) {
    if let Some(i) = n.as_i64() {
        out.extend_from_slice(i.to_string().as_bytes());
    } else if let Some(u) = n.as_u64() {
        out.extend_from_slice(u.to_string().as_bytes());
    } else if let Some(f) = n.as_f64() {
        if f.fract() == 0.0 && f.abs() < EXACT_FLOAT_INTEGER {
            // Exact: |f| < 2^53 fits an i64 without rounding.
            out.extend_from_slice((f as i64).to_string().as_bytes());
        } else {
            out.extend_from_slice(n.to_string().as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::canonical_json;
    use serde_json::json;

    fn text(v: &serde_json::Value) -> String {
        String::from_utf8(canonical_json(v).unwrap()).unwrap()
    }

    #[test]
    fn keys_are_sorted_recursively_whatever_the_insertion_order() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b":1,"a":{"z":[{"y":1,"x":2}],"c":"s"}}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(r#"{"a":{"c":"s","z":[{"x":2,"y":1}]},"b":1}"#).unwrap();
        assert_eq!(text(&a), r#"{"a":{"c":"s","z":[{"x":2,"y":1}]},"b":1}"#);
        assert_eq!(text(&a), text(&b));
    }

    #[test]
    fn integral_floats_are_written_as_integers_and_others_round_trip() {
        assert_eq!(
            text(&json!([1.0, -0.0, 2.5, 0.1, 1e300, -3])),
            "[1,0,2.5,0.1,1e+300,-3]"
        );
        assert_eq!(text(&json!(u64::MAX)), u64::MAX.to_string());
        assert_eq!(text(&json!(f64::NAN)), "null");
    }

    #[test]
    fn null_members_are_left_out_but_null_items_stay() {
        assert_eq!(
            text(&json!({"a": null, "b": [null, 1]})),
            r#"{"b":[null,1]}"#
        );
    }

    #[test]
    fn strings_are_escaped_and_keys_sort_by_bytes() {
        assert_eq!(
            text(&json!({"é": "\"\n\u{1}", "z": "ü", "Z": 1})),
            "{\"Z\":1,\"z\":\"ü\",\"é\":\"\\\"\\n\\u0001\"}"
        );
    }

    #[test]
    fn too_deep_content_is_refused() {
        let mut v = json!(1);
        for _ in 0..200 {
            v = json!([v]);
        }
        assert!(canonical_json(&v).is_err());
    }

    #[test]
    fn maps_with_non_string_keys_are_an_error_not_a_panic() {
        let map: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        assert!(canonical_json(&map).is_err());
    }
}
