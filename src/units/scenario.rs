//! The meanings the simulator gives bare numbers, each named where it
//! differs from the grammars of [`super::duration`] and [`super::quantity`]:
//!
//! | function       | input                          | a bare number is |
//! |----------------|--------------------------------|------------------|
//! | `cpu_millis`   | a scenario's `requests.cpu`    | cores            |
//! | `memory_bytes` | a scenario's `requests.memory` | GiB              |
//! | `offset_ms`    | a scenario CSV's `time` column | seconds          |
//! | [`step`]       | `ferry simulate --step`        | whole seconds    |
//!
//! These are deliberate: a scenario is written by hand in cores and GiB.
//! They must never be used for Kubernetes objects, where a bare quantity is
//! the base unit ([`super::quantity`]). Pure.

use std::time::Duration;

use super::duration::parse_ms_with_days;

/// A CPU quantity in millicores: a bare number is cores (`0.5`, `2`, also
/// quoted, `"2"`); with the suffix `m` it is millicores (`"500m"`). No other
/// suffix.
pub(crate) fn cpu_millis(text: &str) -> Result<u64, String> {
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

/// A memory quantity in bytes: a bare number is GiB (`4`, `0.5`, and quoted
/// alike: `"4"` is 4 GiB, `"1000000"` a million GiB), or a number with one of
/// the suffixes Ki, Mi, Gi, Ti (powers of 1024) or K, M, G, T (powers of
/// 1000): `"512Mi"`, `"4Gi"`, `"1G"`.
///
/// Unlike a Kubernetes quantity ([`super::quantity::parse`]): a bare number
/// is GiB, not bytes; thousands are `K`, not `k`; there is no `P`, `E`, `Pi`,
/// `Ei`, `m`, `u` or `n`.
pub(crate) fn memory_bytes(text: &str) -> Result<u64, String> {
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

/// An offset from the scenario's start in milliseconds, as a CSV's `time`
/// column has it: a bare non-negative number is seconds (truncated to the
/// millisecond), anything else a scenario duration
/// (`parse_ms_with_days`: `"72h"`, `"3d"`).
pub(crate) fn offset_ms(text: &str) -> Result<u64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds >= 0.0 && seconds.is_finite() => Ok((seconds * 1000.0) as u64),
        _ => parse_ms_with_days(text),
    }
}

/// A step: a duration (`60s`, `5m`, `1h`) or a number of seconds, whole
/// seconds and at least one. A bare number must be an integer.
pub fn step(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let ms = match t.parse::<u64>() {
        Ok(seconds) => seconds.saturating_mul(1000),
        Err(_) => parse_ms_with_days(t)?,
    };
    if ms == 0 || ms % 1000 != 0 {
        return Err(format!(
            "{t:?} is not a whole number of seconds, at least 1"
        ));
    }
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(cpu_millis("500m"), Ok(500));
        assert_eq!(cpu_millis("2"), Ok(2000));
        assert_eq!(memory_bytes("512Mi"), Ok(512 << 20));
        assert_eq!(memory_bytes("4"), Ok(4 << 30));
        assert!(memory_bytes("-1Gi").is_err());
        assert!(cpu_millis("lots").is_err());
    }
}
