//! `ferry policy`: try a module locally before any cluster sees it, and
//! upload it. The author's tools have files of their own: `policy_new`,
//! `policy_test`, `policy_bench`, `policy_check`; registries (push, pull,
//! sign, verify) have `policy_oci`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use ferry::contract::Snapshot;
use ferry::controller::{JournalEntry, read_journal};
use ferry::policy::{Engine, EngineConfig};

use super::exit::{POLICY_FAILED as EXIT_POLICY_FAILED, USAGE as EXIT_BAD_INPUT, fail};

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Scaffold a new policy in Rust, Python or JavaScript, with a fixture.
    New(super::policy_new::NewArgs),
    /// Compile a module, check that it implements the policy contract, and
    /// show the limits it will run under and whether it fits them.
    Check(super::policy_check::CheckArgs),
    /// Evaluate a module on a snapshot exactly as the operator would, and
    /// print its decisions, the rejected ones with reasons, and its logs.
    Eval(EvalArgs),
    /// Run a module on fixtures (snapshots with expected decisions) and
    /// show where its answers differ.
    Test(super::policy_test::TestArgs),
    /// Time a module on one snapshot: compilation, then repeated
    /// instantiation and evaluation.
    Bench(super::policy_bench::BenchArgs),
    /// Check a module, store it in the cluster and point a MigrationPolicy at it.
    Upload(UploadArgs),
    /// Push a module to an OCI registry as a wasm artifact; prints its digest.
    Push(super::policy_oci::PushArgs),
    /// Pull a module from an OCI registry, checked against its digest.
    Pull(super::policy_oci::PullArgs),
    /// Sign a module in a registry, cosign-compatible (key-based).
    Sign(super::policy_oci::SignArgs),
    /// Verify a module's signature in a registry with a public key.
    Verify(super::policy_oci::VerifyArgs),
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
    #[command(flatten)]
    limits: super::policy_limits::LimitArgs,
}

pub async fn run(command: PolicyCommand) -> anyhow::Result<ExitCode> {
    match command {
        PolicyCommand::New(args) => super::policy_new::new(args),
        PolicyCommand::Check(args) => super::policy_check::check(args),
        PolicyCommand::Test(args) => super::policy_test::test(args),
        PolicyCommand::Bench(args) => super::policy_bench::bench(args),
        PolicyCommand::Eval(args) => eval(args),
        PolicyCommand::Upload(args) => upload(args).await,
        PolicyCommand::Push(args) => super::policy_oci::push(args).await,
        PolicyCommand::Pull(args) => super::policy_oci::pull(args).await,
        PolicyCommand::Sign(args) => super::policy_oci::sign(args).await,
        PolicyCommand::Verify(args) => super::policy_oci::verify(args).await,
    }
}

pub(super) fn read_module(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|err| format!("cannot read module {}: {err}", path.display()))
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
    let limits = args.limits.limits();

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
pub(super) fn read_input(path: &Path) -> Result<(Snapshot, Option<JournalEntry>), String> {
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
