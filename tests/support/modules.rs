//! The example policy components, as `scripts/build-policies` builds them:
//! the Rust ones where cargo puts them (`cargo build --release --target
//! wasm32-wasip2 --manifest-path policies/Cargo.toml --target-dir
//! policies/target`), and every language's in `policies/target/components`.

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

/// The languages `scripts/build-policies` builds every example in.
pub const LANGUAGES: [&str; 3] = ["rust", "python", "js"];

/// Where `scripts/build-policies` puts the example `name` (as the Rust crate,
/// e.g. `cheapest-cluster`) written in `lang` (`rust`, `python` or `js`).
pub fn component_path(lang: &str, name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("policies/target/components")
        .join(lang)
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{} is missing; build the policies first (scripts/build-policies)",
        path.display()
    );
    path
}

/// The bytes of the example `name` written in `lang`.
pub fn component(lang: &str, name: &str) -> Vec<u8> {
    let path = component_path(lang, name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}
