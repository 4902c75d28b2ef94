//! Durations, in two grammars on purpose.
//!
//! [`Duration`] is how people write them in Kubernetes objects and on the
//! command line: `"30s"`, `"5m"`, `"1h30m"`, `"500ms"`, `"1.5h"`, `"1d"`
//! (Go's `time.ParseDuration` without sign, `us`/`ns` or a bare `"0"`,
//! plus `d` = 24 h; nothing around the text), exact to the nanosecond.
//! The CRDs, every duration flag of the CLI and a scenario's
//! `thresholds.cooldown` use it.
//!
//! The value keeps the text as written, so a resource with a malformed
//! duration still deserialises (one bad object must never stall a watch); the
//! operator parses it during validation and names the field when it fails.
//! The schema carries the same grammar as a `pattern`, so an API server
//! rejects most bad values before Ferry ever sees them.
//!
//! `parse_ms_with_days` is the simulator's: the same units, and more
//! lenient (see its doc). Neither grammar takes a bare number; the
//! meanings a scenario gives bare numbers are in [`super::scenario`].
//! Pure: never reads a clock.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// The grammar of [`Duration`] as an (RE2 and ECMA compatible) regular
/// expression; it is the `pattern` of every duration field in the CRDs.
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ms|d|h|m|s))+$";

/// A Go-style duration string such as `"30s"`, `"5m"`, `"1h30m"` or `"1d"`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Duration(String);

/// A duration string that does not follow the grammar.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{input:?} is not a duration ({problem}); write it like \"500ms\", \"30s\", \"5m\", \"1h30m\" or \"1d\""
)]
pub struct DurationError {
    pub input: String,
    pub problem: String,
}

impl Duration {
    /// Wraps the text without checking it; [`Duration::to_std`] checks.
    pub fn new(text: impl Into<String>) -> Self {
        Duration(text.into())
    }

    /// The canonical text of a `std` duration: `1h30m`, `45s`, `250ms`, `0s`.
    /// Sub-millisecond parts are dropped.
    pub fn from_std(duration: std::time::Duration) -> Self {
        let total_ms = duration.as_millis();
        if total_ms == 0 {
            return Duration("0s".to_owned());
        }
        let (hours, rest) = (total_ms / 3_600_000, total_ms % 3_600_000);
        let (minutes, rest) = (rest / 60_000, rest % 60_000);
        let (seconds, millis) = (rest / 1000, rest % 1000);
        let mut text = String::new();
        for (value, unit) in [(hours, "h"), (minutes, "m"), (seconds, "s"), (millis, "ms")] {
            if value > 0 {
                text.push_str(&format!("{value}{unit}"));
            }
        }
        Duration(text)
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses the text.
    pub fn to_std(&self) -> Result<std::time::Duration, DurationError> {
        parse(&self.0)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Duration {
    fn from(text: &str) -> Self {
        Duration::new(text)
    }
}

impl From<std::time::Duration> for Duration {
    fn from(duration: std::time::Duration) -> Self {
        Duration::from_std(duration)
    }
}

impl FromStr for Duration {
    type Err = DurationError;

    /// Accepts only text that parses.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse(text)?;
        Ok(Duration::new(text))
    }
}

impl JsonSchema for Duration {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": DURATION_PATTERN,
        })
    }
}

const NANOS_PER_UNIT: [(&str, u128); 5] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
];

/// Parses Go-style duration text, the grammar of [`DURATION_PATTERN`], exact
/// to the nanosecond.
pub fn parse(input: &str) -> Result<std::time::Duration, DurationError> {
    let fail = |problem: &str| DurationError {
        input: input.to_owned(),
        problem: problem.to_owned(),
    };
    if input.is_empty() {
        return Err(fail("it is empty"));
    }
    let mut rest = input;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        if int_len == 0 {
            return Err(fail("expected a number"));
        }
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(after) => {
                let frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
                if frac_len == 0 {
                    return Err(fail("expected digits after the decimal point"));
                }
                after.split_at(frac_len)
            }
            None => ("", after),
        };
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit_text, after) = after.split_at(unit_len);
        let unit = match NANOS_PER_UNIT.iter().find(|(name, _)| *name == unit_text) {
            Some(&(_, nanos)) => nanos,
            None if unit_text.is_empty() => {
                return Err(fail("a number lacks its unit: d, h, m, s or ms"));
            }
            None => {
                return Err(fail(&format!(
                    "unknown unit {unit_text:?}; the units are d, h, m, s and ms"
                )));
            }
        };
        let int_value: u128 = int_part.parse().map_err(|_| fail("number too large"))?;
        let mut value = int_value
            .checked_mul(unit)
            .ok_or_else(|| fail("number too large"))?;
        // Fractions below a nanosecond are dropped, as Go does.
        let mut scale = unit;
        for digit in frac_part.bytes().take(30) {
            scale /= 10;
            value += u128::from(digit - b'0') * scale;
        }
        total = total
            .checked_add(value)
            .ok_or_else(|| fail("number too large"))?;
        rest = after;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| fail("number too large"))?;
    // The remainder is below 1e9 and fits.
    let nanos = (total % 1_000_000_000) as u32;
    Ok(std::time::Duration::new(secs, nanos))
}

/// Parses a scenario's duration: the units of [`Duration`], days included
/// (`"30d"`, `"1d12h"`). Returns milliseconds.
///
/// More lenient than [`Duration`], on purpose and kept so: it trims the
/// text, accepts a number without a digit before or after its point
/// (`".5h"`, `"1.h"`), and computes in `f64`, rounded to the millisecond.
/// Its errors suggest `"720h"` and `"30d"`.
pub(crate) fn parse_ms_with_days(text: &str) -> Result<u64, String> {
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

#[cfg(test)]
mod tests {
    use std::time::Duration as Std;

    use super::*;

    #[test]
    fn go_style_durations_parse() {
        let cases = [
            ("30s", Std::from_secs(30)),
            ("5m", Std::from_secs(300)),
            ("1h", Std::from_secs(3600)),
            ("1h30m", Std::from_secs(5400)),
            ("500ms", Std::from_millis(500)),
            ("1m0s", Std::from_secs(60)),
            ("1.5h", Std::from_secs(5400)),
            ("0.25s", Std::from_millis(250)),
            ("2h45m30s250ms", Std::from_millis(9_930_250)),
            ("0s", Std::ZERO),
            ("1d", Std::from_secs(86_400)),
            ("1d12h", Std::from_secs(129_600)),
            ("0.5d", Std::from_secs(43_200)),
        ];
        for (text, expected) in cases {
            assert_eq!(Duration::new(text).to_std(), Ok(expected), "{text}");
        }
    }

    #[test]
    fn malformed_durations_are_refused_with_the_input_and_a_hint() {
        for text in [
            "", "30", "s", "5 m", "-5m", "1w", "1.h", ".5s", "1h30", "10us", "5M", "1e3s",
        ] {
            let err = Duration::new(text).to_std().expect_err(text);
            let message = err.to_string();
            assert!(message.contains(&format!("{text:?}")), "{message}");
            assert!(message.contains("\"1h30m\""), "{message}");
            assert!(message.contains("\"1d\""), "{message}");
        }
    }

    #[test]
    fn overflowing_durations_are_refused() {
        let err = Duration::new("99999999999999999999999999999999999999999h")
            .to_std()
            .unwrap_err();
        assert_eq!(err.problem, "number too large");
        assert!(Duration::new("9999999999999999h").to_std().is_err());
    }

    #[test]
    fn from_str_checks_the_text() {
        assert!("5m".parse::<Duration>().is_ok());
        assert!("5 minutes".parse::<Duration>().is_err());
    }

    #[test]
    fn from_std_writes_canonical_text_that_parses_back() {
        for (std, text) in [
            (Std::from_secs(5400), "1h30m"),
            (Std::from_secs(30), "30s"),
            (Std::from_millis(1500), "1s500ms"),
            (Std::ZERO, "0s"),
        ] {
            let duration = Duration::from_std(std);
            assert_eq!(duration.as_str(), text);
            assert_eq!(duration.to_std(), Ok(std));
        }
    }

    #[test]
    fn serialises_as_the_text_as_written() {
        let duration: Duration = serde_json::from_str("\"90s\"").unwrap();
        assert_eq!(duration.as_str(), "90s");
        assert_eq!(serde_json::to_string(&duration).unwrap(), "\"90s\"");
    }

    #[test]
    fn schema_is_a_string_with_the_grammar_as_pattern() {
        let schema = schemars::schema_for!(Duration);
        assert_eq!(schema.get("type"), Some(&serde_json::json!("string")));
        assert_eq!(
            schema.get("pattern"),
            Some(&serde_json::json!(DURATION_PATTERN))
        );
    }

    #[test]
    fn scenario_durations_accept_go_units_and_days() {
        assert_eq!(parse_ms_with_days("5m"), Ok(300_000));
        assert_eq!(parse_ms_with_days("1h30m"), Ok(5_400_000));
        assert_eq!(parse_ms_with_days("720h"), parse_ms_with_days("30d"));
        assert_eq!(parse_ms_with_days("1.5h"), Ok(5_400_000));
        assert_eq!(parse_ms_with_days("250ms"), Ok(250));
        assert!(parse_ms_with_days("5").is_err());
        assert!(parse_ms_with_days("h").is_err());
        assert!(parse_ms_with_days("5w").is_err());
    }
}
