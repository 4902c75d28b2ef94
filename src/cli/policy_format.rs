//! What the policy author's commands (`new`, `test`, `bench`, `check`)
//! print the same way: their `-o` result, sizes and times.

use std::time::Duration;

use serde::Serialize;

use super::output::Format;

/// Prints `value` as JSON or YAML and returns `true`; `false` for a table,
/// which the command prints itself.
pub(super) fn print_structured<T: Serialize>(format: Format, value: &T) -> anyhow::Result<bool> {
    if format == Format::Table {
        return Ok(false);
    }
    super::output::print(format, value, String::new)?;
    Ok(true)
}

/// `bytes` for a person: `124.1 KiB`, `17.5 MiB`.
pub(super) fn bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["bytes", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A duration for a person, to a precision that suits its size.
pub(super) fn duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        format!("{:.1} µs", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

/// Milliseconds as a JSON number, as `ferry policy eval` prints `elapsedMs`.
pub(super) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_pick_the_largest_whole_unit() {
        assert_eq!(bytes(512), "512 bytes");
        assert_eq!(bytes(127_051), "124.1 KiB");
        assert_eq!(bytes(64 * 1024 * 1024), "64 MiB");
        assert_eq!(bytes(768 * 1024), "768 KiB");
    }

    #[test]
    fn durations_keep_three_significant_places() {
        assert_eq!(duration(Duration::from_micros(19)), "19.0 µs");
        assert_eq!(duration(Duration::from_micros(1960)), "1.96 ms");
        assert_eq!(duration(Duration::from_millis(3800)), "3.80 s");
    }
}
