//! `ferry policy upload` and module reloads against a sandbox cluster.

mod support;
use support::modules::module;

use support::cluster as support_cluster;

use std::time::Duration;

use ferry::controller::module::{FetchScope, ModuleSlot, Reload};
use ferry::crd::{MigrationPolicy, PolicyMode, validate_policy};
use ferry::modules::upload::{
    MAX_CONFIG_MAP_MODULE_BYTES, MODULES_CONFIG_MAP, UploadError, UploadRequest, upload,
};
use ferry::policy::{Engine, EngineConfig, sha256_hex};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};

const NS: &str = "team";

fn request(bytes: Vec<u8>) -> UploadRequest {
    UploadRequest {
        namespace: NS.to_owned(),
        name: "cost".to_owned(),
        module: bytes,
        mode: None,
        thresholds: None,
        parameters: None,
    }
}

async fn keys(client: &kube::Client) -> Vec<String> {
    let map = Api::<ConfigMap>::namespaced(client.clone(), NS)
        .get(MODULES_CONFIG_MAP)
        .await
        .unwrap();
    map.binary_data.unwrap_or_default().into_keys().collect()
}

async fn policy(client: &kube::Client) -> MigrationPolicy {
    Api::<MigrationPolicy>::namespaced(client.clone(), NS)
        .get("cost")
        .await
        .unwrap()
}

fn scope(client: &kube::Client) -> FetchScope<'_> {
    FetchScope {
        client,
        operator_namespace: support_cluster::FERRY_NAMESPACE,
        max_module_bytes: 1 << 24,
    }
}

async fn cluster() -> support_cluster::TestCluster {
    let cluster = support_cluster::start_clusters(&["uploads"], Duration::from_millis(50))
        .await
        .remove(0);
    support_cluster::ensure_namespace(&cluster.client, NS).await;
    cluster
}

#[tokio::test]
async fn the_same_bytes_twice_change_nothing() {
    let cluster = cluster().await;
    let bytes = module("cheapest_cluster");
    let first = upload(&cluster.client, request(bytes.clone()))
        .await
        .unwrap();
    assert_eq!(first.changes.len(), 2, "{:?}", first.changes);
    let version = policy(&cluster.client).await.metadata.resource_version;

    let second = upload(&cluster.client, request(bytes.clone()))
        .await
        .unwrap();
    assert!(second.changes.is_empty(), "{:?}", second.changes);
    assert_eq!(
        policy(&cluster.client).await.metadata.resource_version,
        version
    );

    let spec = policy(&cluster.client).await.spec;
    assert_eq!(spec.module.sha256, sha256_hex(&bytes));
    assert_eq!(
        spec.mode,
        PolicyMode::DryRun,
        "a new policy starts in DryRun"
    );
    assert_eq!(
        keys(&cluster.client).await,
        [format!("{}.wasm", sha256_hex(&bytes))]
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_changed_module_replaces_the_reference_and_the_old_key_is_pruned() {
    let cluster = cluster().await;
    let mut first = request(module("cheapest_cluster"));
    first.mode = Some(PolicyMode::Enforce);
    first.parameters = serde_json::json!({"kept": true}).as_object().cloned();
    upload(&cluster.client, first).await.unwrap();

    let next = module("spot_aware");
    let report = upload(&cluster.client, request(next.clone()))
        .await
        .unwrap();
    assert!(
        report
            .changes
            .iter()
            .any(|c| c.starts_with("updated MigrationPolicy")),
        "{:?}",
        report.changes
    );
    assert!(
        report
            .changes
            .iter()
            .any(|c| c.starts_with("pruned unused key")),
        "{:?}",
        report.changes
    );
    let spec = policy(&cluster.client).await.spec;
    assert_eq!(spec.module.sha256, sha256_hex(&next));
    // What the upload did not mention is kept.
    assert_eq!(spec.mode, PolicyMode::Enforce);
    assert_eq!(spec.parameters["kept"], true);
    assert_eq!(
        keys(&cluster.client).await,
        [format!("{}.wasm", sha256_hex(&next))]
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn bytes_planted_under_a_digest_key_are_refused_by_the_loader_and_repaired_by_upload() {
    let cluster = cluster().await;
    let bytes = module("noop");
    upload(&cluster.client, request(bytes.clone()))
        .await
        .unwrap();
    let key = format!("{}.wasm", sha256_hex(&bytes));
    let planted = serde_json::json!({"binaryData": {&key: ByteString(module("testbed"))}});
    Api::<ConfigMap>::namespaced(cluster.client.clone(), NS)
        .patch(
            MODULES_CONFIG_MAP,
            &PatchParams::default(),
            &Patch::Merge(&planted),
        )
        .await
        .unwrap();

    // The operator's loader verifies the digest before compiling anything.
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let validated = validate_policy(&policy(&cluster.client).await.spec).unwrap();
    let mut slot = ModuleSlot::default();
    let reload = slot
        .ensure(&engine, &scope(&cluster.client), NS, "cost", &validated)
        .await;
    let Reload::Failed(err) = reload else {
        panic!("planted bytes must not load: {reload:?}")
    };
    assert_eq!(err.reason(), "DigestMismatch", "{err}");
    assert!(slot.active().is_none());

    let report = upload(&cluster.client, request(bytes.clone()))
        .await
        .unwrap();
    assert!(
        report
            .changes
            .iter()
            .any(|c| c.contains("did not match their digest")),
        "{:?}",
        report.changes
    );
    assert!(matches!(
        slot.ensure(&engine, &scope(&cluster.client), NS, "cost", &validated)
            .await,
        Reload::Replaced { .. }
    ));
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_module_too_large_for_a_config_map_points_to_the_url_source() {
    let cluster = cluster().await;
    let mut bytes = module("noop");
    bytes.resize(MAX_CONFIG_MAP_MODULE_BYTES + 1, 0);
    let err = upload(&cluster.client, request(bytes)).await.unwrap_err();
    assert!(matches!(err, UploadError::TooLargeForConfigMap { .. }));
    assert!(err.to_string().contains("spec.module.url"), "{err}");
    let maps = Api::<ConfigMap>::namespaced(cluster.client.clone(), NS);
    assert!(
        maps.get_opt(MODULES_CONFIG_MAP).await.unwrap().is_none(),
        "nothing was written"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_broken_new_module_leaves_the_old_one_running() {
    let cluster = cluster().await;
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let mut slot = ModuleSlot::default();
    let good = module("cheapest_cluster");
    upload(&cluster.client, request(good.clone()))
        .await
        .unwrap();
    let validated = validate_policy(&policy(&cluster.client).await.spec).unwrap();
    assert!(matches!(
        slot.ensure(&engine, &scope(&cluster.client), NS, "cost", &validated)
            .await,
        Reload::Replaced { previous: None }
    ));

    // Not a component at all.
    let mut broken = request(b"\0asm\x01\0\0\0".to_vec());
    broken.name = "cost".to_owned();
    upload(&cluster.client, broken).await.unwrap();
    let validated = validate_policy(&policy(&cluster.client).await.spec).unwrap();
    let Reload::Failed(err) = slot
        .ensure(&engine, &scope(&cluster.client), NS, "cost", &validated)
        .await
    else {
        panic!("a core module must not replace the policy")
    };
    assert_eq!(err.reason(), "LoadFailed", "{err}");
    assert_eq!(
        slot.active().unwrap().sha256,
        sha256_hex(&good),
        "the old module keeps running"
    );

    // A component that fails its smoke evaluation (parameters it rejects).
    let mut failing = request(module("testbed"));
    failing.parameters = serde_json::json!({"mode": "error"}).as_object().cloned();
    upload(&cluster.client, failing).await.unwrap();
    let validated = validate_policy(&policy(&cluster.client).await.spec).unwrap();
    let Reload::Failed(err) = slot
        .ensure(&engine, &scope(&cluster.client), NS, "cost", &validated)
        .await
    else {
        panic!("a module failing its smoke test must not replace the policy")
    };
    assert_eq!(err.reason(), "SmokeTestFailed", "{err}");
    assert_eq!(slot.active().unwrap().sha256, sha256_hex(&good));
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_api_server_rejects_a_spec_the_schema_forbids() {
    let cluster = cluster().await;
    let policies = Api::<MigrationPolicy>::namespaced(cluster.client.clone(), NS);
    let bad = serde_json::json!({
        "apiVersion": "ferry.dev/v1alpha1", "kind": "MigrationPolicy",
        "metadata": {"name": "bad", "namespace": NS},
        "spec": {
            "module": {"configMapKeyRef": {"name": "m", "key": "k"}, "sha256": "not-a-digest"},
            "thresholds": {"minSavingsPercent": -1},
        },
    });
    let err = policies
        .patch("bad", &PatchParams::apply("test"), &Patch::Apply(&bad))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("spec.module.sha256"),
        "{}",
        status.message
    );
    assert!(
        status.message.contains("spec.thresholds.minSavingsPercent"),
        "{}",
        status.message
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_plain_http_module_url_is_refused_before_any_request() {
    let cluster = cluster().await;
    let location = ferry::crd::ModuleLocation::Url("http://127.0.0.1:9/module.wasm".to_owned());
    let err =
        ferry::modules::source::fetch(&cluster.client, "ferry-system", NS, &location, 1 << 20)
            .await
            .unwrap_err();
    assert!(
        matches!(err, ferry::modules::source::SourceError::NotHttps(_)),
        "{err}"
    );
    cluster.shutdown().await;
}
