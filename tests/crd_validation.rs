//! `validate_policy` refuses what the schema cannot (or, where CEL does not
//! run, did not) refuse, naming the field and saying what to do.

use std::path::Path;

use ferry::crd::{MigrationPolicy, invalid_spec_condition, validate_policy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

/// The spec of the valid example policy, as JSON.
fn example_spec() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/crd/migrationpolicy.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let policy: Value = serde_saphyr::from_str(&text).unwrap();
    policy["spec"].clone()
}

/// The example spec with `value` written at `pointer` (`/thresholds/cooldown`).
fn with(pointer: &str, value: Value) -> MigrationPolicy {
    let mut spec = example_spec();
    *spec
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer} in the example")) = value;
    let policy = json!({
        "apiVersion": "ferry.dev/v1alpha1",
        "kind": "MigrationPolicy",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": spec,
    });
    serde_json::from_value(policy).unwrap()
}

const HTTPS: &str = "https://policies.example/cheapest.wasm";
const DIGEST: &str = "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b";

#[test]
fn the_example_policy_is_valid() {
    let policy = with("/mode", json!("Enforce"));
    validate_policy(&policy.spec).unwrap();
}

#[test]
fn bad_specs_are_refused_naming_the_field() {
    // (what, pointer, new value, expected path, a word the message must hold)
    let cases: Vec<(&str, &str, Value, &str, &str)> = vec![
        (
            "negative threshold",
            "/thresholds/minHourlySavings",
            json!(-0.5),
            "spec.thresholds.minHourlySavings",
            "at least 0",
        ),
        (
            "negative migration cost",
            "/thresholds/migrationCost",
            json!(-1.0),
            "spec.thresholds.migrationCost",
            "at least 0",
        ),
        (
            "negative payback",
            "/thresholds/maxPaybackHours",
            json!(-2.0),
            "spec.thresholds.maxPaybackHours",
            "at least 0",
        ),
        (
            "percent above 100",
            "/thresholds/minSavingsPercent",
            json!(150.0),
            "spec.thresholds.minSavingsPercent",
            "0 to 100",
        ),
        (
            "negative percent",
            "/thresholds/maxTargetCpuUtilizationPercent",
            json!(-5.0),
            "spec.thresholds.maxTargetCpuUtilizationPercent",
            "0 to 100",
        ),
        (
            "upper-case digest",
            "/module/sha256",
            json!(DIGEST.to_uppercase()),
            "spec.module.sha256",
            "sha256sum",
        ),
        (
            "short digest",
            "/module/sha256",
            json!("3a7bd3e2"),
            "spec.module.sha256",
            "64 lowercase hex",
        ),
        (
            "two module sources",
            "/module",
            json!({"configMapKeyRef": {"name": "m", "key": "k"}, "url": HTTPS, "sha256": DIGEST}),
            "spec.module",
            "exactly one",
        ),
        (
            "three module sources",
            "/module",
            json!({"configMapKeyRef": {"name": "m", "key": "k"}, "secretKeyRef": {"name": "s", "key": "k"}, "url": HTTPS, "sha256": DIGEST}),
            "spec.module",
            "exactly one",
        ),
        (
            "no module source",
            "/module",
            json!({"sha256": DIGEST}),
            "spec.module",
            "exactly one",
        ),
        (
            "oci and url",
            "/module",
            json!({"oci": {"reference": "registry.example/p:v1"}, "url": HTTPS, "sha256": DIGEST}),
            "spec.module",
            "exactly one",
        ),
        (
            "no digest and no oci",
            "/module",
            json!({"url": HTTPS}),
            "spec.module.sha256",
            "64 lowercase hex",
        ),
        (
            "oci over https",
            "/module",
            json!({"oci": {"reference": "https://registry.example/p:v1"}}),
            "spec.module.oci.reference",
            "other than oci://",
        ),
        (
            "oci without tag or digest",
            "/module",
            json!({"oci": {"reference": "registry.example/p"}}),
            "spec.module.oci.reference",
            "repository:tag",
        ),
        (
            "oci key without a key",
            "/module",
            json!({"oci": {"reference": "registry.example/p:v1", "verify": {"publicKeySecretRef": {"name": "k", "key": ""}}}}),
            "spec.module.oci.verify.publicKeySecretRef.key",
            "empty",
        ),
        (
            "http url",
            "/module",
            json!({"url": "http://policies.example/p.wasm", "sha256": DIGEST}),
            "spec.module.url",
            "https",
        ),
        (
            "url without host",
            "/module",
            json!({"url": "https://", "sha256": DIGEST}),
            "spec.module.url",
            "https",
        ),
        (
            "empty config map key",
            "/module/configMapKeyRef/key",
            json!(""),
            "spec.module.configMapKeyRef.key",
            "empty",
        ),
        (
            "bad cooldown",
            "/thresholds/cooldown",
            json!("1 hour"),
            "spec.thresholds.cooldown",
            "\"1h30m\"",
        ),
        (
            "bad interval unit",
            "/interval",
            json!("5min"),
            "spec.interval",
            "unit",
        ),
        (
            "interval too short",
            "/interval",
            json!("100ms"),
            "spec.interval",
            "at least 1s",
        ),
        (
            "bad timeout",
            "/limits/timeout",
            json!("fast"),
            "spec.limits.timeout",
            "not a duration",
        ),
        (
            "timeout above the cap",
            "/limits/timeout",
            json!("45s"),
            "spec.limits.timeout",
            "at most 30s",
        ),
        (
            "zero timeout",
            "/limits/timeout",
            json!("0s"),
            "spec.limits.timeout",
            "more than 0",
        ),
        (
            "memory above 1 GiB",
            "/limits/memoryBytes",
            json!(2u64 << 30),
            "spec.limits.memoryBytes",
            "1 GiB",
        ),
        (
            "memory below 1 MiB",
            "/limits/memoryBytes",
            json!(4096),
            "spec.limits.memoryBytes",
            "1 MiB",
        ),
        (
            "zero fuel",
            "/limits/fuel",
            json!(0),
            "spec.limits.fuel",
            "at least 1",
        ),
        (
            "bad selector operator",
            "/selector/matchExpressions/0/operator",
            json!("Like"),
            "spec.selector",
            "NotIn",
        ),
        (
            "empty target cluster",
            "/targetClusters/1",
            json!(""),
            "spec.targetClusters[1]",
            "ClusterPeer",
        ),
    ];
    for (what, pointer, value, path, word) in cases {
        let policy = with(pointer, value);
        let errors = validate_policy(&policy.spec).expect_err(what);
        assert_eq!(
            errors.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(),
            [path],
            "{what}: {errors:?}"
        );
        assert!(
            errors[0].message.contains(word),
            "{what}: {:?} lacks {word:?}",
            errors[0].message
        );
    }
}

#[test]
fn timeout_must_be_shorter_than_the_interval() {
    let mut policy = with("/interval", json!("2s"));
    policy.spec.limits.timeout = "2s".parse().unwrap();
    let errors = validate_policy(&policy.spec).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "spec.limits.timeout");
    assert!(
        errors[0]
            .message
            .contains("shorter than spec.interval (2s)")
    );
}

#[test]
fn errors_become_one_ready_false_condition() {
    let mut policy = with("/thresholds/minHourlySavings", json!(-1.0));
    policy.spec.module.url = Some("http://x".into());
    let errors = validate_policy(&policy.spec).unwrap_err();
    assert_eq!(errors.len(), 3, "{errors:?}"); // two sources, the http url, the threshold
    let now = Time(jiff::Timestamp::from_second(1_700_000_000).unwrap());
    let condition = invalid_spec_condition(&errors, Some(7), &now);
    assert_eq!(
        (condition.type_.as_str(), condition.status.as_str()),
        ("Ready", "False")
    );
    assert_eq!(condition.reason, "InvalidSpec");
    for error in &errors {
        assert!(
            condition.message.contains(&error.to_string()),
            "{}",
            condition.message
        );
    }
    assert!(condition.message.starts_with("the spec has 3 problems: "));
}

#[test]
fn an_oci_module_needs_no_digest_and_keeps_one_given() {
    let policy = with(
        "/module",
        json!({"oci": {"reference": "registry.example:5000/team/p:v1", "pullSecretName": "login"}}),
    );
    let validated = validate_policy(&policy.spec).unwrap();
    assert_eq!(validated.sha256, None);
    assert_eq!(
        validated.module.to_string(),
        "oci://registry.example:5000/team/p:v1"
    );
    let policy = with(
        "/module",
        json!({"oci": {"reference": format!("oci://registry.example/p@sha256:{DIGEST}")}, "sha256": DIGEST}),
    );
    assert_eq!(
        validate_policy(&policy.spec).unwrap().sha256.as_deref(),
        Some(DIGEST)
    );
}
