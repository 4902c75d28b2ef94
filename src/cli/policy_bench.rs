//! `ferry policy bench`: how long a module takes on one snapshot. It is
//! compiled once (timed), answers once untimed, then runs again and again,
//! each run a fresh instance as the operator makes one: instantiation,
//! `decide` and the validation of the answer.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use ferry::contract::Snapshot;
use ferry::policy::{Engine, EngineConfig, Limits, Policy, PolicyError};
use serde::Serialize;

use super::exit::{POLICY_FAILED, USAGE, fail};
use super::output::OutputArgs;
use super::policy::{read_input, read_module};
use super::policy_format::{bytes, duration, millis, print_structured};
use super::policy_limits::LimitArgs;

/// Most timed runs kept, whatever the duration asks: a bound on memory.
const MAX_ITERATIONS: u64 = 1_000_000;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The module: a WebAssembly component built for wasm32-wasip2.
    #[arg(value_name = "MODULE.wasm")]
    module: PathBuf,
    /// The snapshot, as policy-contract JSON (what `ferry snapshot` prints),
    /// or a decision-journal entry; `-` reads standard input.
    #[arg(value_name = "SNAPSHOT.json")]
    snapshot: PathBuf,
    /// Timed runs to make.
    #[arg(long, env = "FERRY_ITERATIONS", value_name = "N", conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..=MAX_ITERATIONS))]
    iterations: Option<u64>,
    /// Time to spend on timed runs, for example `5s`; the default when
    /// `--iterations` is absent.
    #[arg(long, env = "FERRY_DURATION", value_name = "DURATION", value_parser = super::duration::parse_positive, default_value = "5s")]
    duration: Duration,
    /// Replaces the snapshot's `parameters` with this JSON.
    #[arg(long, env = "FERRY_PARAMETERS", value_name = "JSON")]
    parameters: Option<String>,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// What `-o json` prints; times in milliseconds.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct BenchReport {
    module: String,
    sha256: String,
    module_bytes: usize,
    workloads: usize,
    compile_ms: f64,
    iterations: usize,
    min_ms: f64,
    median_ms: f64,
    p90_ms: f64,
    max_ms: f64,
    mean_ms: f64,
    decisions: usize,
    memory_bytes: u64,
}

pub(super) fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let module = match read_module(&args.module) {
        Ok(bytes) => bytes,
        Err(message) => return Ok(fail(USAGE, &message)),
    };
    let (mut snapshot, _) = match read_input(&args.snapshot) {
        Ok(input) => input,
        Err(message) => return Ok(fail(USAGE, &message)),
    };
    if let Some(parameters) = args.parameters {
        if let Err(err) = serde_json::from_str::<serde_json::Value>(&parameters) {
            return Ok(fail(USAGE, &format!("--parameters is not JSON: {err}")));
        }
        snapshot.parameters = parameters;
    }
    let name = args.module.display().to_string();
    let engine = Engine::new(EngineConfig::default()).context("starting the policy engine")?;
    let started = Instant::now();
    let policy = match engine.load(&name, &module, None) {
        Ok(policy) => policy,
        Err(err) => return Ok(fail(POLICY_FAILED, &format!("{name}: Load: {err}"))),
    };
    let compile = started.elapsed();
    let plan = Plan {
        iterations: args.iterations,
        duration: args.duration,
    };
    let limits = args.limits.limits();
    // On a thread of its own, outside the async runtime, so that each run
    // is timed on the calling thread rather than handed to a new one.
    let runs = std::thread::scope(|scope| {
        scope
            .spawn(|| run(&engine, &policy, &snapshot, &limits, &plan))
            .join()
    })
    .map_err(|_| anyhow::anyhow!("the benchmark thread panicked"))?;
    let (times, decisions, memory_bytes) = match runs {
        Ok(runs) => runs,
        Err(err) => return Ok(fail(POLICY_FAILED, &format!("{}: {err}", err.class()))),
    };
    let report = summarise(
        &name,
        &policy,
        &snapshot,
        compile,
        times,
        decisions,
        memory_bytes,
    );
    if !print_structured(args.output.output, &report)? {
        print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// How many timed runs: a count, or as many as fit a duration.
struct Plan {
    iterations: Option<u64>,
    duration: Duration,
}

/// One untimed run, then the timed ones. Returns their times, the
/// decisions of the last answer and the most linear memory held.
fn run(
    engine: &Engine,
    policy: &Policy,
    snapshot: &Snapshot,
    limits: &Limits,
    plan: &Plan,
) -> Result<(Vec<Duration>, usize, u64), PolicyError> {
    let first = engine.evaluate_blocking(policy, snapshot, limits)?;
    let mut decisions = first.decisions.len();
    let mut memory = first.memory_bytes;
    let mut times = Vec::new();
    let started = Instant::now();
    loop {
        let done = match plan.iterations {
            Some(count) => times.len() as u64 >= count,
            None => {
                !times.is_empty()
                    && (started.elapsed() >= plan.duration || times.len() as u64 >= MAX_ITERATIONS)
            }
        };
        if done {
            break;
        }
        let run_started = Instant::now();
        let evaluation = engine.evaluate_blocking(policy, snapshot, limits)?;
        times.push(run_started.elapsed());
        decisions = evaluation.decisions.len();
        memory = memory.max(evaluation.memory_bytes);
    }
    Ok((times, decisions, memory))
}

fn summarise(
    name: &str,
    policy: &Policy,
    snapshot: &Snapshot,
    compile: Duration,
    mut times: Vec<Duration>,
    decisions: usize,
    memory_bytes: u64,
) -> BenchReport {
    times.sort();
    let total: Duration = times.iter().sum();
    let count = times.len().max(1);
    BenchReport {
        module: name.to_owned(),
        sha256: policy.digest().to_owned(),
        module_bytes: policy.size(),
        workloads: snapshot.workloads.len(),
        compile_ms: millis(compile),
        iterations: times.len(),
        min_ms: millis(percentile(&times, 0.0)),
        median_ms: millis(percentile(&times, 0.5)),
        p90_ms: millis(percentile(&times, 0.9)),
        max_ms: millis(percentile(&times, 1.0)),
        mean_ms: millis(total / u32::try_from(count).unwrap_or(u32::MAX)),
        decisions,
        memory_bytes,
    }
}

/// The nearest-rank percentile `q` (0 to 1) of sorted `times`.
fn percentile(times: &[Duration], q: f64) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * times.len() as f64).ceil() as usize;
    times[rank.clamp(1, times.len()) - 1]
}

fn print_table(report: &BenchReport) {
    let ms = |value: f64| duration(Duration::from_secs_f64(value / 1000.0));
    println!("module       {}", report.module);
    println!("size         {}", bytes(report.module_bytes as u64));
    println!("sha256       {}", report.sha256);
    println!("compile      {} (once per module)", ms(report.compile_ms));
    println!(
        "snapshot     {} workloads, {} decisions",
        report.workloads, report.decisions
    );
    println!(
        "evaluate     {} runs, each instantiate + decide + validate",
        report.iterations
    );
    println!("  min        {}", ms(report.min_ms));
    println!("  median     {}", ms(report.median_ms));
    println!("  p90        {}", ms(report.p90_ms));
    println!("  max        {}", ms(report.max_ms));
    println!("  mean       {}", ms(report.mean_ms));
    println!(
        "memory       {} of linear memory at most",
        bytes(report.memory_bytes)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let times: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        assert_eq!(percentile(&times, 0.0), Duration::from_millis(1));
        assert_eq!(percentile(&times, 0.5), Duration::from_millis(5));
        assert_eq!(percentile(&times, 0.9), Duration::from_millis(9));
        assert_eq!(percentile(&times, 1.0), Duration::from_millis(10));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }
}
