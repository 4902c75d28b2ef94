//! Small parsers and the seeded random numbers of the simulator. Pure.

/// Parses a duration: Go's subset as in the CRDs (`"90s"`, `"5m"`, `"1h30m"`,
/// `"500ms"`, `"1.5h"`) plus days, `d` = 24 h (`"30d"`, `"1d12h"`). Returns
/// milliseconds.
pub(crate) fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let bad = |problem: &str| {
        format!(
            "{text:?} is not a duration ({problem}); write it like \"5m\", \"1h30m\", \"720h\" or \"30d\""
        )
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad("it is empty"));
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| bad("a number has no unit"))?;
        if digits == 0 {
            return Err(bad("a unit has no number"));
        }
        let number: f64 = rest[..digits].parse().map_err(|_| bad("bad number"))?;
        rest = &rest[digits..];
        let (unit_ms, len) = if rest.starts_with("ms") {
            (1.0, 2)
        } else if rest.starts_with('d') {
            (86_400_000.0, 1)
        } else if rest.starts_with('h') {
            (3_600_000.0, 1)
        } else if rest.starts_with('m') {
            (60_000.0, 1)
        } else if rest.starts_with('s') {
            (1000.0, 1)
        } else {
            return Err(bad("units are d, h, m, s and ms"));
        };
        total += number * unit_ms;
        rest = &rest[len..];
    }
    if !total.is_finite() || total > u64::MAX as f64 / 2.0 {
        return Err(bad("it is too long"));
    }
    Ok(total.round() as u64)
}

/// A CPU quantity in millicores: a number of cores (`0.5`, `2`) or a
/// Kubernetes quantity (`"500m"`, `"2"`).
pub(crate) fn parse_cpu_millis(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let value = if let Some(m) = t.strip_suffix('m') {
        m.parse::<f64>().ok()
    } else {
        t.parse::<f64>().ok().map(|cores| cores * 1000.0)
    };
    match value {
        Some(v) if v.is_finite() && v >= 0.0 => Ok(v.round() as u64),
        _ => Err(format!(
            "{text:?} is not a CPU quantity; write cores (0.5) or millicores (\"500m\")"
        )),
    }
}

/// A memory quantity in bytes: a number of GiB (`4`, `0.5`) or a Kubernetes
/// quantity (`"512Mi"`, `"4Gi"`, `"1G"`, `"1000000"` bytes when it has no
/// suffix but is quoted with one of Ki/Mi/Gi/Ti/K/M/G/T).
pub(crate) fn parse_memory_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    const SUFFIXES: [(&str, f64); 8] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("K", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    let value = SUFFIXES
        .iter()
        .find_map(|(s, factor)| {
            t.strip_suffix(s)
                .map(|n| n.parse::<f64>().ok().map(|v| v * factor))
        })
        .unwrap_or_else(|| t.parse::<f64>().ok().map(|gib| gib * 1073741824.0));
    match value {
        Some(v) if v.is_finite() && v >= 0.0 => Ok(v.round() as u64),
        _ => Err(format!(
            "{text:?} is not a memory quantity; write GiB (4) or a quantity (\"512Mi\", \"4Gi\")"
        )),
    }
}

/// SplitMix64: a tiny, seedable, well-mixed generator. Enough for spikes and
/// failures; not for anything secret.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The SplitMix64 finaliser: a stateless hash of one number.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a of a text: a stable stream id for a field path.
pub(crate) fn stream_id(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_go_units_and_days() {
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("720h"), parse_duration_ms("30d"));
        assert_eq!(parse_duration_ms("1.5h"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert!(parse_duration_ms("5").is_err());
        assert!(parse_duration_ms("h").is_err());
        assert!(parse_duration_ms("5w").is_err());
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_cpu_millis("500m"), Ok(500));
        assert_eq!(parse_cpu_millis("2"), Ok(2000));
        assert_eq!(parse_memory_bytes("512Mi"), Ok(512 << 20));
        assert_eq!(parse_memory_bytes("4"), Ok(4 << 30));
        assert!(parse_memory_bytes("-1Gi").is_err());
        assert!(parse_cpu_millis("lots").is_err());
    }

    #[test]
    fn rng_is_reproducible_and_uniformish() {
        let a: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        let mut r = Rng::new(1);
        let mean = (0..10_000).map(|_| r.next_f64()).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }
}
