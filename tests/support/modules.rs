//! The example policy components, as the README's test command builds them
//! (`cargo build --release --target wasm32-wasip2 --manifest-path
//! policies/Cargo.toml --target-dir policies/target`).

use std::path::PathBuf;

/// Where the component `name` (e.g. `cheapest_cluster`) is built.
pub fn module_path(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("policies/target/wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing; build the policies first (see the README's test command)",
        path.display()
    );
    path
}

/// The bytes of the component `name`.
pub fn module(name: &str) -> Vec<u8> {
    let path = module_path(name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}
