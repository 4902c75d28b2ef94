//! Kubernetes quantities (`500m`, `1.5`, `512Mi`, `1G`, `1e3`), as pod specs
//! and users write them.

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

#[cfg(test)]
mod tests {
    use super::parse;

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
}
