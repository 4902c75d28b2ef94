//! `ferry policy check|eval`: try a module locally before any cluster sees it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use ferry::contract::Snapshot;
use ferry::controller::{JournalEntry, read_journal};
use ferry::policy::{Engine, EngineConfig, Keeps, Limits};

use super::exit::{POLICY_FAILED as EXIT_POLICY_FAILED, USAGE as EXIT_BAD_INPUT, fail};

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Compile a module and check that it implements the policy contract.
    Check(CheckArgs),
    /// Evaluate a module on a snapshot exactly as the operator would, and
    /// print its decisions, the rejected ones with reasons, and its logs.
    Eval(EvalArgs),
    /// Check a module, store it in the cluster and point a MigrationPolicy at it.
    Upload(UploadArgs),
}

#[derive(Debug, Args)]
pub struct UploadArgs {
    /// The module: a WebAssembly component built for wasm32-wasip2.
    #[arg(value_name = "MODULE.wasm")]
    module: PathBuf,
    /// Name of the MigrationPolicy to create or update.
    #[arg(long, env = "FERRY_NAME")]
    name: String,
    /// Namespace of the policy; the kubeconfig context's when absent.
    #[arg(long, short = 'n', env = "FERRY_NAMESPACE")]
    namespace: Option<String>,
    /// Whether accepted decisions are carried out; an existing policy keeps
    /// its mode when absent, a new one starts in DryRun.
    #[arg(long, env = "FERRY_MODE", value_enum)]
    mode: Option<Mode>,
    /// Thresholds as YAML or JSON (the `spec.thresholds` object).
    #[arg(long, env = "FERRY_THRESHOLDS", value_name = "FILE")]
    thresholds: Option<PathBuf>,
    /// Parameters handed to the module, a JSON object.
    #[arg(long, env = "FERRY_PARAMETERS", value_name = "JSON")]
    parameters: Option<String>,
    #[command(flatten)]
    kube: super::KubeArgs,
    #[command(flatten)]
    output: super::output::OutputArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    #[value(name = "DryRun")]
    DryRun,
    #[value(name = "Enforce")]
    Enforce,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The module: a WebAssembly component built for wasm32-wasip2.
    #[arg(value_name = "MODULE.wasm")]
    module: PathBuf,
    /// Output format.
    #[arg(short = 'o', long, env = "FERRY_OUTPUT", value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Output {
    #[value(alias = "table")]
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The module: a WebAssembly component built for wasm32-wasip2.
    #[arg(value_name = "MODULE.wasm")]
    module: PathBuf,
    /// The snapshot, as policy-contract JSON (what `ferry snapshot` prints),
    /// or a decision-journal entry to replay; `-` reads standard input.
    #[arg(long, env = "FERRY_INPUT", value_name = "SNAPSHOT.json")]
    input: PathBuf,
    /// Replaces the snapshot's `parameters` with this JSON.
    #[arg(long, env = "FERRY_PARAMETERS", value_name = "JSON")]
    parameters: Option<String>,
    /// Deadline of the evaluation, for example `500ms`, `2s`.
    #[arg(long, env = "FERRY_TIMEOUT", value_name = "DURATION", value_parser = super::duration::parse_positive, default_value = "1s")]
    timeout: Duration,
    /// Cap on the module's linear memory, for example `64Mi` or `1048576`.
    #[arg(long, env = "FERRY_MEMORY", value_name = "BYTES", value_parser = ferry::units::quantity::whole_bytes, default_value = "64Mi")]
    memory: u64,
    /// Fuel budget for a deterministic cut-off; unlimited when absent.
    #[arg(long, env = "FERRY_FUEL", value_name = "UNITS")]
    fuel: Option<u64>,
}

pub async fn run(command: PolicyCommand) -> anyhow::Result<ExitCode> {
    match command {
        PolicyCommand::Check(args) => check(args),
        PolicyCommand::Eval(args) => eval(args),
        PolicyCommand::Upload(args) => upload(args).await,
    }
}

fn read_module(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|err| format!("cannot read module {}: {err}", path.display()))
}

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let bytes = match read_module(&args.module) {
        Ok(bytes) => bytes,
        Err(message) => return Ok(fail(EXIT_BAD_INPUT, &message)),
    };
    let engine = Engine::new(EngineConfig::default()).context("starting the policy engine")?;
    let info = match engine.inspect(&bytes) {
        Ok(info) => info,
        Err(err) => {
            return Ok(fail(
                EXIT_POLICY_FAILED,
                &format!("{}: Load: {err}", args.module.display()),
            ));
        }
    };
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&info)?),
        Output::Text => {
            println!(
                "{}: implements ferry:policy/migration-policy@0.1.0",
                args.module.display()
            );
            println!("size:    {} bytes", info.size);
            println!("sha256:  {}", info.sha256);
            println!("imports: {}", info.imports.join(", "));
            println!("exports: {}", info.exports.join(", "));
            println!(
                "input:   {}",
                match info.keeps_input {
                    Keeps::Everything =>
                        "kept until the instance ends (strings and lists lowered in one block)",
                    Keeps::Strings => "strings kept until the instance ends (lowered in one block)",
                    Keeps::Nothing => "lowered one string and one list at a time",
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn eval(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let bytes = match read_module(&args.module) {
        Ok(bytes) => bytes,
        Err(message) => return Ok(fail(EXIT_BAD_INPUT, &message)),
    };
    let (mut snapshot, journal) = match read_input(&args.input) {
        Ok(input) => input,
        Err(message) => return Ok(fail(EXIT_BAD_INPUT, &message)),
    };
    if let Some(entry) = &journal {
        let digest = ferry::policy::sha256_hex(&bytes);
        if digest != entry.module_sha256 {
            return Ok(fail(
                EXIT_BAD_INPUT,
                &format!(
                    "the journal entry was answered by module {}, not by {} ({digest})",
                    entry.module_sha256,
                    args.module.display()
                ),
            ));
        }
    }
    if let Some(parameters) = args.parameters {
        if let Err(err) = serde_json::from_str::<serde_json::Value>(&parameters) {
            return Ok(fail(
                EXIT_BAD_INPUT,
                &format!("--parameters is not JSON: {err}"),
            ));
        }
        snapshot.parameters = parameters;
    }
    let limits = Limits {
        timeout: args.timeout,
        memory_bytes: args.memory,
        fuel: args.fuel,
        ..Limits::default()
    };

    let engine = Engine::new(EngineConfig::default()).context("starting the policy engine")?;
    let name = args.module.display().to_string();
    let policy = match engine.load(&name, &bytes, None) {
        Ok(policy) => policy,
        Err(err) => return Ok(fail(EXIT_POLICY_FAILED, &format!("Load: {err}"))),
    };
    match engine.evaluate_blocking(&policy, &snapshot, &limits) {
        Ok(evaluation) => {
            let mut output = serde_json::to_value(&evaluation)?;
            if let Some(entry) = &journal {
                // A replay says whether the module answers as it did then.
                output["replay"] = serde_json::json!({
                    "policy": entry.policy,
                    "sameDecisions": *evaluation.decisions == *entry.decisions,
                });
            }
            println!("{}", serde_json::to_string_pretty(&output)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => Ok(fail(EXIT_POLICY_FAILED, &format!("{}: {err}", err.class()))),
    }
}

async fn upload(args: UploadArgs) -> anyhow::Result<ExitCode> {
    let bytes = match read_module(&args.module) {
        Ok(bytes) => bytes,
        Err(message) => return Ok(fail(EXIT_BAD_INPUT, &message)),
    };
    let thresholds = match &args.thresholds {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            match serde_saphyr::from_str::<ferry::crd::ThresholdsSpec>(&text) {
                Ok(thresholds) => Some(thresholds),
                Err(err) => {
                    return Ok(fail(
                        EXIT_BAD_INPUT,
                        &format!("{} is not valid thresholds: {err}", path.display()),
                    ));
                }
            }
        }
    };
    let parameters = match &args.parameters {
        None => None,
        Some(text) => {
            match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text) {
                Ok(map) => Some(map),
                Err(err) => {
                    return Ok(fail(
                        EXIT_BAD_INPUT,
                        &format!("--parameters is not a JSON object: {err}"),
                    ));
                }
            }
        }
    };
    let engine = Engine::new(EngineConfig::default()).context("starting the policy engine")?;
    if let Err(err) = engine.inspect(&bytes) {
        return Ok(fail(
            EXIT_POLICY_FAILED,
            &format!("{}: Load: {err}", args.module.display()),
        ));
    }
    let (client, default_namespace) = args.kube.client().await?;
    let request = ferry::modules::upload::UploadRequest {
        namespace: args.namespace.unwrap_or(default_namespace),
        name: args.name,
        module: bytes,
        mode: args.mode.map(|mode| match mode {
            Mode::DryRun => ferry::crd::PolicyMode::DryRun,
            Mode::Enforce => ferry::crd::PolicyMode::Enforce,
        }),
        thresholds,
        parameters,
    };
    match ferry::modules::upload::upload(&client, request).await {
        Ok(report) => {
            super::upload_output::print(&report, args.output.output)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(err @ ferry::modules::upload::UploadError::TooLargeForConfigMap { .. }) => {
            Ok(fail(EXIT_BAD_INPUT, &err.to_string()))
        }
        Err(err) => Err(err.into()),
    }
}

/// Reads a snapshot, or a journal entry holding one, naming the JSON path
/// of the first problem.
fn read_input(path: &Path) -> Result<(Snapshot, Option<JournalEntry>), String> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|err| format!("cannot read standard input: {err}"))?
    } else {
        std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read {}: {err}", path.display()))?
    };
    let is_journal = serde_json::from_str::<serde_json::Value>(&text)
        .is_ok_and(|value| value.get("snapshot").is_some() && value.get("moduleSha256").is_some());
    if is_journal {
        let entry = read_journal(&text)
            .map_err(|err| format!("{} is not a valid journal entry: {err}", path.display()))?;
        return Ok((entry.snapshot.clone(), Some(entry)));
    }
    let mut json = serde_json::Deserializer::from_str(&text);
    let snapshot = serde_path_to_error::deserialize(&mut json).map_err(|err| {
        let at = err.path().to_string();
        format!(
            "{} is not a valid snapshot: at {}: {}",
            path.display(),
            if at == "." {
                "the top level".to_owned()
            } else {
                at
            },
            err.inner()
        )
    })?;
    Ok((snapshot, None))
}
