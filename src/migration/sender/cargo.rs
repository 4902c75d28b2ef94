//! What travels with a move (I/O, reads only): the sanitised workload, the
//! ConfigMaps and Secrets its pod template references, and its dependents
//! (the Services, PodDisruptionBudgets and NetworkPolicies that select only
//! its pods, the HorizontalPodAutoscalers that scale it, the ServiceAccount
//! its pods run as), read from this cluster.
//!
//! It must never change anything: starting a move only reads the source.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::Value;

use crate::admission::selects_only_workload;
use crate::migration::bundle::sanitize_dependent;

use crate::migration::error::{Error, Result};
use crate::migration::sanitize::{
    Objection, reasons, references, sanitize_config_object, sanitize_workload,
};
use crate::migration::workload::{CLAIM, claim_names, claims_from_templates, sanitize_claim};

/// What travels with a move, sanitised.
pub(super) struct Cargo {
    pub workload: Value,
    pub config_maps: Vec<Value>,
    pub secrets: Vec<Value>,
    pub dependents: Vec<Value>,
}

/// The claims `workload` (sanitised) mounts, as they travel: each read
/// from this cluster where it exists (it may have grown since it was
/// made), else, for a StatefulSet ordinal not made yet, from its claim
/// template. Created empty in the target either way.
pub(super) async fn load_claims(
    client: &Client,
    namespace: &str,
    workload: &Value,
) -> Result<Vec<Value>> {
    let names = claim_names(workload);
    let existing =
        fetch_all::<PersistentVolumeClaim>(client, namespace, &names, CLAIM, sanitize_claim)
            .await?;
    let mut out = Vec::new();
    for name in &names {
        let found = existing
            .iter()
            .find(|c| c.pointer("/metadata/name").and_then(Value::as_str) == Some(name));
        if let Some(found) = found {
            out.push(found.clone());
            continue;
        }
        let made = claims_from_templates(workload)
            .into_iter()
            .find(|c| c.pointer("/metadata/name").and_then(Value::as_str) == Some(name));
        match made {
            Some(claim) => out.push(claim),
            None => {
                return Err(Error::InvalidRequest {
                    name: name.clone(),
                    message: format!(
                        "the workload mounts PersistentVolumeClaim {namespace}/{name}, which does not exist"
                    ),
                });
            }
        }
    }
    Ok(out)
}

/// The sanitised workload and the ConfigMaps and Secrets it references, in
/// `namespace` of `client`'s cluster; refused when it references Secrets
/// and `allow_secret_copy` is off.
pub(super) async fn load_cargo(
    client: &Client,
    namespace: &str,
    allow_secret_copy: bool,
    manifest: &Value,
    name: &str,
) -> Result<Cargo> {
    let workload = sanitize_workload(manifest)?;
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
    let config_maps = fetch_all::<ConfigMap>(
        client,
        namespace,
        &refs.config_maps,
        "ConfigMap",
        sanitize_config_object,
    )
    .await?;
    let secrets = fetch_all::<Secret>(
        client,
        namespace,
        &refs.secrets,
        "Secret",
        sanitize_config_object,
    )
    .await?;
    let dependents = load_dependents(client, namespace, &workload, name).await?;
    Ok(Cargo {
        workload,
        config_maps,
        secrets,
        dependents,
    })
}

/// The workload's dependents in `namespace`, sanitised, in creation order
/// (`name` is the request's, for errors).
/// Objects that select more pods than the workload's (a namespace-wide
/// default-deny NetworkPolicy, a Service shared by several Deployments)
/// belong to the namespace and stay; the `default` ServiceAccount stays.
async fn load_dependents(
    client: &Client,
    namespace: &str,
    workload: &Value,
    name: &str,
) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let workload_name = workload
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let pod = workload.pointer("/spec/template/spec");
    let account = pod
        .and_then(|p| {
            p.get("serviceAccountName")
                .or_else(|| p.get("serviceAccount"))
        })
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty() && *a != "default");
    if let Some(account) = account {
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        let found = api
            .get_opt(account)
            .await
            .map_err(|e| Error::kube(format!("read ServiceAccount {namespace}/{account}"), e))?;
        if let Some(found) = found {
            out.push(dependent(&found, "v1", "ServiceAccount", name)?);
        }
    }
    let selects = |selector: Option<&Value>, service: bool| {
        selector.is_some_and(|s| selects_only_workload(workload, s, service))
    };
    for policy in list::<NetworkPolicy>(client, namespace, "NetworkPolicy").await? {
        let value = dependent(&policy, "networking.k8s.io/v1", "NetworkPolicy", name)?;
        if selects(value.pointer("/spec/podSelector"), false) {
            out.push(value);
        }
    }
    for budget in list::<PodDisruptionBudget>(client, namespace, "PodDisruptionBudget").await? {
        let value = dependent(&budget, "policy/v1", "PodDisruptionBudget", name)?;
        if selects(value.pointer("/spec/selector"), false) {
            out.push(value);
        }
    }
    for service in list::<Service>(client, namespace, "Service").await? {
        let value = dependent(&service, "v1", "Service", name)?;
        if selects(value.pointer("/spec/selector"), true) {
            out.push(value);
        }
    }
    let autoscalers =
        list::<HorizontalPodAutoscaler>(client, namespace, "HorizontalPodAutoscaler").await?;
    for autoscaler in autoscalers {
        let target = &autoscaler.spec.scale_target_ref;
        let kind = workload.get("kind").and_then(Value::as_str);
        let scales_it = Some(target.kind.as_str()) == kind
            && target.name == workload_name
            && target.api_version.as_deref().unwrap_or("apps/v1") == "apps/v1";
        if scales_it {
            out.push(dependent(
                &autoscaler,
                "autoscaling/v2",
                "HorizontalPodAutoscaler",
                name,
            )?);
        }
    }
    Ok(out)
}

/// Every object of `K` in `namespace`.
async fn list<K>(client: &Client, namespace: &str, kind: &str) -> Result<Vec<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube(format!("list {kind}s in {namespace}"), e))?;
    Ok(list.items)
}

/// One dependent as it travels.
fn dependent<K: serde::Serialize>(
    object: &K,
    api_version: &str,
    kind: &str,
    workload: &str,
) -> Result<Value> {
    let mut value = serde_json::to_value(object).map_err(|e| Error::InvalidRequest {
        name: workload.to_owned(),
        message: e.to_string(),
    })?;
    value["apiVersion"] = api_version.into();
    value["kind"] = kind.into();
    Ok(sanitize_dependent(&value)?)
}

/// The referenced objects that exist, sanitised. A missing one is left out:
/// the target then behaves as the source does (an optional reference, or a
/// pod that cannot start in either cluster).
async fn fetch_all<K>(
    client: &Client,
    namespace: &str,
    names: &std::collections::BTreeSet<String>,
    kind: &str,
    sanitize: fn(&Value) -> Result<Value, Objection>,
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
        out.push(sanitize(&value)?);
    }
    Ok(out)
}
