//! Values over time in a scenario: how they are written and how they are
//! compiled to one value per simulation step, so the step loop only indexes.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_saphyr::Spanned;

use super::error::{Error, Located};
use super::random::{Rng, stream_id};
use crate::units::duration::parse_ms_with_days;
use crate::units::scenario::offset_ms;

/// A value over time as written in the scenario: a number, or a map with
/// exactly one of `steps`, `csv`, `daily`, `spikes`.
#[derive(Clone, Debug)]
pub(crate) enum SeriesSpec {
    Constant(f64),
    /// Piecewise constant: each value holds from its `at` (offset from the
    /// start) until the next; before the first, the first value.
    Steps(Vec<StepSpec>),
    /// A CSV file (path relative to the scenario) with a `time,value` header;
    /// `time` is an offset (`"72h"`, `"3d"`) or seconds from the start. Read
    /// as steps.
    Csv(String),
    /// `base + amplitude * cos(2π (hour - peakHour) / 24)`, hour of the day in UTC.
    Daily(DailySpec),
    /// `base` multiplied by `multiplier` during spikes. A spike starts at a
    /// step with `probability`, drawn from the seed, and lasts `duration`.
    Spikes(Box<SpikesSpec>),
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StepSpec {
    pub at: Spanned<String>,
    pub value: Spanned<f64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DailySpec {
    pub base: Spanned<f64>,
    pub amplitude: Spanned<f64>,
    #[serde(default)]
    pub peak_hour: Option<Spanned<f64>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SpikesSpec {
    pub base: Spanned<SeriesSpec>,
    pub probability: Spanned<f64>,
    pub multiplier: Spanned<f64>,
    pub duration: Spanned<String>,
}

impl<'de> Deserialize<'de> for SeriesSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SeriesVisitor;
        impl<'de> Visitor<'de> for SeriesVisitor {
            type Value = SeriesSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a map with one of steps, csv, daily, spikes")
            }
            fn visit_f64<E>(self, v: f64) -> Result<SeriesSpec, E> {
                Ok(SeriesSpec::Constant(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<SeriesSpec, E> {
                Ok(SeriesSpec::Constant(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<SeriesSpec, E> {
                Ok(SeriesSpec::Constant(v as f64))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SeriesSpec, A::Error> {
                const KINDS: &[&str] = &["steps", "csv", "daily", "spikes"];
                let key: String = map.next_key()?.ok_or_else(|| {
                    de::Error::custom("empty series; use one of steps, csv, daily, spikes")
                })?;
                let spec = match key.as_str() {
                    "steps" => SeriesSpec::Steps(map.next_value()?),
                    "csv" => SeriesSpec::Csv(map.next_value()?),
                    "daily" => SeriesSpec::Daily(map.next_value()?),
                    "spikes" => SeriesSpec::Spikes(Box::new(map.next_value()?)),
                    other => return Err(de::Error::unknown_field(other, KINDS)),
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a series has exactly one kind, but {extra:?} follows {key:?}"
                    )));
                }
                Ok(spec)
            }
        }
        deserializer.deserialize_any(SeriesVisitor)
    }
}

/// A compiled series: one value per step, or one value for all.
#[derive(Clone, Debug)]
pub enum Series {
    Constant(f64),
    Table(Arc<[f64]>),
}

impl Series {
    #[inline]
    pub fn at(&self, step: usize) -> f64 {
        match self {
            Series::Constant(v) => *v,
            Series::Table(values) => values[step.min(values.len() - 1)],
        }
    }

    pub fn min(&self) -> f64 {
        match self {
            Series::Constant(v) => *v,
            Series::Table(values) => values.iter().copied().fold(f64::INFINITY, f64::min),
        }
    }
}

/// What compiling needs to know about the run.
pub(crate) struct Clock<'a> {
    pub start_ms: u64,
    pub step_ms: u64,
    pub steps: usize,
    pub seed: u64,
    /// The scenario's directory, for CSV paths.
    pub dir: &'a Path,
    pub file: &'a str,
}

impl Clock<'_> {
    fn step_of(&self, offset_ms: u64) -> usize {
        (offset_ms / self.step_ms.max(1)) as usize
    }
}

/// Compiles a series; `path` names the field in errors and seeds its spikes.
pub(crate) fn compile(
    spec: &Spanned<SeriesSpec>,
    path: &str,
    clock: &Clock<'_>,
) -> Result<Series, Error> {
    let at = |field: &str, message: String, loc: serde_saphyr::Location| {
        Error::Invalid(Located::new(clock.file, loc, field, message))
    };
    match &spec.value {
        SeriesSpec::Constant(v) => Ok(Series::Constant(*v)),
        SeriesSpec::Steps(steps) => {
            if steps.is_empty() {
                return Err(at(path, "has no steps".into(), spec.referenced));
            }
            let mut points = Vec::with_capacity(steps.len());
            for (i, s) in steps.iter().enumerate() {
                let offset = parse_ms_with_days(&s.at.value)
                    .map_err(|m| at(&format!("{path}.steps[{i}].at"), m, s.at.referenced))?;
                points.push((offset, s.value.value));
            }
            Ok(from_points(&mut points, clock))
        }
        SeriesSpec::Csv(file) => {
            let full = clock.dir.join(file);
            let text = std::fs::read_to_string(&full).map_err(|source| Error::Read {
                path: full.clone(),
                source,
            })?;
            let mut points = read_csv(&text, &full.display().to_string())?;
            Ok(from_points(&mut points, clock))
        }
        SeriesSpec::Daily(d) => {
            let peak = d.peak_hour.as_ref().map_or(0.0, |p| p.value);
            let values: Vec<f64> = (0..clock.steps)
                .map(|step| {
                    let ms = clock.start_ms + step as u64 * clock.step_ms;
                    let hour = (ms % 86_400_000) as f64 / 3_600_000.0;
                    let phase = (hour - peak) / 24.0 * std::f64::consts::TAU;
                    d.base.value + d.amplitude.value * phase.cos()
                })
                .collect();
            Ok(Series::Table(values.into()))
        }
        SeriesSpec::Spikes(s) => {
            let base = compile(&s.base, &format!("{path}.spikes.base"), clock)?;
            let p = s.probability.value;
            if !(0.0..=1.0).contains(&p) {
                return Err(at(
                    &format!("{path}.spikes.probability"),
                    format!("is {p}; must be between 0 and 1"),
                    s.probability.referenced,
                ));
            }
            let length = parse_ms_with_days(&s.duration.value)
                .map_err(|m| at(&format!("{path}.spikes.duration"), m, s.duration.referenced))?;
            let length_steps = length.div_ceil(clock.step_ms.max(1)).max(1) as usize;
            let mut rng = Rng::new(clock.seed ^ stream_id(path));
            let mut until = 0usize;
            let values: Vec<f64> = (0..clock.steps)
                .map(|step| {
                    if step >= until && rng.next_f64() < p {
                        until = step + length_steps;
                    }
                    let v = base.at(step);
                    if step < until {
                        v * s.multiplier.value
                    } else {
                        v
                    }
                })
                .collect();
            Ok(Series::Table(values.into()))
        }
    }
}

fn from_points(points: &mut [(u64, f64)], clock: &Clock<'_>) -> Series {
    points.sort_by_key(|p| p.0);
    if points.len() == 1 || points.iter().all(|p| p.1 == points[0].1) {
        return Series::Constant(points[0].1);
    }
    let mut values = Vec::with_capacity(clock.steps);
    let mut next = 0;
    let mut current = points[0].1;
    for step in 0..clock.steps {
        while next < points.len() && clock.step_of(points[next].0) <= step {
            current = points[next].1;
            next += 1;
        }
        values.push(current);
    }
    Series::Table(values.into())
}

fn read_csv(text: &str, file: &str) -> Result<Vec<(u64, f64)>, Error> {
    let err = |line: usize, message: String| Error::Csv {
        file: file.to_owned(),
        line,
        message,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, header)) if header.replace(' ', "") == "time,value" => {}
        _ => {
            return Err(err(
                1,
                "the first line must be the header `time,value`".into(),
            ));
        }
    }
    let mut points = Vec::new();
    for (i, line) in lines {
        let n = i + 1;
        let (time, value) = line
            .split_once(',')
            .ok_or_else(|| err(n, format!("{line:?} is not `time,value`")))?;
        let (time, value) = (time.trim(), value.trim());
        let offset = offset_ms(time).map_err(|m| err(n, m))?;
        let value: f64 = value
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| err(n, format!("{value:?} is not a number")))?;
        points.push((offset, value));
    }
    if points.is_empty() {
        return Err(err(1, "has no rows".into()));
    }
    Ok(points)
}
