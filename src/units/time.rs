//! Points in time as the command line takes them (`--at`, `--from`, `--to`):
//! an RFC 3339 time or bare Unix seconds. Pure: never reads the clock, so
//! "now" is never a value here.

use jiff::Timestamp;

/// An RFC 3339 time or Unix seconds.
pub fn parse(text: &str) -> Result<Timestamp, String> {
    let t = text.trim();
    if let Ok(seconds) = t.parse::<i64>() {
        return Timestamp::from_second(seconds).map_err(|e| format!("{t:?}: {e}"));
    }
    t.parse::<Timestamp>().map_err(|e| {
        format!("{t:?} is neither an RFC 3339 time (2026-01-01T00:00:00Z) nor Unix seconds ({e})")
    })
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn time_is_rfc3339_or_unix_seconds() {
        let a = parse("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(a, parse("1767225600").unwrap());
        assert!(parse("yesterday").is_err());
    }
}
