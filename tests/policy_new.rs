//! `ferry policy new` writes a policy that builds with the real toolchains
//! and passes its own fixture under `ferry policy test`: one build per
//! language. Rust builds with cargo for wasm32-wasip2 (offline, at the
//! versions `policies/Cargo.lock` pins); Python and JavaScript with the
//! toolchains `scripts/build-policies` installs in `.tools`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .env_remove("FERRY_LOG")
        .env_remove("FERRY_OUTPUT")
        .env_remove("FERRY_SDK_PATH")
        .output()
        .expect("ferry runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A toolchain `scripts/build-policies` installs.
fn tool(path: &str) -> PathBuf {
    let path = repo(path);
    assert!(
        path.exists(),
        "{} is missing; run scripts/build-policies",
        path.display()
    );
    path
}

/// Scaffolds `name` in `lang` into `dir`, with `extra` arguments, and
/// returns what `-o json` says of it.
fn scaffold(lang: &str, name: &str, dir: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "policy",
        "new",
        name,
        "--lang",
        lang,
        "--dir",
        dir.to_str().unwrap(),
        "-o",
        "json",
    ];
    args.extend(extra);
    let out = ferry(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let scaffold: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let build = scaffold["build"].as_str().unwrap();
    assert!(
        readme.contains(build),
        "the README gives `{build}`:\n{readme}"
    );
    assert!(!readme.contains("{{"), "a placeholder is left:\n{readme}");
    scaffold
}

/// Runs a shell command in `dir` and fails the test with its output.
fn run(dir: &Path, command: &mut Command) {
    let out = command.current_dir(dir).output().expect("the build runs");
    assert!(
        out.status.success(),
        "{command:?} failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `ferry policy test` on the scaffold's own fixtures passes.
fn fixtures_pass(module: &Path, dir: &Path) {
    let out = ferry(&[
        "policy",
        "test",
        module.to_str().unwrap(),
        dir.join("fixtures").to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("1 fixtures: 1 passed"));
}

/// `ferry policy check` finds that the module implements contract v2.
fn implements_contract_v2(module: &Path) {
    let out = ferry(&["policy", "check", module.to_str().unwrap(), "-o", "json"]);
    let check: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}{}", text(&out.stdout), text(&out.stderr)));
    assert_eq!(check["contract"], "ferry:policy/migration-policy@2.0.0");
}

#[test]
fn a_rust_policy_builds_against_the_sdk_and_passes_its_fixture() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("my-policy");
    let sdk = repo("policies/sdk");
    let scaffold = scaffold(
        "rust",
        "my-policy",
        &dir,
        &["--sdk-path", sdk.to_str().unwrap()],
    );
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("ferry-policy-sdk = { path = \""),
        "{manifest}"
    );
    // The versions Ferry's own policies build with, already downloaded.
    std::fs::copy(repo("policies/Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    // Shared by runs, so that a second run compiles only the policy.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("policy-new-rust");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let build: Vec<&str> = scaffold["build"].as_str().unwrap().split(' ').collect();
    assert_eq!(build[0], "cargo");
    run(
        &dir,
        Command::new(&cargo)
            .args(&build[1..])
            .arg("--offline")
            .env("CARGO_TARGET_DIR", &target),
    );
    let module = target.join("wasm32-wasip2/release/my_policy.wasm");
    assert_eq!(
        scaffold["module"],
        "target/wasm32-wasip2/release/my_policy.wasm"
    );
    fixtures_pass(&module, &dir);
    implements_contract_v2(&module);
}

#[test]
fn a_python_policy_builds_with_its_copy_of_the_sdk_and_passes_its_fixture() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("py-policy");
    let scaffold = scaffold("python", "py-policy", &dir, &[]);
    assert!(dir.join("sdk/ferry_policy/plan.py").is_file());
    assert!(dir.join("wit/policy.wit").is_file());
    // The README installs componentize-py into .venv; the tests' copy is
    // the one scripts/build-policies installed from the same pin.
    std::os::unix::fs::symlink(tool(".tools/python"), dir.join(".venv")).unwrap();
    run(
        &dir,
        Command::new("sh").args(["-c", scaffold["build"].as_str().unwrap()]),
    );
    fixtures_pass(&dir.join("policy.wasm"), &dir);
    implements_contract_v2(&dir.join("policy.wasm"));
}

#[test]
fn a_javascript_policy_builds_with_a_copy_of_the_given_sdk_and_passes_its_fixture() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("js-policy");
    let sdk = repo("policies/js/sdk");
    let scaffold = scaffold(
        "js",
        "js-policy",
        &dir,
        &["--sdk-path", sdk.to_str().unwrap()],
    );
    let policy = std::fs::read_to_string(dir.join("policy.js")).unwrap();
    assert!(policy.contains("from './sdk/ferry-policy.js'"), "{policy}");
    // componentize-js reads only under the policy's directory: a copy of
    // the given SDK is made there.
    assert_eq!(
        std::fs::read(dir.join("sdk/ferry-policy.js")).unwrap(),
        std::fs::read(sdk.join("ferry-policy.js")).unwrap()
    );
    // The README installs the toolchain with `npm install`; the tests' copy
    // is the one scripts/build-policies installed from the same pins.
    std::os::unix::fs::symlink(tool(".tools/js/node_modules"), dir.join("node_modules")).unwrap();
    run(
        &dir,
        Command::new("sh").args(["-c", scaffold["build"].as_str().unwrap()]),
    );
    fixtures_pass(&dir.join("policy.wasm"), &dir);
    implements_contract_v2(&dir.join("policy.wasm"));
}

#[test]
fn new_overwrites_nothing_and_names_a_wrong_sdk_path() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("taken");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("app.py"), "mine").unwrap();
    let out = ferry(&[
        "policy",
        "new",
        "taken",
        "--lang",
        "python",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(dir.join("app.py")).unwrap(), "mine");

    // The repository root is not the Python SDK.
    let out = ferry(&[
        "policy",
        "new",
        "lost",
        "--lang",
        "python",
        "--dir",
        temp.path().join("lost").to_str().unwrap(),
        "--sdk-path",
        env!("CARGO_MANIFEST_DIR"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("ferry_policy/__init__.py"), "{stderr}");
    assert!(stderr.contains("policies/python/sdk"), "{stderr}");

    let out = ferry(&["policy", "new", "Not_A_Name", "--lang", "rust"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("lowercase"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_rust_policy_without_an_sdk_path_depends_on_the_repository_by_tag() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("by-git");
    scaffold("rust", "by-git", &dir, &[]);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let expected = format!(
        "ferry-policy-sdk = {{ git = \"{}\", tag = \"v{}\" }}",
        env!("CARGO_PKG_REPOSITORY"),
        env!("CARGO_PKG_VERSION")
    );
    assert!(manifest.contains(&expected), "{manifest}");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("policies/sdk"), "{readme}");
}
