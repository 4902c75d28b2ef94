//! Kubernetes quantities (`500m`, `1.5`, `512Mi`, `1G`, `1e3`), as pod specs
//! and users write them: a bare number is the base unit (cores, bytes).
//! Pod requests and the CLI's `--memory` use this grammar. A scenario's
//! requests use their own, with other bare-number meanings: see
//! [`super::scenario`]. Pure; never guesses a value it cannot parse.

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
    use super::{parse, whole_bytes};

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
}
