//! Turning raw samples into values this layer can vouch for. Pure: no client.
//!
//! Rules: a missing series, NaN, ±Inf, a value seen twice for one key, and a
//! sample older than the freshness window all become `None`. Staleness is
//! reported separately so that a cluster with stale data is marked not fresh.

use std::time::Duration;

/// What the samples of one key amounted to.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) enum Cell {
    /// No series for this key.
    #[default]
    Missing,
    /// Exactly one series.
    One(f64),
    /// More than one series after aggregation: ambiguous, never a number.
    Duplicate,
}

impl Cell {
    pub(crate) fn push(&mut self, value: f64) {
        *self = match self {
            Cell::Missing => Cell::One(value),
            Cell::One(_) | Cell::Duplicate => Cell::Duplicate,
        };
    }
}

/// A value after the rules above.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Checked {
    pub value: Option<f64>,
    /// The value existed but its newest-required sample was too old.
    pub stale: bool,
    /// Any series was seen for this value (even if rejected).
    pub seen: bool,
}

/// Applies the rules to a value and the timestamp of its oldest contributing
/// sample (seconds). A timestamp that is missing or unusable leaves the value
/// unchecked for staleness: only the value's own query decides then.
pub(crate) fn check(value: Cell, sample_time: Cell, at_secs: f64, window: Duration) -> Checked {
    let seen = value != Cell::Missing;
    let Cell::One(v) = value else {
        return Checked {
            value: None,
            stale: false,
            seen,
        };
    };
    if let Cell::One(t) = sample_time
        && t.is_finite()
        && at_secs - t > window.as_secs_f64()
    {
        return Checked {
            value: None,
            stale: true,
            seen,
        };
    }
    Checked {
        value: v.is_finite().then_some(v),
        stale: false,
        seen,
    }
}

/// Cores (as Prometheus reports them) to whole millicores; negative is no data.
pub(crate) fn cores_to_millis(cores: Option<f64>) -> Option<u64> {
    to_u64(cores.map(|c| c * 1000.0))
}

/// A non-negative finite amount to a whole number (bytes, millicores).
pub(crate) fn to_u64(value: Option<f64>) -> Option<u64> {
    let v = value?;
    // `as` saturates; values beyond u64 are not real capacities anyway.
    (v.is_finite() && v >= 0.0).then(|| v.round() as u64)
}

/// A fraction or price: finite and not negative.
pub(crate) fn non_negative(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && *v >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(180);

    fn cell(values: &[f64]) -> Cell {
        let mut cell = Cell::Missing;
        for v in values {
            cell.push(*v);
        }
        cell
    }

    #[test]
    fn only_one_finite_fresh_sample_becomes_a_value() {
        let at = 1_000.0;
        let cases = [
            (cell(&[]), cell(&[]), None, false),
            (cell(&[2.5]), cell(&[]), Some(2.5), false),
            (cell(&[2.5]), cell(&[at - 10.0]), Some(2.5), false),
            (cell(&[2.5]), cell(&[at - 180.0]), Some(2.5), false),
            (cell(&[2.5]), cell(&[at - 181.0]), None, true),
            (cell(&[f64::NAN]), cell(&[at]), None, false),
            (cell(&[f64::INFINITY]), cell(&[at]), None, false),
            (cell(&[f64::NEG_INFINITY]), cell(&[at]), None, false),
            (cell(&[1.0, 1.0]), cell(&[at]), None, false),
            (cell(&[1.0]), cell(&[f64::NAN]), Some(1.0), false),
        ];
        for (i, (value, time, expected, stale)) in cases.into_iter().enumerate() {
            let got = check(value, time, at, WINDOW);
            assert_eq!(got.value, expected, "case {i}");
            assert_eq!(got.stale, stale, "case {i}");
        }
    }

    #[test]
    fn amounts_are_whole_and_never_negative() {
        assert_eq!(cores_to_millis(Some(2.25)), Some(2250));
        assert_eq!(cores_to_millis(Some(0.0004)), Some(0));
        assert_eq!(cores_to_millis(Some(-1.0)), None);
        assert_eq!(cores_to_millis(None), None);
        assert_eq!(to_u64(Some(5_905_580_032.0)), Some(5_905_580_032));
        assert_eq!(to_u64(Some(f64::NAN)), None);
        assert_eq!(non_negative(Some(0.03)), Some(0.03));
        assert_eq!(non_negative(Some(-0.03)), None);
    }
}
