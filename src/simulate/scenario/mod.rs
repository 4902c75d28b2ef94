//! The scenario file: how it is written (YAML, see docs/simulation.md, "The
//! scenario file" and `examples/simulate/scenario.yaml`) and what it compiles
//! to. Every value that is checked keeps its location, so an error names the
//! line and the field at fault.
//!
//! [`raw`] mirrors the file, [`compile`] turns it into a [`Scenario`], and
//! [`thresholds`] checks the thresholds with the code that checks a
//! `MigrationPolicy`. Never reads a clock or a cluster; only CSV files next
//! to the scenario.

mod compile;
mod raw;
mod thresholds;

use std::path::Path;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_saphyr::{Location, Spanned};

use super::error::{Error, Located, Result};
use super::series::Series;
use crate::contract::{Label, Thresholds};
use crate::crd::Guardrails;
use crate::units::duration::parse_ms_with_days;
use compile::compile_scenario;
use raw::RawScenario;

/// Default start of the virtual clock: 2025-01-06T00:00:00Z (a Monday).
pub const DEFAULT_START_MS: u64 = 1_736_121_600_000;
/// Longest run: a million steps.
pub const MAX_STEPS: u64 = 1_000_000;

/// A scenario ready to run: every series compiled to the step grid.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub start_ms: u64,
    pub step_ms: u64,
    pub steps: usize,
    /// The policy runs every `interval_steps` steps.
    pub interval_steps: usize,
    pub seed: u64,
    pub thresholds: Thresholds,
    pub guardrails: Guardrails,
    pub selector: Option<LabelSelector>,
    pub target_clusters: Vec<String>,
    pub parameters_json: String,
    pub migration: MigrationModel,
    /// A move back to where the workload came from within this window counts
    /// as back-and-forth.
    pub back_and_forth_window_ms: u64,
    pub clusters: Vec<ClusterSpec>,
    pub workloads: Vec<WorkloadSpec>,
}

/// How moves behave in the simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct MigrationModel {
    /// Steps from the decision until the workload runs at the target (at least 1).
    pub duration_steps: usize,
    /// Charged once per move started, failed or not.
    pub cost: f64,
    /// Chance that a move fails (the workload stays), drawn from the seed.
    pub failure_probability: f64,
}

#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub name: String,
    pub region: String,
    pub labels: Vec<Label>,
    /// Allocatable cores and GiB.
    pub cpu_cores: Series,
    pub memory_gib: Series,
    /// Prices per core-hour and per GiB-hour.
    pub cpu_price: Series,
    pub memory_price: Series,
    /// Grams of CO2 per kWh, when the scenario gives them.
    pub carbon_intensity: Option<Series>,
}

#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    pub namespace: String,
    pub name: String,
    pub kind: String,
    /// Index into [`Scenario::clusters`] where it starts.
    pub cluster: usize,
    pub labels: Vec<Label>,
    pub pinned: bool,
    pub replicas: Series,
    pub pod_cpu_millis: u64,
    pub pod_memory_bytes: u64,
    /// Per-pod usage in cores and GiB, when modelled.
    pub usage_cpu_cores: Option<Series>,
    pub usage_memory_gib: Option<Series>,
}

/// Reads and compiles a scenario file; `seed` overrides the file's.
pub fn load(path: &Path, seed: Option<u64>) -> Result<Scenario> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse(&text, &path.display().to_string(), dir, seed)
}

/// Parses and compiles scenario text; `file` names it in errors and `dir`
/// resolves CSV paths.
pub fn parse(text: &str, file: &str, dir: &Path, seed: Option<u64>) -> Result<Scenario> {
    let raw: RawScenario = serde_saphyr::from_str(text).map_err(|err| {
        let location = err.location().unwrap_or(Location::UNKNOWN);
        // The parser's text starts with its own `error: ` and calls the
        // file `<input>` in its snippet; the file's name is the caller's.
        let text = err.to_string();
        let message = text
            .strip_prefix("error: ")
            .unwrap_or(&text)
            .replace("<input>", file);
        Error::Syntax {
            file: file.to_owned(),
            line: location.line(),
            column: location.column(),
            message,
        }
    })?;
    compile_scenario(raw, file, dir, seed)
}

fn invalid(file: &str, loc: Location, field: &str, message: impl Into<String>) -> Error {
    Error::Invalid(Located::new(file, loc, field, message.into()))
}

fn duration_of(file: &str, field: &str, value: &Spanned<String>) -> Result<u64> {
    parse_ms_with_days(&value.value).map_err(|m| invalid(file, value.referenced, field, m))
}
