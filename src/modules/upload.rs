//! `ferry policy upload`: put a checked module into the cluster and point a
//! `MigrationPolicy` at it.
//!
//! The bytes go into the ConfigMap `ferry-modules` under a key named by their
//! digest *before* the policy refers to them, so the operator never sees a
//! digest whose bytes are missing or different. Keys no policy of the
//! namespace refers to any more are pruned afterwards.

use std::collections::BTreeSet;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};

use crate::crd::{
    LimitsSpec, LocalKeyRef, MigrationPolicy, MigrationPolicySpec, ModuleSource, PolicyMode,
    SourceAction, ThresholdsSpec,
};
use crate::policy::sha256_hex;

/// The ConfigMap that holds uploaded modules, one per namespace.
pub const MODULES_CONFIG_MAP: &str = "ferry-modules";
/// Field manager of the policies `upload` writes.
pub const FIELD_MANAGER: &str = "ferry-policy-upload";
/// Largest module a ConfigMap can carry: an object may not exceed 1 MiB and
/// base64 makes binary data a third larger.
pub const MAX_CONFIG_MAP_MODULE_BYTES: usize = 768 * 1024;

/// What to upload and how the policy should look afterwards. `None` keeps
/// what an existing policy has (or the defaults for a new one).
#[derive(Clone, Debug)]
pub struct UploadRequest {
    pub namespace: String,
    pub name: String,
    pub module: Vec<u8>,
    pub mode: Option<PolicyMode>,
    pub thresholds: Option<ThresholdsSpec>,
    pub parameters: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error(
        "the module is {size} bytes; a ConfigMap holds at most {MAX_CONFIG_MAP_MODULE_BYTES} bytes of binary data. \
         Push it to a registry with `ferry policy push` and set spec.module.oci, or serve it over https and set spec.module.url with spec.module.sha256: {sha256}"
    )]
    TooLargeForConfigMap { size: usize, sha256: String },
    #[error("namespace {0} does not exist; create it, or pass the namespace the policy belongs in")]
    NamespaceMissing(String),
    #[error(
        "the cluster has no MigrationPolicy resource: Ferry's CustomResourceDefinitions are not \
         installed (install the chart, or `ferry crds | kubectl apply -f -`)"
    )]
    CrdMissing,
    #[error("{action}")]
    Api {
        action: String,
        #[source]
        source: kube::Error,
    },
}

/// What an upload did, one line per change; empty when nothing changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UploadReport {
    pub sha256: String,
    pub changes: Vec<String>,
}

fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> UploadError {
    let action = action.into();
    move |source| UploadError::Api { action, source }
}

/// Uploads the module and creates or updates the policy.
pub async fn upload(
    client: &kube::Client,
    request: UploadRequest,
) -> Result<UploadReport, UploadError> {
    let sha256 = sha256_hex(&request.module);
    if request.module.len() > MAX_CONFIG_MAP_MODULE_BYTES {
        return Err(UploadError::TooLargeForConfigMap {
            size: request.module.len(),
            sha256,
        });
    }
    let namespace = request.namespace.as_str();
    let key = format!("{sha256}.wasm");
    let mut report = UploadReport {
        sha256: sha256.clone(),
        changes: Vec::new(),
    };

    check_preconditions(client, namespace).await?;
    store_module(client, namespace, &key, &request.module, &mut report).await?;

    let policies: Api<MigrationPolicy> = Api::namespaced(client.clone(), namespace);
    let existing = policies
        .get_opt(&request.name)
        .await
        .map_err(api_error(format!(
            "reading MigrationPolicy {namespace}/{}",
            request.name
        )))?;
    let old_spec = existing.map(|policy| policy.spec);
    let spec = desired_spec(old_spec.as_ref(), &request, &key, &sha256);
    if old_spec.as_ref() != Some(&spec) {
        let object = MigrationPolicy::new(&request.name, spec);
        let mut value = serde_json::to_value(&object).map_err(|e| UploadError::Api {
            action: "encoding the MigrationPolicy".to_owned(),
            source: kube::Error::SerdeError(e),
        })?;
        value["metadata"]["namespace"] = namespace.into();
        policies
            .patch(
                &request.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&value),
            )
            .await
            .map_err(api_error(format!(
                "applying MigrationPolicy {namespace}/{}",
                request.name
            )))?;
        report.changes.push(match old_spec {
            None => format!(
                "created MigrationPolicy {namespace}/{} using module {}",
                request.name,
                &sha256[..12]
            ),
            Some(_) => format!(
                "updated MigrationPolicy {namespace}/{} (module {})",
                request.name,
                &sha256[..12]
            ),
        });
    }

    prune(client, namespace, &mut report).await?;
    Ok(report)
}

/// Nothing is written unless the namespace exists and the cluster knows
/// MigrationPolicies, so a failed upload leaves no ConfigMap behind. A
/// user who may not read namespaces skips that check; the write then says.
async fn check_preconditions(client: &kube::Client, namespace: &str) -> Result<(), UploadError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces.get_opt(namespace).await {
        Ok(Some(_)) => {}
        Ok(None) => return Err(UploadError::NamespaceMissing(namespace.to_owned())),
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        Err(source) => {
            return Err(UploadError::Api {
                action: format!("reading namespace {namespace}"),
                source,
            });
        }
    }
    let policies: Api<MigrationPolicy> = Api::namespaced(client.clone(), namespace);
    match policies.list(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(UploadError::CrdMissing),
        Err(source) => Err(UploadError::Api {
            action: format!("listing MigrationPolicies in {namespace}"),
            source,
        }),
    }
}

/// The policy's spec after the upload: the existing one (or defaults) with
/// the new module and whatever the request sets.
fn desired_spec(
    old: Option<&MigrationPolicySpec>,
    request: &UploadRequest,
    key: &str,
    sha256: &str,
) -> MigrationPolicySpec {
    let module = ModuleSource {
        config_map_key_ref: Some(LocalKeyRef {
            name: MODULES_CONFIG_MAP.to_owned(),
            key: key.to_owned(),
        }),
        secret_key_ref: None,
        url: None,
        oci: None,
        sha256: sha256.to_owned(),
    };
    let mut spec = match old {
        Some(old) => MigrationPolicySpec {
            module,
            ..old.clone()
        },
        None => MigrationPolicySpec {
            module,
            mode: PolicyMode::default(),
            interval: crate::crd::Duration::new("5m"),
            selector: None,
            thresholds: ThresholdsSpec::default(),
            parameters: serde_json::Map::new(),
            limits: LimitsSpec::default(),
            allow_secret_copy: false,
            source_action: SourceAction::default(),
            strategy: None,
            stateful: None,
            target_clusters: Vec::new(),
        },
    };
    if let Some(mode) = request.mode {
        spec.mode = mode;
    }
    if let Some(thresholds) = &request.thresholds {
        spec.thresholds = thresholds.clone();
    }
    if let Some(parameters) = &request.parameters {
        spec.parameters = parameters.clone();
    }
    spec
}

/// Puts the bytes under `key`, creating the ConfigMap when needed. Bytes
/// found under the key that do not match it (planted by hand) are replaced.
async fn store_module(
    client: &kube::Client,
    namespace: &str,
    key: &str,
    module: &[u8],
    report: &mut UploadReport,
) -> Result<(), UploadError> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let what = format!("ConfigMap {namespace}/{MODULES_CONFIG_MAP}");
    let existing = maps
        .get_opt(MODULES_CONFIG_MAP)
        .await
        .map_err(api_error(format!("reading {what}")))?;
    match existing {
        None => {
            let map = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some(MODULES_CONFIG_MAP.to_owned()),
                    labels: Some(
                        [(
                            "app.kubernetes.io/managed-by".to_owned(),
                            "ferry".to_owned(),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                },
                binary_data: Some([(key.to_owned(), ByteString(module.to_vec()))].into()),
                ..Default::default()
            };
            maps.create(&PostParams::default(), &map)
                .await
                .map_err(api_error(format!("creating {what}")))?;
            report
                .changes
                .push(format!("created {what} with key {key}"));
        }
        Some(map) => {
            let current = map.binary_data.as_ref().and_then(|data| data.get(key));
            if current.is_some_and(|bytes| bytes.0 == module) {
                return Ok(());
            }
            let patch = serde_json::json!({ "binaryData": { key: ByteString(module.to_vec()) } });
            maps.patch(
                MODULES_CONFIG_MAP,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(api_error(format!("storing key {key} in {what}")))?;
            report.changes.push(match current {
                Some(_) => format!(
                    "replaced the bytes under {key} in {what}: they did not match their digest"
                ),
                None => format!("stored key {key} in {what}"),
            });
        }
    }
    Ok(())
}

/// Removes module keys that no policy of the namespace refers to.
async fn prune(
    client: &kube::Client,
    namespace: &str,
    report: &mut UploadReport,
) -> Result<(), UploadError> {
    let policies: Api<MigrationPolicy> = Api::namespaced(client.clone(), namespace);
    let referenced: BTreeSet<String> = policies
        .list(&ListParams::default())
        .await
        .map_err(api_error(format!(
            "listing MigrationPolicies in {namespace}"
        )))?
        .into_iter()
        .filter_map(|policy| policy.spec.module.config_map_key_ref)
        .filter(|key_ref| key_ref.name == MODULES_CONFIG_MAP)
        .map(|key_ref| key_ref.key)
        .collect();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(map) = maps
        .get_opt(MODULES_CONFIG_MAP)
        .await
        .map_err(api_error(format!(
            "reading ConfigMap {namespace}/{MODULES_CONFIG_MAP}"
        )))?
    else {
        return Ok(());
    };
    let unused: Vec<String> = map
        .binary_data
        .into_iter()
        .flatten()
        .map(|(key, _)| key)
        .filter(|key| !referenced.contains(key))
        .collect();
    if unused.is_empty() {
        return Ok(());
    }
    let removals: serde_json::Map<String, serde_json::Value> = unused
        .iter()
        .map(|key| (key.clone(), serde_json::Value::Null))
        .collect();
    let patch = serde_json::json!({ "binaryData": removals });
    maps.patch(
        MODULES_CONFIG_MAP,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(api_error(format!(
        "pruning ConfigMap {namespace}/{MODULES_CONFIG_MAP}"
    )))?;
    for key in unused {
        report.changes.push(format!(
            "pruned unused key {key} from ConfigMap {namespace}/{MODULES_CONFIG_MAP}"
        ));
    }
    Ok(())
}
