//! What travels with a move (I/O, reads only): the sanitised workload and
//! the ConfigMaps and Secrets its pod template references, read from this
//! cluster.
//!
//! It must never change anything: starting a move only reads the source.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use serde_json::Value;

use crate::migration::error::{Error, Result};
use crate::migration::sanitize::{
    Objection, reasons, references, sanitize_config_object, sanitize_workload,
};

/// What travels with a move, sanitised.
pub(super) struct Cargo {
    pub workload: Value,
    pub config_maps: Vec<Value>,
    pub secrets: Vec<Value>,
}

/// The sanitised workload and the ConfigMaps and Secrets it references, in
/// `namespace` of `client`'s cluster; refused when it references Secrets
/// and `allow_secret_copy` is off.
pub(super) async fn load_cargo(
    client: &Client,
    namespace: &str,
    allow_secret_copy: bool,
    deployment: &Deployment,
    name: &str,
) -> Result<Cargo> {
    let manifest = serde_json::to_value(deployment).map_err(|e| Error::InvalidRequest {
        name: name.to_owned(),
        message: e.to_string(),
    })?;
    let mut manifest = manifest;
    manifest["apiVersion"] = "apps/v1".into();
    manifest["kind"] = "Deployment".into();
    let workload = sanitize_workload(&manifest)?;
    let refs = references(&workload);
    if !refs.secrets.is_empty() && !allow_secret_copy {
        return Err(Objection::new(
            reasons::SECRETS_NOT_ALLOWED,
            format!(
                "the pod template references Secrets ({}) and the policy does not set allowSecretCopy",
                refs.secrets.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        )
        .into());
    }
    let config_maps =
        fetch_all::<ConfigMap>(client, namespace, &refs.config_maps, "ConfigMap").await?;
    let secrets = fetch_all::<Secret>(client, namespace, &refs.secrets, "Secret").await?;
    Ok(Cargo {
        workload,
        config_maps,
        secrets,
    })
}

/// The referenced objects that exist, sanitised. A missing one is left out:
/// the target then behaves as the source does (an optional reference, or a
/// pod that cannot start in either cluster).
async fn fetch_all<K>(
    client: &Client,
    namespace: &str,
    names: &std::collections::BTreeSet<String>,
    kind: &str,
) -> Result<Vec<Value>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let mut out = Vec::new();
    for name in names {
        let Some(object) = api
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("read {kind} {namespace}/{name}"), e))?
        else {
            continue;
        };
        let mut value = serde_json::to_value(&object).map_err(|e| Error::InvalidRequest {
            name: name.clone(),
            message: e.to_string(),
        })?;
        value["apiVersion"] = "v1".into();
        value["kind"] = kind.into();
        out.push(sanitize_config_object(&value)?);
    }
    Ok(out)
}
