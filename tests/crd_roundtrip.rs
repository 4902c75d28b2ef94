//! Example objects of every Ferry resource survive YAML parse → serialize →
//! parse unchanged, and serializing drops no field of the example.

use std::fmt::Debug;
use std::path::Path;

use ferry::crd::{ClusterPeer, MigrationPolicy, WorkloadMigration};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/crd")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn assert_round_trip<T>(name: &str) -> T
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let text = fixture(name);
    let parsed: T = serde_saphyr::from_str(&text).unwrap_or_else(|err| panic!("{name}: {err}"));
    let written = serde_saphyr::to_string(&parsed).unwrap();
    let reparsed: T = serde_saphyr::from_str(&written)
        .unwrap_or_else(|err| panic!("{name} rewritten: {err}\n{written}"));
    assert_eq!(parsed, reparsed, "{name}");

    // Every field of the example comes back: nothing was ignored on the way in.
    let original: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let serialized = serde_json::to_value(&parsed).unwrap();
    assert_eq!(
        original, serialized,
        "{name}: serializing changed the object"
    );
    parsed
}

#[test]
fn cluster_peer_round_trips() {
    let peer: ClusterPeer = assert_round_trip("clusterpeer.yaml");
    assert!(peer.spec.accepts_into("shop"));
    assert_eq!(peer.spec.probe_interval.to_std().unwrap().as_secs(), 30);
    let admission = &peer.spec.admission;
    assert_eq!(admission.profile, ferry::crd::PodSecurityProfile::Baseline);
    assert_eq!(
        admission.caps.total.memory.as_ref().and_then(|q| q.whole()),
        Some(64 << 30)
    );
    assert_eq!(admission.rate_limit.burst, 4);
}

#[test]
fn migration_policy_round_trips() {
    let policy: MigrationPolicy = assert_round_trip("migrationpolicy.yaml");
    let validated = ferry::crd::validate_policy(&policy.spec).expect("example policy is valid");
    assert_eq!(validated.interval.as_secs(), 150);
    assert_eq!(validated.limits.fuel, Some(50_000_000));
}

#[test]
fn workload_migration_round_trips() {
    let migration: WorkloadMigration = assert_round_trip("workloadmigration.yaml");
    assert_eq!(migration.spec.workload["spec"]["replicas"], 3);
    assert_eq!(migration.spec.secrets.len(), 1);
}

#[test]
fn a_minimal_policy_round_trips_with_defaults_filled_in() {
    let text = "apiVersion: ferry.dev/v1alpha1\nkind: MigrationPolicy\nmetadata:\n  name: p\n  namespace: n\n\
                spec:\n  module:\n    url: https://example.invalid/p.wasm\n    sha256: \
                e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n";
    let parsed: MigrationPolicy = serde_saphyr::from_str(text).unwrap();
    let written = serde_saphyr::to_string(&parsed).unwrap();
    assert!(written.contains("mode: DryRun"), "{written}");
    assert!(written.contains("cooldown: 1h"), "{written}");
    let reparsed: MigrationPolicy = serde_saphyr::from_str(&written).unwrap();
    assert_eq!(parsed, reparsed);
    assert!(parsed.status.is_none());
}
