//! `ferry policy test`: runs a module on each fixture of a directory and
//! says, per decision, where its answers differ from the expected ones.
//! Exit 0 when every fixture passes, 3 when one fails, 2 when a fixture or
//! the module cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use ferry::policy::{Engine, EngineConfig};
use serde::Serialize;

use super::exit::{POLICY_FAILED, USAGE, fail};
use super::output::OutputArgs;
use super::policy::read_module;
use super::policy_compare::{Difference, compare};
use super::policy_fixture::{Fixture, fixture_files, read_fixture};
use super::policy_format::{millis, print_structured};
use super::policy_limits::LimitArgs;

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The module: a WebAssembly component built for wasm32-wasip2.
    #[arg(value_name = "MODULE.wasm")]
    module: PathBuf,
    /// A directory of fixtures (its `*.yaml`, `*.yml` and `*.json` files),
    /// or one fixture file.
    #[arg(value_name = "FIXTURES", default_value = "fixtures")]
    fixtures: PathBuf,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// The outcome of a run, as `-o json` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TestReport {
    module: String,
    sha256: String,
    passed: usize,
    failed: usize,
    fixtures: Vec<FixtureReport>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FixtureReport {
    file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    passed: bool,
    /// Instantiation and `decide`, as `ferry policy eval` reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    elapsed_ms: Option<f64>,
    differences: Vec<Difference>,
}

pub(super) fn test(args: TestArgs) -> anyhow::Result<ExitCode> {
    let bytes = match read_module(&args.module) {
        Ok(bytes) => bytes,
        Err(message) => return Ok(fail(USAGE, &message)),
    };
    let fixtures = match read_fixtures(&args.fixtures) {
        Ok(fixtures) => fixtures,
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {error}");
            }
            return Ok(ExitCode::from(USAGE));
        }
    };
    let engine = Engine::new(EngineConfig::default()).context("starting the policy engine")?;
    let name = args.module.display().to_string();
    let policy = match engine.load(&name, &bytes, None) {
        Ok(policy) => policy,
        Err(err) => return Ok(fail(POLICY_FAILED, &format!("{name}: Load: {err}"))),
    };
    let limits = args.limits.limits();
    let reports: Vec<FixtureReport> = fixtures
        .into_iter()
        .map(|fixture| {
            let result = engine.evaluate_blocking(&policy, &fixture.snapshot, &limits);
            let differences = compare(&fixture.snapshot, &fixture.expect, &result);
            FixtureReport {
                file: fixture.path.display().to_string(),
                description: fixture.description,
                passed: differences.is_empty(),
                elapsed_ms: result.ok().map(|evaluation| millis(evaluation.elapsed)),
                differences,
            }
        })
        .collect();
    let failed = reports.iter().filter(|r| !r.passed).count();
    let report = TestReport {
        module: name,
        sha256: policy.digest().to_owned(),
        passed: reports.len() - failed,
        failed,
        fixtures: reports,
    };
    if !print_structured(args.output.output, &report)? {
        print_table(&report);
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(POLICY_FAILED)
    })
}

/// Every fixture of `path`, or every problem found reading them.
fn read_fixtures(path: &std::path::Path) -> Result<Vec<Fixture>, Vec<String>> {
    let files = fixture_files(path).map_err(|err| vec![err.to_string()])?;
    let (fixtures, errors): (Vec<_>, Vec<_>) = files
        .iter()
        .map(|file| read_fixture(file))
        .partition(Result::is_ok);
    if errors.is_empty() {
        Ok(fixtures.into_iter().flatten().collect())
    } else {
        Err(errors
            .into_iter()
            .filter_map(|e| e.err().map(|e| e.to_string()))
            .collect())
    }
}

fn print_table(report: &TestReport) {
    for fixture in &report.fixtures {
        let verdict = if fixture.passed { "PASS" } else { "FAIL" };
        match &fixture.description {
            Some(description) => println!("{verdict}  {}  {description}", fixture.file),
            None => println!("{verdict}  {}", fixture.file),
        }
        for difference in &fixture.differences {
            println!("  {difference}");
        }
    }
    println!(
        "{} fixtures: {} passed, {} failed",
        report.passed + report.failed,
        report.passed,
        report.failed
    );
}
