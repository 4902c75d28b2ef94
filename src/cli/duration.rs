//! The one duration grammar of every duration flag: `500ms`, `2s`, `5m`,
//! `1h30m`, `1d` ([`ferry::units::duration::parse`], the CRDs' grammar).

use std::time::Duration;

/// clap's value parser for a duration flag.
pub fn parse(text: &str) -> Result<Duration, String> {
    ferry::units::duration::parse(text).map_err(|err| err.to_string())
}

/// A duration flag that must not be zero, such as a timeout.
pub fn parse_positive(text: &str) -> Result<Duration, String> {
    match parse(text)? {
        Duration::ZERO => Err(format!("{text:?} is zero; give a positive duration")),
        duration => Ok(duration),
    }
}
