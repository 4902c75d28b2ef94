//! `ferry policy check`: what a policy author needs to know before a cluster
//! sees the module: the contract it implements, what it exports, how it was
//! built, the limits it will run under and whether it fits them, proved by
//! one trial evaluation on an empty snapshot. The host's lowering details
//! only with `--verbose`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use ferry::contract::Snapshot;
use ferry::modules::upload::MAX_CONFIG_MAP_MODULE_BYTES;
use ferry::policy::{Engine, EngineConfig, Keeps, Limits, ModuleInfo, PolicyError};
use serde::Serialize;

use super::exit::{POLICY_FAILED, USAGE, fail};
use super::output::OutputArgs;
use super::policy::read_module;
use super::policy_format::{bytes, duration, millis, print_structured};
use super::policy_limits::LimitArgs;

/// What every contract's world exports.
const CONTRACT_EXPORTS: [&str; 1] = ["decide"];

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The module: a WebAssembly component built for wasm32-wasip2.
    #[arg(value_name = "MODULE.wasm")]
    module: PathBuf,
    /// Also show how Ferry lowers the snapshot into this module (its
    /// `keeps-input` promise) and every import.
    #[arg(short, long, env = "FERRY_VERBOSE")]
    verbose: bool,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    output: OutputArgs,
}

/// What `-o json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CheckReport {
    module: String,
    /// The world of the contract the module implements.
    contract: String,
    #[serde(flatten)]
    info: ModuleInfo,
    limits: LimitsReport,
    trial: Trial,
}

/// The limits the module will run under, and how it stands against them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LimitsReport {
    module_bytes: usize,
    fits_module_bytes: bool,
    config_map_bytes: usize,
    fits_config_map: bool,
    memory_bytes: u64,
    timeout_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    fuel: Option<u64>,
}

/// One evaluation on an empty snapshot: instantiation and `decide` under
/// the limits, which shows the module starts within them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Trial {
    /// `answered`, `refused` (the policy's own error) or the failure class.
    outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    elapsed_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_bytes: Option<u64>,
}

impl Trial {
    /// Whether the module fits its limits: it ran to an answer or a refusal.
    fn fits(&self) -> bool {
        matches!(self.outcome.as_str(), "answered" | "refused")
    }
}

pub(super) fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let bytes = match read_module(&args.module) {
        Ok(bytes) => bytes,
        Err(message) => return Ok(fail(USAGE, &message)),
    };
    let config = EngineConfig::default();
    let max_module_bytes = config.max_module_bytes;
    let engine = Engine::new(config).context("starting the policy engine")?;
    let name = args.module.display().to_string();
    let info = match engine.inspect(&bytes) {
        Ok(info) => info,
        Err(err) => return Ok(fail(POLICY_FAILED, &format!("{name}: Load: {err}"))),
    };
    let limits = args.limits.limits();
    let trial = trial(&engine, &name, &bytes, &limits);
    let report = CheckReport {
        module: name,
        contract: format!("ferry:policy/migration-policy@{}", info.contract.version()),
        limits: LimitsReport {
            module_bytes: max_module_bytes,
            fits_module_bytes: info.size <= max_module_bytes,
            config_map_bytes: MAX_CONFIG_MAP_MODULE_BYTES,
            fits_config_map: info.size <= MAX_CONFIG_MAP_MODULE_BYTES,
            memory_bytes: limits.memory_bytes,
            timeout_ms: millis(limits.timeout),
            fuel: limits.fuel,
        },
        info,
        trial,
    };
    if !print_structured(args.output.output, &report)? {
        print_table(&report, args.verbose);
    }
    Ok(if report.trial.fits() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(POLICY_FAILED)
    })
}

/// Runs the module once on a snapshot with no clusters and no workloads.
fn trial(engine: &Engine, name: &str, bytes: &[u8], limits: &Limits) -> Trial {
    let result = engine
        .load(name, bytes, None)
        .map_err(PolicyError::from)
        .and_then(|policy| engine.evaluate_blocking(&policy, &Snapshot::default(), limits));
    match result {
        Ok(evaluation) => Trial {
            outcome: "answered".to_owned(),
            message: None,
            elapsed_ms: Some(millis(evaluation.elapsed)),
            memory_bytes: Some(evaluation.memory_bytes),
        },
        Err(PolicyError::PolicyError(message)) => Trial {
            outcome: "refused".to_owned(),
            message: Some(message),
            elapsed_ms: None,
            memory_bytes: None,
        },
        Err(err) => Trial {
            outcome: err.class().to_owned(),
            message: Some(err.to_string()),
            elapsed_ms: None,
            memory_bytes: None,
        },
    }
}

fn print_table(report: &CheckReport, verbose: bool) {
    let info = &report.info;
    let limits = &report.limits;
    println!(
        "{}: implements {} ({})",
        report.module, report.contract, info.contract
    );
    let (contract, other): (Vec<&str>, Vec<&str>) = info
        .exports
        .iter()
        .map(String::as_str)
        .partition(|name| CONTRACT_EXPORTS.contains(name));
    println!("exports      {}", contract.join(", "));
    if !other.is_empty() {
        println!(
            "             and {}, outside the contract: Ferry never calls them",
            other.join(", ")
        );
    }
    let built = &info.built_with;
    match (&built.language, &built.toolchain) {
        (Some(language), Some(toolchain)) => println!("built with   {language} ({toolchain})"),
        (Some(language), None) => println!("built with   {language}"),
        _ => println!("built with   (not recorded in the module)"),
    }
    println!(
        "size         {} ({} bytes)",
        bytes(info.size as u64),
        info.size
    );
    println!("sha256       {}", info.sha256);
    println!("limits (an evaluation runs under these)");
    println!(
        "  module size  {}: {}",
        bytes(limits.module_bytes as u64),
        verdict(limits.fits_module_bytes)
    );
    println!(
        "  ConfigMap    {}: {}",
        bytes(limits.config_map_bytes as u64),
        if limits.fits_config_map {
            "fits: `ferry policy upload` can deliver it"
        } else {
            "too large: deliver it by https or OCI"
        }
    );
    println!("  memory       {}", bytes(limits.memory_bytes));
    println!(
        "  deadline     {}, instantiation included",
        duration(std::time::Duration::from_secs_f64(
            limits.timeout_ms / 1000.0
        ))
    );
    match limits.fuel {
        Some(fuel) => println!("  fuel         {fuel} units"),
        None => println!("  fuel         unlimited (the deadline alone)"),
    }
    let trial = &report.trial;
    match (trial.outcome.as_str(), trial.elapsed_ms, trial.memory_bytes) {
        ("answered", Some(ms), Some(memory)) => println!(
            "trial        answered an empty snapshot in {} with {} of linear memory",
            duration(std::time::Duration::from_secs_f64(ms / 1000.0)),
            bytes(memory)
        ),
        ("refused", ..) => println!(
            "trial        refused an empty snapshot ({}): it starts within the limits",
            trial.message.as_deref().unwrap_or_default()
        ),
        (class, ..) => println!(
            "trial        FAILED on an empty snapshot ({class}): {}",
            trial.message.as_deref().unwrap_or_default()
        ),
    }
    if verbose {
        println!("imports      {}", info.imports.join(", "));
        println!(
            "input        {}",
            match info.keeps_input {
                Keeps::Everything =>
                    "keeps-input 0.2.0: kept until the instance ends (strings and lists lowered in one block)",
                Keeps::Strings =>
                    "keeps-input 0.1.0: strings kept until the instance ends (lowered in one block)",
                Keeps::Nothing =>
                    "no keeps-input promise: lowered one string and one list at a time",
            }
        );
        for producer in &built.producers {
            let entry = format!("{} {}", producer.name, producer.version);
            println!("producer     {}: {}", producer.field, entry.trim_end());
        }
    }
}

fn verdict(fits: bool) -> &'static str {
    if fits { "fits" } else { "TOO LARGE" }
}
