//! The scenario a replay borrows its thresholds, migration model and
//! parameters from.

use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;
use serde_saphyr::Location;

use super::{DEFAULT_MIGRATION_MS, Error, Result, Window};
use crate::simulate::error::{Error as ScenarioError, Located};
use crate::simulate::scenario::{ClusterSpec, MigrationModel, Scenario, WorkloadSpec, parse};
use crate::units::duration::parse_ms_with_days;

/// What a replay takes from a scenario file: thresholds, selector, target
/// clusters, parameters, seed, the migration model and `interval`,
/// `backAndForthWindow`. Its `start`, `duration`, `step`, clusters and
/// workloads are ignored and may be left out; durations are converted to the
/// replay's step.
#[derive(Clone, Debug)]
pub struct Template {
    scenario: Scenario,
    interval_ms: Option<u64>,
    migration_ms: u64,
}

/// The fields of a template that depend on the step, read leniently: every
/// field is checked by the scenario parser.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TimeFields {
    #[serde(default)]
    duration: Option<String>,
    #[serde(default)]
    step: Option<String>,
    #[serde(default)]
    interval: Option<String>,
    #[serde(default)]
    clusters: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    migration: Option<MigrationTime>,
}

#[derive(Debug, Default, Deserialize)]
struct MigrationTime {
    #[serde(default)]
    duration: Option<String>,
}

/// Satisfies the scenario parser when a template has no clusters.
const PLACEHOLDER_CLUSTERS: &str = "clusters: [{name: template, allocatable: {cpu: 1, memory: 1}, prices: {cpuCoreHour: 0, memoryGibHour: 0}}]\n";

impl Template {
    /// The CRD's defaults, as a scenario file without those fields has them.
    pub fn defaults(seed: Option<u64>) -> Template {
        Template::parse("", "<defaults>", Path::new("."), seed).expect("an empty template is valid")
    }

    /// Reads a scenario file as a template; `seed` overrides the file's.
    pub fn load(path: &Path, seed: Option<u64>) -> Result<Template> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_owned(),
            source,
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Template::parse(&text, &path.display().to_string(), dir, seed)
    }

    /// Parses scenario text as a template, checked by the scenario parser
    /// (errors name the line and field).
    pub fn parse(text: &str, file: &str, dir: &Path, seed: Option<u64>) -> Result<Template> {
        let fields: TimeFields = if text.trim().is_empty() {
            TimeFields::default()
        } else {
            match serde_saphyr::from_str(text) {
                Ok(fields) => fields,
                // The scenario parser tells where the text is wrong.
                Err(err) => {
                    parse(text, file, dir, seed)?;
                    return Err(ScenarioError::Syntax {
                        file: file.to_owned(),
                        line: 0,
                        column: 0,
                        message: err.to_string(),
                    }
                    .into());
                }
            }
        };
        // Added at the end, so the lines of the file keep their numbers.
        let mut full = text.to_owned();
        if !full.is_empty() && !full.ends_with('\n') {
            full.push('\n');
        }
        let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
        match (&fields.duration, &fields.step) {
            (None, None) => full.push_str("duration: 1s\nstep: 1s\n"),
            (None, Some(step)) => {
                let _ = writeln!(full, "duration: {}", quoted(step));
            }
            (Some(duration), None) => {
                let _ = writeln!(full, "step: {}", quoted(duration));
            }
            (Some(_), Some(_)) => {}
        }
        if fields.clusters.is_none() {
            full.push_str(PLACEHOLDER_CLUSTERS);
        }
        let scenario = parse(&full, file, dir, seed)?;
        let duration = |field: &str, text: &str| {
            parse_ms_with_days(text).map_err(|m| {
                ScenarioError::Invalid(Located::new(file, Location::UNKNOWN, field, m))
            })
        };
        let interval_ms = fields
            .interval
            .as_deref()
            .map(|i| duration("interval", i))
            .transpose()?;
        let migration_ms = match fields.migration.and_then(|m| m.duration) {
            Some(d) => duration("migration.duration", &d)?,
            None => DEFAULT_MIGRATION_MS,
        };
        Ok(Template {
            scenario,
            interval_ms,
            migration_ms,
        })
    }

    /// The scenario of the replayed clusters and workloads on `window`.
    pub(super) fn apply(
        &self,
        window: &Window,
        clusters: Vec<ClusterSpec>,
        workloads: Vec<WorkloadSpec>,
    ) -> Result<Scenario> {
        let step_ms = window.step as u64 * 1000;
        let interval_steps = match self.interval_ms {
            None => 1,
            Some(ms) if ms > 0 && ms % step_ms == 0 => (ms / step_ms) as usize,
            Some(ms) => {
                return Err(Error::Interval {
                    interval_ms: ms,
                    step_secs: window.step,
                });
            }
        };
        Ok(Scenario {
            name: format!("replay {} to {}", window.start(), window.end()),
            start_ms: window.start as u64 * 1000,
            step_ms,
            steps: window.steps,
            interval_steps,
            migration: MigrationModel {
                duration_steps: (self.migration_ms.div_ceil(step_ms) as usize).max(1),
                ..self.scenario.migration.clone()
            },
            clusters,
            workloads,
            ..self.scenario.clone()
        })
    }
}
