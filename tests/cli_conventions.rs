//! The conventions every `ferry` command shares, checked on the real binary:
//! one duration grammar, `-o`, exit codes, errors printed once with their
//! causes, preconditions checked before anything is written, the logging
//! filter, `completion` and `version`.

mod support;
use support::cluster as support_cluster;
use support::modules::module_path;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ferry::crd::{MigrationPolicy, validate_policy};
use ferry::modules::upload::MODULES_CONFIG_MAP;
use ferry::sandbox::{Sandbox, SandboxConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};

fn ferry() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
    for variable in ["FERRY_LOG", "FERRY_LOG_LEVEL", "RUST_LOG", "FERRY_OUTPUT"] {
        command.env_remove(variable);
    }
    command
}

fn run(command: &mut Command) -> Output {
    command.output().expect("ferry runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/simulate/price_step.yaml")
}

/// An address on 127.0.0.1 where nothing listens.
fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// Each line after the first is a cause the line before does not contain.
fn assert_printed_once(stderr: &str) {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("error: ")).count(),
        1,
        "{stderr}"
    );
    for pair in lines.windows(2) {
        let cause = pair[1].trim_start().trim_start_matches("caused by: ");
        assert!(!pair[0].contains(cause), "repeated cause:\n{stderr}");
    }
    assert!(
        !stderr.contains(" { ") && !stderr.contains("ListMeta"),
        "{stderr}"
    );
}

#[test]
fn duration_flags_take_days_and_refuse_bare_numbers_with_a_hint() {
    let policy = module_path("cheapest_cluster");
    let out = run(ferry()
        .args(["simulate", "--timeout", "1d", "--scenario"])
        .arg(scenario())
        .arg("--policy")
        .arg(&policy));
    assert!(out.status.success(), "{}", text(&out.stderr));

    for (args, flag) in [
        (vec!["simulate", "--timeout", "5000"], "--timeout"),
        (
            vec![
                "snapshot",
                "--prometheus",
                "http://127.0.0.1:9",
                "--cluster",
                "a",
                "--prometheus-timeout",
                "10",
            ],
            "--prometheus-timeout",
        ),
        (
            vec!["sandbox", "serve", "--token-ttl", "86400"],
            "--token-ttl",
        ),
    ] {
        let out = run(ferry().args(&args));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("\"1d\""),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_module_that_does_not_load_exits_3_in_check_and_in_simulate() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.wasm");
    std::fs::write(&bad, b"\0asm not really").unwrap();
    let check = run(ferry().args(["policy", "check"]).arg(&bad));
    let simulate = run(ferry()
        .arg("simulate")
        .arg("--scenario")
        .arg(scenario())
        .arg("--policy")
        .arg(&bad));
    assert_eq!(check.status.code(), Some(3), "{}", text(&check.stderr));
    assert_eq!(
        simulate.status.code(),
        Some(3),
        "{}",
        text(&simulate.stderr)
    );
    assert_printed_once(&text(&simulate.stderr));
    // A usage error is 2, whatever the command.
    let usage = run(ferry().args(["snapshot", "--cluster", "a"]));
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage.stderr));
}

#[test]
fn help_names_the_exit_codes() {
    for args in [
        vec!["--help"],
        vec!["policy", "upload", "--help"],
        vec!["simulate", "--help"],
    ] {
        let out = run(ferry().args(&args));
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("Exit codes:") && stdout.contains("3  policy failure"),
            "{args:?}: {stdout}"
        );
    }
}

#[test]
fn version_prints_build_info_as_json_and_yaml() {
    let out = run(ferry().args(["version", "-o", "json"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        info["rustc"].as_str().unwrap().starts_with("rustc "),
        "{info}"
    );
    assert!(!info["target"].as_str().unwrap().is_empty(), "{info}");
    assert!(info.get("gitCommit").is_some(), "{info}");

    let out = run(ferry().args(["version", "--output", "yaml"]));
    let yaml: serde_json::Value = serde_saphyr::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(yaml["version"], env!("CARGO_PKG_VERSION"));

    let out = run(ferry().arg("version"));
    assert!(text(&out.stdout).starts_with(&format!("ferry {}", env!("CARGO_PKG_VERSION"))));
}

#[test]
fn completion_scripts_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(ferry().args(["completion", shell]));
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in ["snapshot", "simulate", "ferry-namespace", "output"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
    }
    let out = run(ferry().args(["completion", "tcsh"]));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn snapshot_with_prometheus_unreachable_prints_the_cause_and_no_snapshot() {
    let out = run(ferry().args([
        "snapshot",
        "--prometheus",
        &closed_port_url(),
        "--cluster",
        "local",
    ]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(
        stderr.to_lowercase().contains("connection refused"),
        "{stderr}"
    );
    assert_printed_once(&stderr);
}

#[tokio::test]
async fn a_failed_read_says_its_root_cause_in_one_line() {
    use ferry::metrics::{self, PrometheusConfig, PrometheusEndpoint, PrometheusSource};
    let endpoint = PrometheusEndpoint {
        url: closed_port_url(),
        bearer_token: None,
        ca_pem: None,
        cluster_label: None,
        allow_token_over_plain_http: false,
    };
    let source = PrometheusSource::new(
        PrometheusConfig::default(),
        [("local".to_owned(), endpoint)],
    )
    .unwrap();
    let names = ["local".to_owned()];
    let reading = metrics::read(&source, &names, None, None, 1).await;
    let err = reading.clusters["local"]
        .as_ref()
        .expect_err("nothing listens");
    let line = err.with_root_cause();
    assert!(line.contains("failed after"), "{line}");
    assert!(line.to_lowercase().contains("connection refused"), "{line}");
}

#[test]
fn log_level_debug_is_ferrys_and_rust_log_works_too_without_colour() {
    let url = closed_port_url();
    let snapshot = [
        "snapshot",
        "--prometheus",
        url.as_str(),
        "--cluster",
        "local",
    ];
    let ferry_debug = "ferry::metrics::prometheus::client";

    let out = run(ferry().args(snapshot).args(["--log-level", "debug"]));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(ferry_debug), "{stderr}");
    assert!(
        !stderr.contains("hyper_util") && !stderr.contains("reqwest::connect"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "colour on a pipe: {stderr:?}");

    let out = run(ferry().args(snapshot).env("RUST_LOG", "ferry=debug"));
    assert!(
        text(&out.stderr).contains(ferry_debug),
        "{}",
        text(&out.stderr)
    );

    let out = run(ferry().args(snapshot).env("FERRY_LOG_LEVEL", "debug"));
    assert!(
        text(&out.stderr).contains(ferry_debug),
        "{}",
        text(&out.stderr)
    );

    let out = run(ferry().args(snapshot));
    assert!(
        !text(&out.stderr).contains(ferry_debug),
        "{}",
        text(&out.stderr)
    );

    let out = run(ferry().args(snapshot).args(["--log-level", "ferry=[bad"]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

async fn bare_sandbox(name: &str) -> (Sandbox, kube::Client, tempfile::TempDir, PathBuf) {
    let sandbox = Sandbox::start(SandboxConfig::new(name)).await.unwrap();
    let client = support_cluster::client_for_kubeconfig(&sandbox.kubeconfig_yaml()).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sandbox.write_kubeconfig(&kubeconfig).unwrap();
    (sandbox, client, dir, kubeconfig)
}

fn upload(kubeconfig: &Path, namespace: &str, extra: &[&str]) -> Output {
    run(ferry()
        .args(["policy", "upload"])
        .arg(module_path("cheapest_cluster"))
        .args(["--name", "cost", "-n", namespace, "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra))
}

async fn module_config_maps(client: &kube::Client) -> usize {
    Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|map| map.metadata.name.as_deref() == Some(MODULES_CONFIG_MAP))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_without_the_crds_says_so_once_and_writes_nothing() {
    let (sandbox, client, _dir, kubeconfig) = bare_sandbox("no-crds").await;
    support_cluster::ensure_namespace(&client, "team").await;
    let out = tokio::task::spawn_blocking(move || upload(&kubeconfig, "team", &[]))
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("CustomResourceDefinitions are not installed"),
        "{stderr}"
    );
    assert_printed_once(&stderr);
    assert_eq!(
        module_config_maps(&client).await,
        0,
        "a ConfigMap was left behind"
    );
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_to_a_missing_namespace_says_so_and_json_output_reports_changes() {
    let (sandbox, client, _dir, kubeconfig) = bare_sandbox("uploads").await;
    support_cluster::install_crds(&client).await;
    let missing = kubeconfig.clone();
    let out = tokio::task::spawn_blocking(move || upload(&missing, "nope", &[]))
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("namespace nope does not exist"), "{stderr}");
    assert_printed_once(&stderr);
    assert_eq!(module_config_maps(&client).await, 0);

    support_cluster::ensure_namespace(&client, "team").await;
    let out = tokio::task::spawn_blocking(move || upload(&kubeconfig, "team", &["-o", "json"]))
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = std::fs::read(module_path("cheapest_cluster")).unwrap();
    assert_eq!(printed["moduleSha256"], ferry::policy::sha256_hex(&bytes));
    let changes = printed["changes"].as_array().unwrap();
    assert!(
        changes.iter().any(|c| c
            .as_str()
            .unwrap()
            .starts_with("created MigrationPolicy team/cost")),
        "{printed}"
    );
    assert_eq!(module_config_maps(&client).await, 1);
    sandbox.shutdown().await;
}

#[test]
fn a_broken_kubeconfig_prints_each_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\nclusters: 7\n").unwrap();
    let out = upload(&kubeconfig, "team", &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("caused by:"), "{stderr}");
    assert_printed_once(&stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_interval_in_days_is_accepted_by_the_api_server_and_validation() {
    let (sandbox, client, _dir, _kubeconfig) = bare_sandbox("days").await;
    support_cluster::install_crds(&client).await;
    support_cluster::ensure_namespace(&client, "shop").await;
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/crd/migrationpolicy.yaml"),
    )
    .unwrap();
    let mut policy: MigrationPolicy = serde_saphyr::from_str(&text).unwrap();
    policy.metadata.generation = None;
    policy.spec.interval = ferry::crd::Duration::new("1d");
    let created = Api::<MigrationPolicy>::namespaced(client.clone(), "shop")
        .create(&PostParams::default(), &policy)
        .await
        .expect("the schema's pattern takes days");
    let validated = validate_policy(&created.spec).expect("validation takes days");
    assert_eq!(validated.interval, std::time::Duration::from_secs(86_400));
    sandbox.shutdown().await;
}
