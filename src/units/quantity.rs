//! Kubernetes quantities (`500m`, `1.5`, `512Mi`, `1G`, `1e3`), as pod specs
//! and users write them: a bare number is the base unit (cores, bytes).
//! Pod requests and the CLI's `--memory` use this grammar. A scenario's
//! requests use their own, with other bare-number meanings: see
//! [`super::scenario`]. Pure; never guesses a value it cannot parse.
//!
//! [`Quantity`] is the same grammar as a field of a custom resource: the
//! text as written (so a malformed value still deserialises and is reported
//! where it is used), with the grammar as the schema's `pattern`.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The grammar [`parse`] accepts without a sign, as an (RE2 and ECMA
/// compatible) regular expression: the `pattern` of every quantity field in
/// the CRDs.
pub const QUANTITY_PATTERN: &str =
    r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$";

/// A Kubernetes quantity as written in a custom resource (`"500m"`, `"4"`,
/// `"8Gi"`). Always a string in YAML: `cpu: "4"`, not `cpu: 4`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Quantity(String);

impl Quantity {
    /// Wraps the text without checking it; the readers below check.
    pub fn new(text: impl Into<String>) -> Self {
        Quantity(text.into())
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value in thousandths of the unit, rounded up as Kubernetes rounds
    /// CPU (`"500m"` is 500, `"1.5"` is 1500). `None` when it does not parse.
    pub fn millis(&self) -> Option<u64> {
        to_millis(parse(&self.0)?)
    }

    /// The value as a whole number of the unit, rounded up (bytes for
    /// memory: `"1Gi"` is 1073741824). `None` when it does not parse.
    pub fn whole(&self) -> Option<u64> {
        to_whole(parse(&self.0)?)
    }
}

/// A parsed quantity in thousandths, rounded up; saturates at `u64::MAX`.
pub fn to_millis(value: f64) -> Option<u64> {
    to_whole(value * 1000.0)
}

/// A parsed quantity rounded up to a whole number; saturates at `u64::MAX`.
pub fn to_whole(value: f64) -> Option<u64> {
    // `as` saturates for floats: a huge value becomes u64::MAX, never wraps.
    (value.is_finite() && value >= 0.0).then(|| value.ceil() as u64)
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(text: &str) -> Self {
        Quantity::new(text)
    }
}

impl JsonSchema for Quantity {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": QUANTITY_PATTERN,
        })
    }
}

/// A Kubernetes quantity (`500m`, `1.5`, `512Mi`, `1G`, `1e3`) as a number.
pub fn parse(text: &str) -> Option<f64> {
    let text = text.trim();
    let suffixes: [(&str, f64); 14] = [
        ("Ki", 1024f64),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
    ];
    for (suffix, factor) in suffixes {
        if let Some(number) = text.strip_suffix(suffix) {
            return number
                .parse::<f64>()
                .ok()
                .map(|n| n * factor)
                .filter(|v| v.is_finite() && *v >= 0.0);
        }
    }
    let number = text.strip_suffix('E').map_or(text, |n| n);
    let factor = if number.len() != text.len() {
        1e18
    } else {
        1.0
    };
    number
        .parse::<f64>()
        .ok()
        .map(|n| n * factor)
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// A whole number of bytes written as a Kubernetes quantity: `67108864`,
/// `64Mi`, `1G`. The error names the input and gives examples.
pub fn whole_bytes(text: &str) -> Result<u64, String> {
    parse(text)
        .filter(|bytes| bytes.fract() == 0.0 && *bytes <= u64::MAX as f64)
        .map(|bytes| bytes as u64)
        .ok_or_else(|| {
            format!("{text:?} is not a whole number of bytes (expected e.g. 67108864 or 64Mi)")
        })
}

#[cfg(test)]
mod tests {
    use super::{QUANTITY_PATTERN, Quantity, parse, whole_bytes};

    #[test]
    fn quantities_parse_like_kubernetes() {
        let cases = [
            ("500m", Some(0.5)),
            ("2", Some(2.0)),
            ("1.5", Some(1.5)),
            ("512Mi", Some(536_870_912.0)),
            ("1Gi", Some(1_073_741_824.0)),
            ("1G", Some(1e9)),
            ("1e3", Some(1000.0)),
            ("-1", None),
            ("lots", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), expected, "{text}");
        }
    }

    #[test]
    fn byte_counts_take_kubernetes_suffixes() {
        assert_eq!(whole_bytes("1048576"), Ok(1 << 20));
        assert_eq!(whole_bytes("64Mi"), Ok(64 << 20));
        assert_eq!(whole_bytes("2G"), Ok(2_000_000_000));
        assert!(
            whole_bytes("12XB")
                .unwrap_err()
                .contains("not a whole number of bytes")
        );
        assert!(whole_bytes("1.5").is_err());
        assert!(whole_bytes("lots").is_err());
    }

    #[test]
    fn a_quantity_field_reads_as_millis_or_whole_units_rounded_up() {
        assert_eq!(Quantity::new("500m").millis(), Some(500));
        assert_eq!(Quantity::new("4").millis(), Some(4000));
        assert_eq!(Quantity::new("0.0001").millis(), Some(1));
        assert_eq!(Quantity::new("1Gi").whole(), Some(1 << 30));
        assert_eq!(Quantity::new("1e30").whole(), Some(u64::MAX));
        assert_eq!(Quantity::new("lots").millis(), None);
    }

    #[test]
    fn the_pattern_says_what_parse_accepts() {
        let schema = schemars::schema_for!(Quantity);
        assert_eq!(
            schema.get("pattern"),
            Some(&serde_json::json!(QUANTITY_PATTERN))
        );
        for text in ["500m", "4", "1.5", ".5", "8Gi", "1G", "1e3", "2E"] {
            assert!(parse(text).is_some(), "{text}");
        }
    }
}
