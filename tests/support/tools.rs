//! The pinned command-line tools the tests drive: kubectl v1.35 and Helm v4,
//! which `scripts/install-tools` puts in `.tools/bin`. A test never falls back
//! to whatever `kubectl` or `helm` is on PATH: a different version would make
//! it pass or fail for reasons of its own.

use std::path::PathBuf;

/// kubectl: `$FERRY_KUBECTL`, else `.tools/bin/kubectl`.
pub fn kubectl() -> PathBuf {
    tool("kubectl", "FERRY_KUBECTL")
}

/// helm: `$FERRY_HELM`, else `.tools/bin/helm`.
pub fn helm() -> PathBuf {
    tool("helm", "FERRY_HELM")
}

fn tool(name: &str, variable: &str) -> PathBuf {
    let path = match std::env::var_os(variable) {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(".tools/bin")
            .join(name),
    };
    assert!(
        path.is_file(),
        "{name} is missing at {} (from {variable} or .tools/bin); run scripts/install-tools",
        path.display()
    );
    path
}
