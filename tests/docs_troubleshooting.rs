//! `docs/troubleshooting.md` has one entry per reason the code emits:
//! condition reasons, Event reasons, skipped cycles, policy error classes,
//! migration phase reasons and receiver refusals.
//!
//! The reasons are found the way a reader would spot them: every string
//! literal in PascalCase in the operator's code (src/, outside tests, the
//! command line, the demo and the simulator). A literal that is not a
//! reason (a kind, a printer column, a unit) is listed in [`NOT_REASONS`],
//! so a new reason cannot slip through undocumented, and an entry whose
//! reason the code no longer emits is reported too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// PascalCase literals of the operator's code that are not reasons.
const NOT_REASONS: &[&str] = &[
    // Kubernetes kinds and their status types.
    "ClusterPeer",
    "ClusterPeerStatus",
    "ClusterRole",
    "ConfigMap",
    "Deployment",
    "MigrationPolicy",
    "MigrationPolicyStatus",
    "Namespace",
    "ReplicaSet",
    "RoleBinding",
    "Secret",
    "ServiceAccount",
    "WorkloadMigration",
    "WorkloadMigrationStatus",
    // What a stateful move creates, the Job conditions its hooks read, and
    // the restart policy they set.
    "StatefulSet",
    "PersistentVolumeClaim",
    "Job",
    "Complete",
    "Failed",
    "FailureTarget",
    "Never",
    // A schema name.
    "ReplicaCount",
    // The kinds that travel beside a workload, Service types, and label
    // selector operators.
    "HorizontalPodAutoscaler",
    "NetworkPolicy",
    "PodDisruptionBudget",
    "Service",
    "ServiceExport",
    "ClusterIP",
    "NodePort",
    "LoadBalancer",
    "ExternalName",
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    // A Secret type, pod security values, toleration operators.
    "Opaque",
    "AppArmor",
    "RuntimeDefault",
    "Localhost",
    "Default",
    "Always",
    "Equal",
    // Condition types and their statuses.
    "Connected",
    "Ready",
    "Degraded",
    "True",
    "False",
    // Policy modes.
    "DryRun",
    "Enforce",
    // Printer column headings.
    "Age",
    "Kind",
    "Mode",
    "Module",
    "Phase",
    "Reason",
    "Region",
    "Role",
    "Source",
    "Step",
    "Target",
    "Version",
    "Workload",
    // Journal actions and a metrics label for a phase not yet known.
    "Cycle",
    "Receive",
    "Send",
    "Pending",
    // Languages and toolchains a module's producers section names.
    "ComponentizeJS",
    "JavaScript",
    "Python",
    "Rust",
    // The transport printer column.
    "Transport",
    // Names in Debug output and derive attributes.
    "ClusterKeys",
    "Config",
    "Duration",
    "Grant",
    "KeyRing",
    "NatsConfig",
    "NatsLink",
    "PartialEq",
    "Peer",
    "PeerGrant",
    "Policy",
    "PrometheusEndpoint",
    "Quantity",
    // Quantity suffixes.
    "Ei",
    "Gi",
    "Ki",
    "Mi",
    "Pi",
    "Ti",
];

/// Rooms that report no condition, Event or refusal of their own.
const NOT_SCANNED: &[&str] = &["src/cli", "src/demo", "src/simulate", "src/units"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let relative = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if NOT_SCANNED.iter().any(|skip| relative.starts_with(skip)) {
            continue;
        }
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                rust_files(&path, files);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            files.push(path);
        }
    }
}

fn is_pascal_case(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && word.len() > 1
        && word.chars().all(|c| c.is_ascii_alphanumeric())
        && word.chars().any(|c| c.is_ascii_lowercase())
}

/// Every PascalCase string literal of a source file's code, up to its test
/// module, comments left out.
fn literals(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in source.lines() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" //").next().unwrap_or(code);
        let mut parts = code.split('"');
        parts.next();
        // Every other part is inside quotes (no escaped quotes in a reason).
        while let Some(inside) = parts.next() {
            if is_pascal_case(inside) {
                found.push(inside.to_owned());
            }
            parts.next();
        }
    }
    found
}

fn emitted() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut words = BTreeSet::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        words.extend(literals(&source));
    }
    words
}

/// The reasons the page has an entry for: its `### \`Reason\`` headings.
fn documented() -> BTreeSet<String> {
    let page = std::fs::read_to_string(root().join("docs/troubleshooting.md"))
        .expect("docs/troubleshooting.md");
    page.lines()
        .filter_map(|line| line.strip_prefix("### `"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_reason_the_code_emits_has_a_troubleshooting_entry() {
    let not_reasons: BTreeSet<String> = NOT_REASONS.iter().map(|s| s.to_string()).collect();
    let documented = documented();
    let emitted = emitted();
    let missing: Vec<&String> = emitted
        .iter()
        .filter(|word| !documented.contains(*word) && !not_reasons.contains(*word))
        .collect();
    assert!(
        missing.is_empty(),
        "reasons without an entry in docs/troubleshooting.md (add a `### `Reason`` \
         entry, or list a word that is no reason in NOT_REASONS): {missing:?}"
    );
    let stale: Vec<&String> = documented.difference(&emitted).collect();
    assert!(
        stale.is_empty(),
        "docs/troubleshooting.md has entries for reasons the code no longer emits: {stale:?}"
    );
}

#[test]
fn the_scan_finds_reasons_of_each_kind() {
    let emitted = emitted();
    // A condition reason, a refusal, a skipped cycle, a policy error class,
    // an admission violation and a module load failure.
    for reason in [
        "SecretOutsideNamespace",
        "NameConflict",
        "MetricsUnavailable",
        "OutOfMemory",
        "PodSecurityRestricted",
        "DigestMismatch",
    ] {
        assert!(emitted.contains(reason), "the scan missed {reason}");
    }
    assert_eq!(
        literals("let a = \"NotAReasonHere\"; // \"Commented\"\n#[cfg(test)]\n\"Test\""),
        ["NotAReasonHere"]
    );
}
