//! `ferry policy check` and `ferry policy eval`, run as a user runs them.

mod support;
use support::modules::module_path as module;

use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .env_remove("FERRY_LOG")
        .output()
        .expect("ferry runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const SNAPSHOT: &str = r#"{
  "timestampMs": 1767225600000,
  "clusters": [
    {"name": "dear", "region": "eu", "ready": true,
     "allocatable": {"cpuMillis": 64000, "memoryBytes": 274877906944},
     "requested": {"cpuMillis": 0, "memoryBytes": 0},
     "cpuCoreHourPrice": 0.05, "memoryGibHourPrice": 0.006},
    {"name": "cheap", "region": "eu", "ready": true,
     "allocatable": {"cpuMillis": 64000, "memoryBytes": 274877906944},
     "requested": {"cpuMillis": 0, "memoryBytes": 0},
     "cpuCoreHourPrice": 0.02, "memoryGibHourPrice": null}
  ],
  "workloads": [
    {"namespace": "shop", "name": "web", "kind": "Deployment", "cluster": "dear", "replicas": 2,
     "requests": {"cpuMillis": 2000, "memoryBytes": 4294967296},
     "labels": [{"key": "app", "value": "web"}]}
  ],
  "thresholds": {"minHourlySavings": 0, "minSavingsRatio": 0.1,
    "maxTargetCpuUtilization": 0.8, "maxTargetMemoryUtilization": 0.8,
    "cooldownSeconds": 3600, "maxMigrationsPerCycle": 5},
  "parameters": "{}"
}"#;

fn snapshot_file(dir: &tempfile::TempDir, json: &str) -> String {
    let path = dir.path().join("snapshot.json");
    std::fs::write(&path, json).unwrap();
    path.display().to_string()
}

#[test]
fn check_reports_contract_exports_build_limits_and_a_trial() {
    let path = module("cheapest_cluster");
    let out = ferry(&["policy", "check", path.to_str().unwrap(), "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(info["contract"], "ferry:policy/migration-policy@2.0.0");
    assert_eq!(info["size"], bytes.len());
    assert_eq!(info["sha256"], ferry::policy::sha256_hex(&bytes));
    let imports: Vec<&str> = info["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(imports.contains(&"ferry:policy/types@2.0.0"), "{imports:?}");
    assert!(
        imports
            .iter()
            .all(|i| i.starts_with("ferry:policy/") || i.starts_with("wasi:")),
        "{imports:?}"
    );
    assert_eq!(info["exports"], serde_json::json!(["decide"]));
    // Exported with the SDK's `policy!`, which marks it.
    assert_eq!(info["keepsInput"], "everything");
    assert_eq!(info["builtWith"]["language"], "Rust", "{info}");
    assert!(
        info["builtWith"]["toolchain"]
            .as_str()
            .is_some_and(|t| t.starts_with("rustc ")),
        "{info}"
    );
    let limits = &info["limits"];
    assert_eq!(limits["moduleBytes"], 64 * 1024 * 1024);
    assert_eq!(limits["fitsConfigMap"], true, "{info}");
    assert_eq!(limits["memoryBytes"], 64 * 1024 * 1024);
    assert_eq!(limits["timeoutMs"], 1000.0);
    assert_eq!(info["trial"]["outcome"], "answered", "{info}");
    assert!(info["trial"]["memoryBytes"].as_u64().unwrap() > 0);
}

#[test]
fn check_speaks_the_authors_language_and_keeps_the_abi_for_verbose() {
    let path = module("cheapest_cluster");
    let out = ferry(&["policy", "check", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for line in [
        "implements ferry:policy/migration-policy@2.0.0 (contract v2)",
        "exports      decide",
        "built with   Rust (rustc ",
        "sha256       ",
        "fits: `ferry policy upload` can deliver it",
        "deadline     1.00 s, instantiation included",
        "fuel         unlimited",
        "trial        answered an empty snapshot",
    ] {
        assert!(stdout.contains(line), "{line:?} missing in\n{stdout}");
    }
    assert!(!stdout.contains("keeps-input"), "{stdout}");
    assert!(!stdout.contains("lowered"), "{stdout}");

    let out = ferry(&["policy", "check", path.to_str().unwrap(), "--verbose"]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("keeps-input 0.2.0"), "{stdout}");
    assert!(stdout.contains("imports      "), "{stdout}");
}

/// The interpreters' components say what built them, and are too large for
/// a ConfigMap.
#[test]
fn check_names_python_and_javascript_toolchains() {
    for (lang, language, toolchain) in [
        ("python", "Python 3.", "componentize-py"),
        ("js", "JavaScript", "componentize-js "),
    ] {
        let path = support::modules::component_path(lang, "cheapest-cluster");
        let out = ferry(&["policy", "check", path.to_str().unwrap(), "-o", "json"]);
        assert!(out.status.success(), "{lang}: {}", text(&out.stderr));
        let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let built = &info["builtWith"];
        assert!(
            built["language"].as_str().unwrap().starts_with(language),
            "{lang}: {built}"
        );
        assert!(
            built["toolchain"].as_str().unwrap().starts_with(toolchain),
            "{lang}: {built}"
        );
        assert_eq!(info["limits"]["fitsConfigMap"], false, "{lang}");
        assert_eq!(info["trial"]["outcome"], "answered", "{lang}: {info}");

        let out = ferry(&["policy", "check", path.to_str().unwrap()]);
        let stdout = text(&out.stdout);
        assert!(stdout.contains("exports      decide\n"), "{lang}: {stdout}");
    }
}

/// A module that cannot start within the memory given does not fit: exit 3.
#[test]
fn check_exits_3_when_the_module_does_not_fit_its_memory_limit() {
    let path = support::modules::component_path("python", "cheapest-cluster");
    let out = ferry(&["policy", "check", path.to_str().unwrap(), "--memory", "1Mi"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("trial        FAILED"), "{stdout}");
}

#[test]
fn check_refuses_a_file_that_is_not_a_component_with_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.wasm");
    std::fs::write(&path, b"\0asm\x01\0\0\0").unwrap();
    let out = ferry(&["policy", "check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("core WebAssembly module"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn eval_prints_decisions_rejections_logs_and_time() {
    let dir = tempfile::tempdir().unwrap();
    // `cheap` has no memory price: cheapest-cluster must not treat it as free.
    let input = snapshot_file(&dir, SNAPSHOT);
    let out = ferry(&[
        "policy",
        "eval",
        module("cheapest_cluster").to_str().unwrap(),
        "--input",
        &input,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["decisions"], serde_json::json!([]));
    for key in [
        "rejected",
        "logs",
        "elapsedMs",
        "logsDropped",
        "memoryBytes",
    ] {
        assert!(answer.get(key).is_some(), "{key} missing in {answer}");
    }

    let priced = SNAPSHOT.replace(
        r#""memoryGibHourPrice": null"#,
        r#""memoryGibHourPrice": 0.003"#,
    );
    let input = snapshot_file(&dir, &priced);
    let out = ferry(&[
        "policy",
        "eval",
        module("cheapest_cluster").to_str().unwrap(),
        "--input",
        &input,
    ]);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["decisions"][0]["toCluster"], "cheap", "{answer}");
    assert_eq!(answer["decisions"][0]["fromCluster"], "dear");
    // A contract v2 module states its reasons: 2 cores and 4 GiB cost
    // 0.1 + 0.024 at dear and 0.04 + 0.012 at cheap.
    let reasons = &answer["decisions"][0]["reasons"];
    assert!((reasons["sourceHourlyCost"].as_f64().unwrap() - 0.124).abs() < 1e-9);
    assert!((reasons["targetHourlyCost"].as_f64().unwrap() - 0.052).abs() < 1e-9);
    assert!((reasons["hourlySavings"].as_f64().unwrap() - 0.072).abs() < 1e-9);
}

/// `check` names the contract a module implements: the v1 build of the
/// same example still loads, as contract v1.
#[test]
fn check_names_the_contract_of_a_v1_module() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/policies/cheapest-cluster-contract-v1.wasm");
    let out = ferry(&["policy", "check", path.to_str().unwrap(), "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["contract"], "ferry:policy/migration-policy@0.1.0");
    let out = ferry(&["policy", "check", path.to_str().unwrap()]);
    assert!(
        text(&out.stdout).contains("implements ferry:policy/migration-policy@0.1.0 (contract v1)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn eval_reports_rejected_decisions_and_still_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let input = snapshot_file(&dir, SNAPSHOT);
    let parameters = r#"{"mode": "return", "decisions": [{"namespace": "shop", "name": "web", "fromCluster": "dear", "toCluster": "mars", "hourlySavings": 1}]}"#;
    let out = ferry(&[
        "policy",
        "eval",
        module("testbed").to_str().unwrap(),
        "--input",
        &input,
        "--parameters",
        parameters,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer["rejected"][0]["reason"],
        "toCluster is not a known cluster"
    );
    assert_eq!(answer["rejected"][0]["decision"]["toCluster"], "mars");
}

#[test]
fn eval_names_the_json_path_of_bad_input_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = SNAPSHOT.replace(r#""replicas": 2"#, r#""replicas": "two""#);
    let input = snapshot_file(&dir, &bad);
    let out = ferry(&[
        "policy",
        "eval",
        module("noop").to_str().unwrap(),
        "--input",
        &input,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("workloads[0].replicas"),
        "{}",
        text(&out.stderr)
    );

    let out = ferry(&[
        "policy",
        "eval",
        module("noop").to_str().unwrap(),
        "--input",
        "/nonexistent.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent.json"));
}

#[test]
fn eval_exits_3_with_the_error_class_when_the_policy_fails() {
    let dir = tempfile::tempdir().unwrap();
    let input = snapshot_file(&dir, SNAPSHOT);
    let testbed = module("testbed");
    let cases = [
        (r#"{"mode": "loop"}"#, "Timeout:"),
        (r#"{"mode": "panic"}"#, "Trap:"),
        (r#"{"mode": "error"}"#, "PolicyError:"),
        (r#"{"mode": "grow"}"#, "OutOfMemory:"),
    ];
    for (parameters, class) in cases {
        let out = ferry(&[
            "policy",
            "eval",
            testbed.to_str().unwrap(),
            "--input",
            &input,
            "--parameters",
            parameters,
            "--timeout",
            "300ms",
            "--memory",
            "16Mi",
        ]);
        assert_eq!(out.status.code(), Some(3), "{parameters}");
        assert!(
            text(&out.stderr).contains(class),
            "{parameters}: {}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
}

/// `ferry policy eval … | head -c 0`: the reader is gone before the first
/// byte. The command ends like other Unix tools, by SIGPIPE, and never
/// panics mid-print.
#[test]
fn eval_into_a_closed_pipe_ends_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;

    let dir = tempfile::tempdir().unwrap();
    let input = snapshot_file(&dir, SNAPSHOT);
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "policy",
            "eval",
            module("cheapest_cluster").to_str().unwrap(),
            "--input",
            &input,
        ])
        .env_remove("FERRY_LOG")
        .stdout(writer)
        .output()
        .expect("ferry runs");
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        out.status
    );
}
