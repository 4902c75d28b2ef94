//! Records how the binary is built (`ferry version`), and builds the
//! example policy components that `ferry demo` embeds, when they are not
//! built yet (the test command builds them first anyway).

use std::path::Path;
use std::process::Command;

const EMBEDDED: &[&str] = &["spot_aware.wasm", "cheapest_cluster.wasm"];

fn main() {
    record_build_info();
    println!("cargo:rerun-if-changed=policies/Cargo.toml");
    println!("cargo:rerun-if-changed=policies/wit");
    for dir in ["sdk", "cheapest-cluster", "spot-aware"] {
        println!("cargo:rerun-if-changed=policies/{dir}/src");
    }
    let out = Path::new("policies/target/wasm32-wasip2/release");
    for file in EMBEDDED {
        println!("cargo:rerun-if-changed={}", out.join(file).display());
    }
    if EMBEDDED.iter().all(|file| out.join(file).is_file()) {
        return;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
            "policies/Cargo.toml",
            "--target-dir",
            "policies/target",
        ])
        // The outer build's settings are not for the wasm build.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .status();
    match status {
        Ok(status) if status.success() => {}
        _ => panic!(
            "building the policy components failed; `ferry demo` embeds them. \
             Add the target with `rustup target add wasm32-wasip2` and build them with \
             `cargo build --release --target wasm32-wasip2 --manifest-path policies/Cargo.toml --target-dir policies/target`"
        ),
    }
}

/// The compiler, target and profile, and the commit when it is known:
/// `FERRY_GIT_COMMIT` if set, else `git rev-parse HEAD` in release builds.
/// Debug builds do not ask git, so a commit does not rebuild the crate.
fn record_build_info() {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let rustc = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned()))
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=FERRY_BUILD_RUSTC={rustc}");
    println!("cargo:rustc-env=FERRY_BUILD_TARGET={}", env("TARGET"));
    println!("cargo:rustc-env=FERRY_BUILD_PROFILE={}", env("PROFILE"));
    println!("cargo:rerun-if-env-changed=FERRY_GIT_COMMIT");
    let commit = match std::env::var("FERRY_GIT_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => Some(commit.trim().to_owned()),
        _ if env("PROFILE") == "release" => git_commit(),
        _ => None,
    };
    if let Some(commit) = commit {
        println!("cargo:rustc-env=FERRY_BUILD_GIT_COMMIT={commit}");
    }
}

/// HEAD's commit; the build script reruns when HEAD moves.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["rev-parse", "--symbolic-full-name", "HEAD"])
            .and_then(|r| git(&["rev-parse", "--git-path", &r])),
    ]
    .into_iter()
    .flatten()
    {
        println!("cargo:rerun-if-changed={path}");
    }
    Some(commit)
}
