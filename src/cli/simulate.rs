//! `ferry simulate`: what policies would have done, offline.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use ferry::metrics::{PrometheusConfig, PrometheusEndpoint};
use ferry::policy::{Engine, EngineConfig, Limits};
use ferry::simulate::replay::{self, Template, Window};
use ferry::simulate::{self, Control, NamedPolicy, Scenario};
use jiff::Timestamp;

use super::exit::{POLICY_FAILED as EXIT_POLICY_FAILED, USAGE as EXIT_BAD_INPUT};

/// Step of a replay without `--step`.
const DEFAULT_STEP: Duration = Duration::from_secs(300);
/// The cluster of a per-cluster Prometheus without `--cluster`.
const DEFAULT_CLUSTER: &str = "local";

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The scenario: clusters, workloads, prices and capacity over time (YAML).
    #[arg(long, env = "FERRY_SCENARIO", value_name = "FILE.yaml")]
    scenario: Option<PathBuf>,
    /// A policy module to simulate; repeat for several (one column each).
    #[arg(
        long = "policy",
        env = "FERRY_POLICY",
        value_name = "MODULE.wasm",
        required = true,
        value_delimiter = ','
    )]
    policies: Vec<PathBuf>,
    /// Write the self-contained HTML report here.
    #[arg(long, env = "FERRY_REPORT", value_name = "FILE.html")]
    report: Option<PathBuf>,
    /// Write the results as JSON here (`-` for stdout).
    #[arg(long, env = "FERRY_JSON", value_name = "FILE.json")]
    json: Option<PathBuf>,
    /// Seed of the scenario's random draws (spikes, failures); overrides the file's.
    #[arg(long, env = "FERRY_SEED")]
    seed: Option<u64>,
    /// Fuel per evaluation, for a deterministic budget; none by default.
    #[arg(long, env = "FERRY_FUEL")]
    fuel: Option<u64>,
    /// Wall-clock limit of one evaluation, for example `500ms` or `5s`.
    #[arg(long, env = "FERRY_TIMEOUT", value_name = "DURATION", default_value = "5s", value_parser = super::duration::parse_positive)]
    timeout: Duration,
    /// Replay recorded history from this Prometheus instead of a scenario's
    /// clusters and workloads; `--scenario` then only gives thresholds,
    /// migration model and parameters.
    #[arg(
        long,
        env = "FERRY_PROMETHEUS",
        value_name = "URL",
        requires_all = ["from", "to"]
    )]
    prometheus: Option<String>,
    /// Start of the replayed history: RFC 3339 or Unix seconds.
    #[arg(
        long,
        env = "FERRY_FROM",
        value_name = "TIME",
        requires = "prometheus",
        value_parser = replay::parse_time
    )]
    from: Option<Timestamp>,
    /// End of the replayed history: RFC 3339 or Unix seconds.
    #[arg(
        long,
        env = "FERRY_TO",
        value_name = "TIME",
        requires = "prometheus",
        value_parser = replay::parse_time
    )]
    to: Option<Timestamp>,
    /// Step of the replay, whole seconds (`60s`, `5m`, or seconds); 5m when absent.
    #[arg(
        long,
        env = "FERRY_STEP",
        value_name = "DURATION",
        requires = "prometheus",
        value_parser = replay::parse_step
    )]
    step: Option<Duration>,
    /// Label telling clusters apart in a shared Prometheus; the clusters are
    /// its values on `node_cpu_hourly_cost`. Without it the Prometheus holds
    /// one cluster, named by `--cluster`.
    #[arg(
        long = "prometheus-cluster-label",
        env = "FERRY_PROMETHEUS_CLUSTER_LABEL",
        value_name = "LABEL",
        requires = "prometheus"
    )]
    prometheus_cluster_label: Option<String>,
    /// Name of the one cluster of a per-cluster Prometheus; `local` when absent.
    #[arg(
        long,
        env = "FERRY_CLUSTER",
        value_name = "NAME",
        requires = "prometheus",
        conflicts_with = "prometheus_cluster_label"
    )]
    cluster: Option<String>,
    /// Bearer token sent to Prometheus.
    #[arg(
        long,
        env = "FERRY_PROMETHEUS_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true,
        requires = "prometheus"
    )]
    prometheus_token: Option<String>,
    /// CA bundle (PEM) to trust for Prometheus instead of the system's.
    #[arg(
        long,
        env = "FERRY_PROMETHEUS_CA",
        value_name = "PEM",
        requires = "prometheus"
    )]
    prometheus_ca: Option<PathBuf>,
    /// Timeout of one Prometheus request attempt, for example `60s`.
    #[arg(
        long,
        env = "FERRY_PROMETHEUS_TIMEOUT",
        value_name = "DURATION",
        default_value = "60s",
        value_parser = super::duration::parse_positive
    )]
    prometheus_timeout: Duration,
}

pub async fn run(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let scenario = if args.prometheus.is_some() {
        match replayed(&args).await {
            Ok(s) => s,
            Err(err) if err.is_prometheus() => {
                return Err(anyhow::Error::new(err).context("cannot replay the history"));
            }
            Err(err) => {
                eprintln!("error: {:#}", anyhow::Error::new(err));
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            }
        }
    } else {
        let Some(path) = args.scenario.clone() else {
            eprintln!("error: --scenario is required (or --prometheus with --from and --to)");
            return Ok(ExitCode::from(EXIT_BAD_INPUT));
        };
        match simulate::load(&path, args.seed) {
            Ok(s) => s,
            Err(err) => {
                eprintln!("error: {err}");
                return Ok(ExitCode::from(EXIT_BAD_INPUT));
            }
        }
    };

    let engine = Engine::new(EngineConfig::default()).context("cannot start the policy engine")?;
    let mut policies = Vec::new();
    for file in &args.policies {
        let bytes = match std::fs::read(file) {
            Ok(bytes) => bytes,
            Err(err) => {
                let message = format!("cannot read module {}: {err}", file.display());
                return Ok(super::exit::fail(EXIT_BAD_INPUT, &message));
            }
        };
        let name = unique_name(file, &policies);
        let policy = match engine.load(&name, &bytes, None) {
            Ok(policy) => policy,
            // The same status as `ferry policy check` gives this module.
            Err(err) => {
                return Ok(super::exit::fail(
                    EXIT_POLICY_FAILED,
                    &format!("{}: Load: {err}", file.display()),
                ));
            }
        };
        policies.push(NamedPolicy { name, policy });
    }
    let limits = Limits {
        fuel: args.fuel,
        timeout: args.timeout,
        ..Limits::default()
    };

    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.store(true, Ordering::Relaxed);
            }
        });
    }
    let total = (scenario.steps * policies.len()) as u64;
    let bar = std::io::stderr().is_terminal().then(|| {
        let (progress, stop) = (progress.clone(), stop.clone());
        let done = Arc::new(AtomicBool::new(false));
        let finished = done.clone();
        let handle = std::thread::spawn(move || {
            while !finished.load(Ordering::Relaxed) {
                draw_bar(
                    progress.load(Ordering::Relaxed),
                    total,
                    stop.load(Ordering::Relaxed),
                );
                std::thread::sleep(Duration::from_millis(200));
            }
            eprint!("\r\x1b[2K");
        });
        (done, handle)
    });

    let started = Instant::now();
    let report = {
        let (stop, progress) = (stop.clone(), progress.clone());
        tokio::task::spawn_blocking(move || {
            let control = Control {
                stop: &stop,
                progress: &progress,
            };
            simulate::simulate(&scenario, &engine, &policies, &limits, &control)
        })
        .await
        .context("the simulation failed")?
    };
    let elapsed = started.elapsed();
    if let Some((done, handle)) = bar {
        done.store(true, Ordering::Relaxed);
        let _ = handle.join();
    }

    print!("{}", report.summary_table());
    eprintln!(
        "simulated {} steps × {} policies in {:.2}s",
        report.steps_simulated,
        report.policies.len(),
        elapsed.as_secs_f64()
    );
    if let Some(json) = &args.json {
        write_out(json, &report.to_json())?;
    }
    if let Some(html) = &args.report {
        write_out(html, &simulate::html::render(&report))?;
        eprintln!("report written to {}", html.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The scenario replayed from `--prometheus`, with `--scenario` as template.
async fn replayed(args: &SimulateArgs) -> Result<Scenario, replay::Error> {
    let (Some(url), Some(from), Some(to)) = (&args.prometheus, args.from, args.to) else {
        return Err(replay::Error::Window(
            "--prometheus needs --from and --to".to_owned(),
        ));
    };
    let window = Window::new(from, to, args.step.unwrap_or(DEFAULT_STEP))?;
    let template = match &args.scenario {
        Some(path) => Template::load(path, args.seed)?,
        None => Template::defaults(args.seed),
    };
    let ca_pem = match &args.prometheus_ca {
        Some(path) => Some(std::fs::read(path).map_err(|source| {
            replay::Error::Template(simulate::Error::Read {
                path: path.clone(),
                source,
            })
        })?),
        None => None,
    };
    let endpoint = PrometheusEndpoint {
        url: url.clone(),
        bearer_token: args.prometheus_token.clone(),
        ca_pem,
        cluster_label: args.prometheus_cluster_label.clone(),
        allow_token_over_plain_http: false,
    };
    let config = PrometheusConfig {
        timeout: args.prometheus_timeout,
        ..PrometheusConfig::default()
    };
    let cluster = args.cluster.as_deref().unwrap_or(DEFAULT_CLUSTER);
    let scenario = replay::replay(&endpoint, cluster, &config, &window, &template).await?;
    eprintln!(
        "replaying {} clusters and {} workloads over {} steps of {}s from {}",
        scenario.clusters.len(),
        scenario.workloads.len(),
        scenario.steps,
        window.step().as_secs(),
        window.start()
    );
    Ok(scenario)
}

fn unique_name(file: &Path, taken: &[NamedPolicy]) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().replace('_', "-"))
        .unwrap_or_else(|| "policy".to_owned());
    let mut name = stem.clone();
    let mut n = 2;
    while taken.iter().any(|p| p.name == name) {
        name = format!("{stem}-{n}");
        n += 1;
    }
    name
}

fn write_out(path: &Path, text: &str) -> anyhow::Result<()> {
    if path == Path::new("-") {
        std::io::stdout().write_all(text.as_bytes())?;
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn draw_bar(done: u64, total: u64, stopping: bool) {
    let fraction = if total == 0 {
        1.0
    } else {
        done as f64 / total as f64
    };
    let filled = (fraction * 30.0) as usize;
    eprint!(
        "\r[{}{}] {:5.1}%{}",
        "#".repeat(filled),
        " ".repeat(30 - filled.min(30)),
        fraction * 100.0,
        if stopping { " stopping…" } else { "" }
    );
}
