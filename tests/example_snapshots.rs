//! The sample snapshots in `examples/snapshots/`, which docs/policy-guide.md
//! tells users to try first: each parses as the contract's snapshot and
//! gives, through `ferry policy eval` with an example policy, the moves the
//! guide describes.

mod support;
use support::modules::module_path;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn snapshots_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/snapshots")
}

/// A move: `(namespace/name, target cluster)`.
type Move = (&'static str, &'static str);

/// Each snapshot, a policy, and the moves it makes.
const EXPECTED: &[(&str, &str, &[Move])] = &[
    (
        "two-clusters.json",
        "cheapest_cluster",
        &[("shop/web", "budget")],
    ),
    (
        "spot-and-on-demand.json",
        "spot_aware",
        &[
            ("shop/reports", "spot"),
            ("shop/web", "spot"),
            ("shop/checkout", "spot"),
        ],
    ),
    (
        "spot-and-on-demand.json",
        "cheapest_cluster",
        &[
            ("shop/reports", "frankfurt"),
            ("shop/web", "frankfurt"),
            ("shop/checkout", "frankfurt"),
        ],
    ),
    (
        "hot-cluster.json",
        "utilization_balancer",
        &[("jobs/transcode", "west")],
    ),
    ("missing-prices.json", "cheapest_cluster", &[]),
    (
        "carbon-intensity.json",
        "carbon_aware",
        &[("shop/web", "hydro")],
    ),
];

#[test]
fn every_sample_snapshot_is_a_valid_snapshot_and_has_an_expectation() {
    let files: BTreeSet<String> = std::fs::read_dir(snapshots_dir())
        .expect("examples/snapshots exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".json"))
        .collect();
    assert!(!files.is_empty());
    for name in &files {
        let text = std::fs::read_to_string(snapshots_dir().join(name)).unwrap();
        let snapshot: ferry::contract::Snapshot = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("examples/snapshots/{name} is no snapshot: {err}"));
        assert!(!snapshot.clusters.is_empty(), "{name}");
        serde_json::from_str::<Value>(&snapshot.parameters)
            .unwrap_or_else(|err| panic!("{name}: parameters is not JSON text: {err}"));
        assert!(
            EXPECTED.iter().any(|(file, ..)| file == name),
            "examples/snapshots/{name} has no expectation in this test"
        );
    }
}

#[test]
fn each_sample_snapshot_evaluates_to_the_moves_the_guide_describes() {
    for (file, policy, moves) in EXPECTED {
        let input = snapshots_dir().join(file);
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["policy", "eval"])
            .arg(module_path(policy))
            .arg("--input")
            .arg(&input)
            .env_remove("FERRY_LOG")
            .output()
            .expect("ferry runs");
        assert!(
            out.status.success(),
            "ferry policy eval {policy} --input {file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("eval prints JSON");
        assert_eq!(
            report["rejected"],
            Value::Array(vec![]),
            "{file} with {policy}"
        );
        let made: Vec<(String, String)> = report["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    format!(
                        "{}/{}",
                        d["namespace"].as_str().unwrap(),
                        d["name"].as_str().unwrap()
                    ),
                    d["toCluster"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = moves
            .iter()
            .map(|(w, t)| (w.to_string(), t.to_string()))
            .collect();
        assert_eq!(made, expected, "{file} with {policy}");
    }
}
