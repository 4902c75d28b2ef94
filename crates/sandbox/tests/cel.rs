//! CRD validation rules (`x-kubernetes-validations`): Ferry's real CRDs from
//! `crds/*.yaml` installed in a sandbox and driven with `kube::Client` (and
//! kubectl), checking the answers kube-apiserver gives: a 422 `Invalid`
//! Status naming the field, on create, update, patch, server-side apply and
//! the status subresource; transition rules only on update; a CRD with a
//! rule that does not compile refused.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds")
}

/// Every CRD Ferry ships, as `ferry crds` generates them.
async fn install_ferry_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut installed = 0;
    for entry in std::fs::read_dir(crds_dir()).expect("crds/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a CRD file");
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("a CRD");
        crds.create(&PostParams::default(), &crd)
            .await
            .unwrap_or_else(|e| panic!("{} is accepted: {e}", path.display()));
        installed += 1;
    }
    assert_eq!(
        installed, 3,
        "ClusterPeer, MigrationPolicy, WorkloadMigration"
    );
}

fn api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("ferry.dev", "v1alpha1", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(client.clone(), "default", &resource)
}

fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "ferry.dev/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec,
    }))
    .expect("an object")
}

fn policy(name: &str, module: Value) -> DynamicObject {
    object("MigrationPolicy", name, json!({"module": module}))
}

fn migration_spec() -> Value {
    json!({
        "requestId": "req-1", "role": "Target", "sourceCluster": "east", "targetCluster": "west",
        "deadline": "2030-01-01T00:00:00Z", "workload": {"kind": "Deployment"},
    })
}

/// The single cause of an `Invalid` answer, checked against upstream's shape.
fn only_cause(status: &kube::core::Status) -> (String, String, String) {
    assert_eq!(status.code, 422, "{status:?}");
    assert_eq!(status.reason, "Invalid", "{status:?}");
    let causes = &status.details.as_ref().expect("details").causes;
    assert_eq!(causes.len(), 1, "{status:?}");
    let cause = &causes[0];
    (
        cause.reason.clone(),
        cause.field.clone(),
        cause.message.clone(),
    )
}

#[tokio::test]
async fn a_policy_with_two_module_sources_or_none_is_refused_with_the_rule_message() {
    let cluster = common::start("cel-one-of").await;
    install_ferry_crds(&cluster.client).await;
    let policies = api(&cluster.client, "MigrationPolicy", "migrationpolicies");
    let pp = PostParams::default();

    let two = policy(
        "two",
        json!({"sha256": SHA, "url": "https://modules.example/p.wasm", "configMapKeyRef": {"name": "m", "key": "k"}}),
    );
    let status = common::status(policies.create(&pp, &two).await);
    assert_eq!(
        status.message,
        "MigrationPolicy.ferry.dev \"two\" is invalid: spec.module: Invalid value: \"object\": set exactly one of configMapKeyRef, secretKeyRef, url or oci"
    );
    let (reason, field, message) = only_cause(&status);
    assert_eq!(reason, "FieldValueInvalid");
    assert_eq!(field, "spec.module");
    assert_eq!(
        message,
        "Invalid value: \"object\": set exactly one of configMapKeyRef, secretKeyRef, url or oci"
    );

    let none = policy("none", json!({"sha256": SHA}));
    let (_, field, message) = only_cause(&common::status(policies.create(&pp, &none).await));
    assert_eq!(field, "spec.module");
    assert!(message.ends_with("set exactly one of configMapKeyRef, secretKeyRef, url or oci"));

    for (name, module) in [
        (
            "by-url",
            json!({"sha256": SHA, "url": "https://modules.example/p.wasm"}),
        ),
        (
            "by-configmap",
            json!({"sha256": SHA, "configMapKeyRef": {"name": "m", "key": "k"}}),
        ),
        (
            "by-secret",
            json!({"sha256": SHA, "secretKeyRef": {"name": "m", "key": "k"}}),
        ),
    ] {
        policies
            .create(&pp, &policy(name, module))
            .await
            .unwrap_or_else(|e| panic!("{name} has exactly one source: {e}"));
    }
    // A patch that adds a second source is refused too, and changes nothing.
    let add = json!({"spec": {"module": {"secretKeyRef": {"name": "s", "key": "k"}}}});
    let status = common::status(
        policies
            .patch("by-url", &PatchParams::default(), &Patch::Merge(&add))
            .await,
    );
    assert_eq!(only_cause(&status).1, "spec.module");
    let stored = policies.get("by-url").await.expect("still there");
    assert!(stored.data["spec"]["module"].get("secretKeyRef").is_none());

    // Nothing is stored for the refused ones.
    assert!(policies.get_opt("two").await.expect("a get").is_none());
    cluster.stop().await;
}

#[tokio::test]
async fn schema_causes_and_rule_causes_come_together_unless_the_schema_blocks_the_rules() {
    let cluster = common::start("cel-with-schema").await;
    install_ferry_crds(&cluster.client).await;
    let policies = api(&cluster.client, "MigrationPolicy", "migrationpolicies");
    let pp = PostParams::default();
    let causes = |status: &kube::core::Status| -> Vec<(String, String)> {
        let details = status.details.as_ref().expect("details");
        details
            .causes
            .iter()
            .map(|c| (c.field.clone(), c.message.clone()))
            .collect()
    };

    // A pattern violation does not block the rules: both are reported.
    let both = policy(
        "both",
        json!({"sha256": SHA, "url": "http://plain.example/p.wasm", "secretKeyRef": {"name": "s", "key": "k"}}),
    );
    let status = common::status(policies.create(&pp, &both).await);
    let fields: Vec<String> = causes(&status).into_iter().map(|(f, _)| f).collect();
    assert_eq!(fields, ["spec.module.url", "spec.module"], "{status:?}");

    // A missing required field does: the rules are not run, and a cause says so.
    let missing = policy(
        "missing",
        json!({"sha256": SHA, "url": "https://m.example/p.wasm", "secretKeyRef": {"name": "s"}}),
    );
    let status = common::status(policies.create(&pp, &missing).await);
    assert_eq!(
        causes(&status),
        [
            ("spec.module.secretKeyRef.key".to_string(), "Required value".to_string()),
            (
                "<nil>".to_string(),
                "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".to_string()
            ),
        ]
    );
    cluster.stop().await;
}

#[tokio::test]
async fn identity_fields_of_a_migration_are_immutable_on_update_patch_and_apply() {
    let cluster = common::start("cel-immutable").await;
    install_ferry_crds(&cluster.client).await;
    let migrations = api(&cluster.client, "WorkloadMigration", "workloadmigrations");
    let created = migrations
        .create(
            &PostParams::default(),
            &object("WorkloadMigration", "m", migration_spec()),
        )
        .await
        .expect("a migration is created");

    let immutable = |status: kube::core::Status, field: &str| {
        assert_eq!(
            status.message,
            format!(
                "WorkloadMigration.ferry.dev \"m\" is invalid: {field}: Invalid value: \"string\": is immutable"
            )
        );
        let (reason, cause_field, message) = only_cause(&status);
        assert_eq!(reason, "FieldValueInvalid");
        assert_eq!(cause_field, field);
        assert_eq!(message, "Invalid value: \"string\": is immutable");
    };

    // Update (PUT) of the whole object.
    let mut replaced = created.clone();
    replaced.data["spec"]["requestId"] = json!("req-2");
    immutable(
        common::status(
            migrations
                .replace("m", &PostParams::default(), &replaced)
                .await,
        ),
        "spec.requestId",
    );
    // Merge patch.
    let merge = json!({"spec": {"sourceCluster": "elsewhere"}});
    immutable(
        common::status(
            migrations
                .patch("m", &PatchParams::default(), &Patch::Merge(&merge))
                .await,
        ),
        "spec.sourceCluster",
    );
    // JSON patch (kube's typed JSON patch needs the json-patch crate; the
    // request is the same one a client sends).
    let ops = json!([{"op": "replace", "path": "/spec/targetCluster", "value": "north"}]);
    let request =
        http::Request::patch("/apis/ferry.dev/v1alpha1/namespaces/default/workloadmigrations/m")
            .header("Content-Type", "application/json-patch+json")
            .body(serde_json::to_vec(&ops).expect("JSON"))
            .expect("a request");
    immutable(
        common::status(cluster.client.request::<DynamicObject>(request).await),
        "spec.targetCluster",
    );
    // Server-side apply.
    let mut applied_spec = migration_spec();
    applied_spec["role"] = json!("Source");
    let applied = object("WorkloadMigration", "m", applied_spec);
    immutable(
        common::status(
            migrations
                .patch(
                    "m",
                    &PatchParams::apply("ferry-test").force(),
                    &Patch::Apply(&applied),
                )
                .await,
        ),
        "spec.role",
    );

    // Two identity fields at once: both are named.
    let both = json!({"spec": {"requestId": "x", "targetCluster": "y"}});
    let status = common::status(
        migrations
            .patch("m", &PatchParams::default(), &Patch::Merge(&both))
            .await,
    );
    let fields: Vec<&str> = status
        .details
        .as_ref()
        .expect("details")
        .causes
        .iter()
        .map(|c| c.field.as_str())
        .collect();
    assert_eq!(fields.len(), 2, "{status:?}");
    assert!(fields.contains(&"spec.requestId") && fields.contains(&"spec.targetCluster"));
    assert!(
        status.message.contains(": [spec."),
        "several causes are listed: {}",
        status.message
    );

    // Other fields may change, by every way in.
    let fine = json!({"spec": {"dryRun": true, "sourceAction": "Keep"}});
    migrations
        .patch("m", &PatchParams::default(), &Patch::Merge(&fine))
        .await
        .expect("a mutable field changes");
    let mut same_identity = migration_spec();
    same_identity["hourlySavings"] = json!(1.5);
    migrations
        .patch(
            "m",
            &PatchParams::apply("ferry-test").force(),
            &Patch::Apply(&object("WorkloadMigration", "m", same_identity)),
        )
        .await
        .expect("apply keeping the identity");
    let mut current = migrations.get("m").await.expect("get");
    current.data["spec"]["workload"] = json!({"kind": "StatefulSet"});
    migrations
        .replace("m", &PostParams::default(), &current)
        .await
        .expect("update keeping the identity");
    // Status writes see an unchanged spec: the rules pass.
    let status_patch = json!({"status": {"phase": "Accepted"}});
    migrations
        .patch_status("m", &PatchParams::default(), &Patch::Merge(&status_patch))
        .await
        .expect("status is written");

    let stored = migrations.get("m").await.expect("get");
    assert_eq!(stored.data["spec"]["requestId"], "req-1");
    assert_eq!(stored.data["spec"]["role"], "Target");
    assert_eq!(stored.data["spec"]["sourceAction"], "Keep");
    cluster.stop().await;
}

#[tokio::test]
async fn a_transition_rule_does_not_run_on_create() {
    let cluster = common::start("cel-create").await;
    install_ferry_crds(&cluster.client).await;
    let migrations = api(&cluster.client, "WorkloadMigration", "workloadmigrations");
    // `self == oldSelf` has no oldSelf on create: were it run, it could not
    // be evaluated and every create would be refused.
    migrations
        .create(
            &PostParams::default(),
            &object("WorkloadMigration", "by-create", migration_spec()),
        )
        .await
        .expect("created by POST");
    migrations
        .patch(
            "by-apply",
            &PatchParams::apply("ferry-test"),
            &Patch::Apply(&object("WorkloadMigration", "by-apply", migration_spec())),
        )
        .await
        .expect("created by server-side apply");
    // A dry run of a changed identity is refused like the real thing.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut changed = migrations.get("by-create").await.expect("get");
    changed.data["spec"]["requestId"] = json!("other");
    let status = common::status(migrations.replace("by-create", &dry, &changed).await);
    assert_eq!(only_cause(&status).1, "spec.requestId");
    cluster.stop().await;
}

/// A CRD of the tests' own, for what Ferry's CRDs do not use.
fn gadget_crd(rules: Value, status_rules: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.test.ferry.dev"},
        "spec": {"group": "test.ferry.dev", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "replicas": {"type": "integer"}, "max": {"type": "integer"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}}},
                        "x-kubernetes-validations": rules},
                    "status": {"type": "object", "properties": {"count": {"type": "integer"}},
                        "x-kubernetes-validations": status_rules}}}}}]}
    }))
    .expect("a CRD")
}

fn gadgets(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("test.ferry.dev", "v1", "Gadget");
    Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "gadgets"),
    )
}

fn gadget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "test.ferry.dev/v1", "kind": "Gadget",
        "metadata": {"name": name}, "spec": spec}))
    .expect("a gadget")
}

#[tokio::test]
async fn message_expression_field_path_and_reason_shape_the_answer() {
    let cluster = common::start("cel-message").await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let rules = json!([
        {"rule": "self.replicas <= self.max", "fieldPath": ".replicas",
         "messageExpression": "'replicas must be at most ' + string(self.max) + ', not ' + string(self.replicas)"},
        {"rule": "!has(self.labels) || self.labels.all(k, k.size() <= 8)", "reason": "FieldValueForbidden",
         "message": "label keys are at most 8 characters", "messageExpression": "self.nothing + 'x'"}
    ]);
    crds.create(&PostParams::default(), &gadget_crd(rules, json!([])))
        .await
        .expect("the CRD is accepted");
    let api = gadgets(&cluster.client);
    let pp = PostParams::default();

    let status = common::status(
        api.create(&pp, &gadget("big", json!({"replicas": 5, "max": 3})))
            .await,
    );
    assert_eq!(
        status.message,
        "Gadget.test.ferry.dev \"big\" is invalid: spec.replicas: Invalid value: \"object\": replicas must be at most 3, not 5"
    );
    assert_eq!(only_cause(&status).1, "spec.replicas");

    // A messageExpression that fails falls back to the message.
    let status = common::status(
        api.create(
            &pp,
            &gadget(
                "labels",
                json!({"replicas": 1, "max": 3, "labels": {"much-too-long": "x"}}),
            ),
        )
        .await,
    );
    let (reason, field, message) = only_cause(&status);
    assert_eq!(reason, "FieldValueForbidden");
    assert_eq!(field, "spec");
    assert_eq!(message, "Forbidden: label keys are at most 8 characters");

    api.create(
        &pp,
        &gadget(
            "fine",
            json!({"replicas": 3, "max": 3, "labels": {"app": "x"}}),
        ),
    )
    .await
    .expect("a valid gadget");
    cluster.stop().await;
}

#[tokio::test]
async fn rules_on_status_are_enforced_on_the_status_subresource() {
    let cluster = common::start("cel-status").await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let status_rules =
        json!([{"rule": "self.count >= oldSelf.count", "message": "count may not go down"}]);
    crds.create(&PostParams::default(), &gadget_crd(json!([]), status_rules))
        .await
        .expect("the CRD is accepted");
    let api = gadgets(&cluster.client);
    api.create(&PostParams::default(), &gadget("g", json!({"replicas": 1})))
        .await
        .expect("created");
    let set = |count: i64| json!({"status": {"count": count}});
    api.patch_status("g", &PatchParams::default(), &Patch::Merge(&set(5)))
        .await
        .expect("the first status has no old value to compare");
    api.patch_status("g", &PatchParams::default(), &Patch::Merge(&set(7)))
        .await
        .expect("count goes up");
    let status = common::status(
        api.patch_status("g", &PatchParams::default(), &Patch::Merge(&set(2)))
            .await,
    );
    let (_, field, message) = only_cause(&status);
    assert_eq!(field, "status");
    assert_eq!(message, "Invalid value: \"object\": count may not go down");
    let stored = api.get_status("g").await.expect("get");
    assert_eq!(stored.data["status"]["count"], 7);
    cluster.stop().await;
}

#[tokio::test]
async fn a_crd_with_a_rule_that_does_not_compile_is_refused() {
    let cluster = common::start("cel-bad-crd").await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    let pp = PostParams::default();

    let broken = gadget_crd(json!([{"rule": "self.replicas >"}]), json!([]));
    let status = common::status(crds.create(&pp, &broken).await);
    let (reason, field, message) = only_cause(&status);
    assert_eq!(reason, "FieldValueInvalid");
    assert_eq!(
        field,
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    );
    assert!(
        message.starts_with("Invalid value: apiextensions.ValidationRule{Rule:\"self.replicas >\""),
        "{message}"
    );
    assert!(
        message.contains(": compilation failed: ERROR: <input>:1:"),
        "{message}"
    );
    assert!(
        status.message.starts_with(
            "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.test.ferry.dev\" is invalid: spec.versions[0]"
        ),
        "{}",
        status.message
    );
    assert!(
        crds.get_opt("gadgets.test.ferry.dev")
            .await
            .expect("a get")
            .is_none()
    );

    let undeclared = gadget_crd(json!([{"rule": "self.replicas == replicas"}]), json!([]));
    let (_, _, message) = only_cause(&common::status(crds.create(&pp, &undeclared).await));
    assert!(
        message.contains("undeclared reference to 'replicas'"),
        "{message}"
    );

    // A valid CRD cannot be updated to a broken rule; its rule stays in force.
    let good = gadget_crd(
        json!([{"rule": "self.replicas >= 0", "message": "no negative replicas"}]),
        json!([]),
    );
    let stored = crds.create(&pp, &good).await.expect("a valid CRD");
    let mut bad_update = broken.clone();
    bad_update.metadata.resource_version = stored.metadata.resource_version.clone();
    let status = common::status(
        crds.replace("gadgets.test.ferry.dev", &pp, &bad_update)
            .await,
    );
    assert!(
        only_cause(&status)
            .1
            .ends_with("x-kubernetes-validations[0].rule")
    );
    let api = gadgets(&cluster.client);
    let (_, _, message) = only_cause(&common::status(
        api.create(&pp, &gadget("neg", json!({"replicas": -1})))
            .await,
    ));
    assert_eq!(message, "Invalid value: \"object\": no negative replicas");
    cluster.stop().await;
}

#[tokio::test]
async fn a_hostile_rule_is_refused_and_the_server_keeps_serving() {
    let cluster = common::start("cel-hostile").await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    // Deep enough to exhaust a request thread's stack if parsed or walked
    // there: it must become a 422, not a crash of the whole sandbox.
    let deep = format!("self.replicas {} >= 0", "+ 1 ".repeat(20_000));
    let status = common::status(
        crds.create(
            &PostParams::default(),
            &gadget_crd(json!([{"rule": deep}]), json!([])),
        )
        .await,
    );
    let (_, field, message) = only_cause(&status);
    assert!(
        field.ends_with("x-kubernetes-validations[0].rule"),
        "{field}"
    );
    assert!(
        message.contains("compilation failed: ERROR: <input>:1:")
            && message.contains("max recursion depth exceeded"),
        "{}",
        &message[..300.min(message.len())]
    );
    // Still serving, and a sane CRD of the same name is accepted.
    crds.create(
        &PostParams::default(),
        &gadget_crd(json!([{"rule": "self.replicas >= 0"}]), json!([])),
    )
    .await
    .expect("the sandbox still serves");
    cluster.stop().await;
}

/// kubectl from `FERRY_KUBECTL`, else the one on PATH.
fn kubectl(kubeconfig: &Path, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let binary = std::env::var("FERRY_KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let mut child = Command::new(&binary)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{binary} cannot run ({e}); set FERRY_KUBECTL or put kubectl on PATH")
        });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("manifest written");
    child.wait_with_output().expect("kubectl ends")
}

#[tokio::test]
async fn kubectl_shows_the_rule_message_for_a_refused_policy() {
    let cluster = common::start("cel-kubectl").await;
    install_ferry_crds(&cluster.client).await;
    let manifest = format!(
        "apiVersion: ferry.dev/v1alpha1\nkind: MigrationPolicy\nmetadata:\n  name: two\n  namespace: default\nspec:\n  module:\n    sha256: \"{SHA}\"\n    url: https://modules.example/p.wasm\n    secretKeyRef: {{name: m, key: k}}\n"
    );
    let path = cluster.kubeconfig_path();
    // kubectl blocks; the sandbox serves on this test's runtime meanwhile.
    let output =
        tokio::task::spawn_blocking(move || kubectl(&path, &["create", "-f", "-"], &manifest))
            .await
            .expect("kubectl ran");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "refused");
    assert!(
        stderr.contains("spec.module: Invalid value: \"object\": set exactly one of configMapKeyRef, secretKeyRef, url or oci"),
        "{stderr}"
    );
    cluster.stop().await;
}
