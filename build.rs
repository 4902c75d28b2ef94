//! Builds the example policy components that `ferry demo` embeds, when
//! they are not built yet (the test command builds them first anyway).

use std::path::Path;
use std::process::Command;

const EMBEDDED: &[&str] = &["spot_aware.wasm", "cheapest_cluster.wasm"];

fn main() {
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
