//! Range queries for replay: split so that no request asks Prometheus for
//! more than [`MAX_POINTS_PER_REQUEST`] points per series, then merged back in
//! order. The splitting and merging are pure.

use std::collections::BTreeMap;

use jiff::Timestamp;
use prometheus_http_query::response::RangeVector;

/// Prometheus refuses a range query whose `(end - start) / step` exceeds
/// 11,000; a chunk of this many points stays below that.
pub const MAX_POINTS_PER_REQUEST: u64 = 11_000;

/// One series of a range query: its labels and its finite points in time
/// order. NaN and ±Inf points are left out (they are gaps, not numbers).
#[derive(Clone, Debug, PartialEq)]
pub struct RangeSeries {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(Timestamp, f64)>,
}

/// `[start, end]` in whole seconds with a whole-second step, cut into
/// consecutive chunks of at most `max_points` evaluation points each. Every
/// chunk starts on the grid `start + k × step`, so the chunks share no point.
pub(crate) fn split_range(start: i64, end: i64, step: i64, max_points: u64) -> Vec<(i64, i64)> {
    debug_assert!(step > 0 && end >= start && max_points > 0);
    let total = (end - start) / step + 1;
    let per_chunk = i64::try_from(max_points).unwrap_or(i64::MAX);
    let mut chunks = Vec::new();
    let mut first = 0;
    while first < total {
        let last = (first + per_chunk - 1).min(total - 1);
        chunks.push((start + first * step, start + last * step));
        first = last + 1;
    }
    chunks
}

/// Appends the series of one chunk to those of the chunks before it. Points
/// not strictly after the last kept point of their series are dropped, so a
/// server that answers overlapping chunks still yields no duplicate.
pub(crate) fn merge_chunk(
    merged: &mut BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>>,
    chunk: Vec<RangeVector>,
) {
    for series in chunk {
        let (labels, samples) = series.into_inner();
        let points = merged.entry(labels.into_iter().collect()).or_default();
        for sample in samples {
            let millis = (sample.timestamp() * 1000.0).round() as i64;
            let value = sample.value();
            if !value.is_finite() || points.last().is_some_and(|(t, _)| *t >= millis) {
                continue;
            }
            points.push((millis, value));
        }
    }
}

pub(crate) fn into_series(
    merged: BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>>,
) -> Vec<RangeSeries> {
    merged
        .into_iter()
        .map(|(labels, points)| RangeSeries {
            labels,
            points: points
                .into_iter()
                .filter_map(|(ms, v)| Some((Timestamp::from_millisecond(ms).ok()?, v)))
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_point_once() {
        for (start, end, step, max) in [
            (0, 100, 10, 3),
            (0, 99, 10, 4),
            (5, 5, 1, 1),
            (0, 21_999, 1, 11_000),
            (0, 22_000, 1, 11_000),
        ] {
            let chunks = split_range(start, end, step, max);
            let mut points = Vec::new();
            for (a, b) in &chunks {
                assert!(
                    (b - a) / step < max as i64,
                    "{a}..{b} holds too many points"
                );
                points.extend((*a..=*b).step_by(step as usize));
            }
            let expected: Vec<i64> = (start..=end).step_by(step as usize).collect();
            assert_eq!(points, expected, "{start}..{end} step {step} max {max}");
        }
        assert_eq!(split_range(0, 22_000, 1, 11_000).len(), 3);
        assert_eq!(split_range(0, 21_999, 1, 11_000).len(), 2);
    }

    #[test]
    fn merged_points_are_ordered_unique_and_finite() {
        let chunk =
            |json: serde_json::Value| -> Vec<RangeVector> { serde_json::from_value(json).unwrap() };
        let mut merged = BTreeMap::new();
        merge_chunk(
            &mut merged,
            chunk(serde_json::json!([
                {"metric": {"a": "1"}, "values": [[10, "1"], [20, "2"]]}
            ])),
        );
        merge_chunk(
            &mut merged,
            chunk(serde_json::json!([
                {"metric": {"a": "1"}, "values": [[20, "2"], [30, "NaN"], [40, "4"]]},
                {"metric": {"a": "2"}, "values": [[30, "+Inf"], [40, "5"]]}
            ])),
        );
        let series = into_series(merged);
        assert_eq!(series.len(), 2);
        let secs: Vec<(i64, f64)> = series[0]
            .points
            .iter()
            .map(|(t, v)| (t.as_second(), *v))
            .collect();
        assert_eq!(secs, [(10, 1.0), (20, 2.0), (40, 4.0)]);
        assert_eq!(series[1].points.len(), 1);
    }
}
