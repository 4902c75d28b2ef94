//! The generated CRDs carry the rules an API server enforces: ranges,
//! patterns, enums, defaults, CEL, list-map conditions, and a structural
//! schema. (A live test against the sandbox API server comes separately.)

use ferry::crd::{ClusterPeer, DURATION_PATTERN, MigrationPolicy, WorkloadMigration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

fn schema(crd: &CustomResourceDefinition) -> Value {
    let version = &crd.spec.versions[0];
    serde_json::to_value(&version.schema.as_ref().unwrap().open_api_v3_schema).unwrap()
}

/// The schema of a property, by dotted path from the root (`spec.module.url`).
fn at<'a>(schema: &'a Value, path: &str) -> &'a Value {
    let mut node = schema;
    for part in path.split('.') {
        node = if part == "[]" {
            &node["items"]
        } else {
            &node["properties"][part]
        };
        assert!(!node.is_null(), "no schema at {path} (stopped at {part})");
    }
    node
}

fn policy() -> Value {
    schema(&MigrationPolicy::crd())
}

#[test]
fn module_needs_exactly_one_source_by_cel() {
    let schema = policy();
    let module = at(&schema, "spec.module");
    let rules = module["x-kubernetes-validations"].as_array().unwrap();
    assert_eq!(rules.len(), 2);
    let rule = rules[0]["rule"].as_str().unwrap();
    for field in ["configMapKeyRef", "secretKeyRef", "url", "oci"] {
        assert!(rule.contains(&format!("has(self.{field})")), "{rule}");
    }
    assert!(rule.ends_with("== 1"), "{rule}");
    assert!(
        rules[0]["message"]
            .as_str()
            .unwrap()
            .contains("exactly one")
    );
    // sha256 is required by CEL unless the module comes from a registry,
    // whose manifest digest pins it.
    assert_eq!(module["required"], Value::Null);
    assert_eq!(rules[1]["rule"], "has(self.oci) || has(self.sha256)");
}

#[test]
fn digest_and_url_have_patterns() {
    let s = policy();
    assert_eq!(at(&s, "spec.module.sha256")["pattern"], "^[0-9a-f]{64}$");
    assert_eq!(at(&s, "spec.module.url")["pattern"], "^https://");
    assert_eq!(at(&s, "spec.module.configMapKeyRef.name")["minLength"], 1);
}

#[test]
fn durations_have_the_grammar_and_defaults() {
    let s = policy();
    for (path, default) in [
        ("spec.interval", "5m"),
        ("spec.thresholds.cooldown", "1h"),
        ("spec.limits.timeout", "1s"),
    ] {
        let node = at(&s, path);
        assert_eq!(node["type"], "string", "{path}");
        assert_eq!(node["pattern"], DURATION_PATTERN, "{path}");
        assert_eq!(node["default"], default, "{path}");
    }
    let peer = schema(&ClusterPeer::crd());
    assert_eq!(at(&peer, "spec.probeInterval")["pattern"], DURATION_PATTERN);
    assert_eq!(at(&peer, "spec.probeInterval")["default"], "30s");
}

#[test]
fn thresholds_have_ranges_and_defaults() {
    let s = policy();
    // (field, minimum, maximum, default)
    let cases: [(&str, f64, Option<f64>, f64); 8] = [
        ("minHourlySavings", 0.0, None, 0.05),
        ("minSavingsPercent", 0.0, Some(100.0), 10.0),
        ("maxTargetCpuUtilizationPercent", 0.0, Some(100.0), 80.0),
        ("maxTargetMemoryUtilizationPercent", 0.0, Some(100.0), 80.0),
        ("maxMigrationsPerCycle", 0.0, None, 5.0),
        ("maxInFlight", 0.0, None, 10.0),
        ("migrationCost", 0.0, None, 0.0),
        ("maxPaybackHours", 0.0, None, 24.0),
    ];
    for (field, min, max, default) in cases {
        let node = at(&s, &format!("spec.thresholds.{field}"));
        assert_eq!(node["minimum"].as_f64(), Some(min), "{field}");
        assert_eq!(node["maximum"].as_f64(), max, "{field}");
        assert_eq!(node["default"].as_f64(), Some(default), "{field}");
        assert!(
            !node["description"].as_str().unwrap_or_default().is_empty(),
            "{field}"
        );
    }
}

#[test]
fn limits_are_capped() {
    let s = policy();
    let memory = at(&s, "spec.limits.memoryBytes");
    assert_eq!(memory["maximum"].as_f64(), Some(1_073_741_824.0));
    assert_eq!(memory["minimum"].as_f64(), Some(1_048_576.0));
    assert_eq!(memory["default"], 64 * 1024 * 1024);
    assert_eq!(at(&s, "spec.limits.fuel")["minimum"].as_f64(), Some(1.0));
}

#[test]
fn enums_list_their_values_with_safe_defaults() {
    let s = policy();
    assert_eq!(at(&s, "spec.mode")["enum"], json!(["Enforce", "DryRun"]));
    assert_eq!(at(&s, "spec.mode")["default"], "DryRun");
    assert_eq!(
        at(&s, "spec.sourceAction")["enum"],
        json!(["ScaleToZero", "Delete", "Keep"])
    );
    assert_eq!(at(&s, "spec.sourceAction")["default"], "ScaleToZero");
    assert_eq!(at(&s, "spec.allowSecretCopy")["default"], false);
    assert_eq!(
        at(&s, "status.lastDecisions.[].outcome")["enum"],
        json!(["Accepted", "WouldMigrate", "Refused"])
    );
    let wmig = schema(&WorkloadMigration::crd());
    assert_eq!(
        at(&wmig, "status.phase")["enum"],
        json!([
            "Pending",
            "Accepted",
            "Progressing",
            "Ready",
            "Completed",
            "Failed",
            "Rejected",
            "RolledBack"
        ])
    );
    assert_eq!(at(&wmig, "spec.role")["enum"], json!(["Source", "Target"]));
    let peer = schema(&ClusterPeer::crd());
    assert_eq!(at(&peer, "spec.acceptFrom")["default"], false);
    for switch in [
        "skipTLSVerify",
        "plainHTTP",
        "credentialsOverPlainHTTP",
        "localFiles",
        "credentialPlugins",
    ] {
        assert_eq!(
            at(&peer, &format!("spec.insecure.{switch}"))["default"],
            false,
            "{switch}"
        );
    }
    assert!(
        at(&peer, "spec")["properties"]["allowInsecure"].is_null(),
        "allowInsecure is gone, not deprecated"
    );
    let rules = at(&peer, "spec.insecure")["x-kubernetes-validations"]
        .as_array()
        .expect("a CEL rule on spec.insecure");
    assert_eq!(
        rules[0]["rule"],
        "!self.credentialsOverPlainHTTP || self.plainHTTP"
    );
}

#[test]
fn free_json_is_preserved() {
    let s = policy();
    let parameters = at(&s, "spec.parameters");
    assert_eq!(parameters["type"], "object");
    assert_eq!(parameters["x-kubernetes-preserve-unknown-fields"], true);
    let wmig = schema(&WorkloadMigration::crd());
    for path in ["spec.workload", "spec.configMaps.[]", "spec.secrets.[]"] {
        assert_eq!(
            at(&wmig, path)["x-kubernetes-preserve-unknown-fields"],
            true,
            "{path}"
        );
    }
}

#[test]
fn workload_migration_identity_is_immutable() {
    let wmig = schema(&WorkloadMigration::crd());
    for field in ["requestId", "sourceCluster", "targetCluster", "role"] {
        let rules = &at(&wmig, &format!("spec.{field}"))["x-kubernetes-validations"];
        assert_eq!(rules[0]["rule"], "self == oldSelf", "{field}");
    }
    let required = at(&wmig, "spec")["required"].as_array().unwrap().clone();
    for field in [
        "requestId",
        "sourceCluster",
        "targetCluster",
        "workload",
        "deadline",
        "role",
    ] {
        assert!(
            required.contains(&json!(field)),
            "{field} should be required"
        );
    }
}

#[test]
fn conditions_are_list_maps_keyed_by_type_and_decisions_are_bounded() {
    for crd in [
        ClusterPeer::crd(),
        MigrationPolicy::crd(),
        WorkloadMigration::crd(),
    ] {
        let s = schema(&crd);
        let conditions = at(&s, "status.conditions");
        assert_eq!(
            conditions["x-kubernetes-list-type"], "map",
            "{}",
            crd.spec.names.kind
        );
        assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
        assert!(
            conditions["items"]["required"]
                .as_array()
                .unwrap()
                .contains(&json!("type"))
        );
    }
    let schema = policy();
    assert_eq!(at(&schema, "status.lastDecisions")["maxItems"], 20);
}

/// Kubernetes accepts only structural schemas: every node typed (or
/// explicitly preserving unknown fields), no `$ref`, no `anyOf`/`oneOf` left
/// over from Rust enums and options.
fn assert_structural(node: &Value, path: &str) {
    let Some(object) = node.as_object() else {
        return;
    };
    for forbidden in ["$ref", "anyOf", "oneOf", "allOf", "$defs", "definitions"] {
        assert!(!object.contains_key(forbidden), "{path} has {forbidden}");
    }
    assert!(
        object.contains_key("type")
            || object.contains_key("x-kubernetes-preserve-unknown-fields")
            // Kubernetes' one untyped leaf: an integer or a string.
            || object.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)),
        "{path} has no type"
    );
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            assert_structural(child, &format!("{path}.{name}"));
        }
    }
    if let Some(items) = object.get("items") {
        assert_structural(items, &format!("{path}[]"));
    }
    if let Some(additional) = object.get("additionalProperties").filter(|v| v.is_object()) {
        assert_structural(additional, &format!("{path}{{}}"));
    }
}

#[test]
fn schemas_are_structural() {
    for crd in ferry::crd::all() {
        assert_structural(&schema(&crd), &crd.spec.names.kind);
    }
}

#[test]
fn names_columns_and_subresources() {
    let cases = [
        (
            ClusterPeer::crd(),
            "Cluster",
            "cpeer",
            vec!["Region", "Ready", "Connected", "Age"],
        ),
        (
            MigrationPolicy::crd(),
            "Namespaced",
            "mpol",
            vec![
                "Mode",
                "Module",
                "Ready",
                "Degraded",
                "Saving/h",
                "Last Cycle",
                "Age",
            ],
        ),
        (
            WorkloadMigration::crd(),
            "Namespaced",
            "wmig",
            vec!["Workload", "Phase", "Source", "Target", "Age"],
        ),
    ];
    for (crd, scope, short, columns) in cases {
        let kind = &crd.spec.names.kind;
        assert_eq!(crd.spec.group, "ferry.dev");
        assert_eq!(crd.spec.scope, scope, "{kind}");
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec![short.to_owned()]),
            "{kind}"
        );
        assert_eq!(
            crd.spec.names.categories,
            Some(vec!["ferry".to_owned()]),
            "{kind}"
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(
            version.subresources.as_ref().unwrap().status.is_some(),
            "{kind}"
        );
        let shown: Vec<&str> = version
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .filter(|c| c.priority.unwrap_or(0) == 0)
            .map(|c| c.name.as_str())
            .collect();
        for column in columns {
            assert!(
                shown.contains(&column),
                "{kind} lacks column {column}: {shown:?}"
            );
        }
    }
}
