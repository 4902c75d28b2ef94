//! The sending half of a join, in cluster Y for a receiving cluster X: the
//! kubeconfig Secret built from X's grant, and the ClusterPeer X that
//! references it and lists X's public keys.
//!
//! It must never write from a grant it has not validated, never change a
//! ClusterPeer field join does not own (acceptFrom and allowedNamespaces
//! only when asked), and never swap the keys Y trusts for X for keys that
//! share nothing with them unless the person says so.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::ObjectMeta;
use kube::{Api, Client};
use serde_json::{Value, json};

use super::Change;
use super::error::{JoinError, Result};
use super::grant::{Grant, check_url};
use super::names::{Install, LABEL_PEER, check_label};
use super::write::{Target, ensure};
use crate::crd::{ClusterPeer, ClusterPeerSpec, SecretKeyRef};

/// The key of the kubeconfig in the Secret join writes.
const KUBECONFIG_KEY: &str = "kubeconfig";

/// How the accepting cluster describes and treats the granting one. Each
/// `Some` (or non-empty) value is written; the rest is left as it is.
#[derive(Clone, Debug, Default)]
pub struct AcceptOptions {
    /// The accepting cluster's own name, for messages.
    pub cluster: String,
    /// Overrides the grant's region.
    pub region: Option<String>,
    /// Added to the grant's labels (these win on the same key).
    pub labels: BTreeMap<String, String>,
    /// Overrides the grant's Prometheus URL.
    pub prometheus: Option<String>,
    /// `acceptFrom`: may the granting cluster send workloads here.
    pub accept_from: Option<bool>,
    /// `allowedNamespaces` (an empty list allows none).
    pub allowed_namespaces: Option<Vec<String>>,
    /// Permit plain http (local test clusters only); also sets the peer's
    /// `spec.insecure.plainHTTP` and `credentialsOverPlainHTTP`.
    pub allow_insecure: bool,
    /// Trust the grant's keys even when they share none with the keys
    /// already trusted for that cluster.
    pub replace_keys: bool,
}

/// Stores `grant` in the cluster `client` reaches (the admin's): the
/// kubeconfig Secret and the ClusterPeer for the granting cluster.
pub async fn accept(
    client: &Client,
    install: &Install,
    grant: &Grant,
    options: &AcceptOptions,
    dry_run: bool,
) -> Result<Vec<Change>> {
    // A dry run's grant has no token yet; everything else must hold.
    if !(dry_run && grant.token.is_empty()) {
        grant.validate(options.allow_insecure)?;
    }
    if let Some(url) = &options.prometheus {
        check_url("--prometheus", url, options.allow_insecure)?;
    }
    if options.region.as_deref().is_some_and(str::is_empty) {
        return Err(JoinError::invalid("--region", "is empty"));
    }
    if let Some(namespaces) = &options.allowed_namespaces {
        for (i, namespace) in namespaces.iter().enumerate() {
            check_label(&format!("--allowed-namespace[{i}]"), namespace)?;
        }
    }
    let target = Target {
        cluster: &options.cluster,
        dry_run,
    };
    Api::<Namespace>::all(client.clone())
        .get_opt(&install.namespace)
        .await
        .map_err(target.kube_error(format!("read Namespace {}", install.namespace)))?
        .ok_or_else(|| {
            JoinError::invalid(
                "--ferry-namespace",
                format!(
                    "namespace {} does not exist in cluster {}: install Ferry's chart there first, \
                     or pass the namespace it is installed in",
                    install.namespace, options.cluster
                ),
            )
        })?;
    let peers: Api<ClusterPeer> = Api::all(client.clone());
    let existing = peers
        .get_opt(&grant.cluster)
        .await
        .map_err(target.kube_error(format!(
            "read ClusterPeer {} (are Ferry's CRDs installed?)",
            grant.cluster
        )))?;
    match &existing {
        Some(existing) => check_keys(&options.cluster, existing, grant, options.replace_keys)?,
        None if options.region.is_none() && grant.region.is_none() => {
            return Err(JoinError::invalid(
                "--region",
                format!(
                    "ClusterPeer {} does not exist in cluster {} yet and needs the region of {}: \
                     pass --region",
                    grant.cluster, options.cluster, grant.cluster
                ),
            ));
        }
        None => {}
    }
    let secret = ensure_secret(client, install, &target, grant).await?;
    let peer = ensure_peer(&peers, &target, install, grant, options).await?;
    Ok(vec![secret, peer])
}

/// Refuses keys unrelated to those already trusted: a rotation keeps the
/// previous key in the list, so a genuine grant always shares one.
fn check_keys(cluster: &str, existing: &ClusterPeer, grant: &Grant, replace: bool) -> Result<()> {
    let trusted: Vec<String> = existing
        .spec
        .public_keys
        .iter()
        .map(|k| k.key_id.clone())
        .collect();
    let offered: Vec<String> = grant.public_keys.iter().map(|k| k.key_id.clone()).collect();
    if replace
        || trusted.is_empty()
        || offered.is_empty()
        || offered.iter().any(|k| trusted.contains(k))
    {
        return Ok(());
    }
    Err(JoinError::UnrelatedKeys {
        cluster: cluster.to_owned(),
        peer: grant.cluster.clone(),
        offered,
        trusted,
    })
}

async fn ensure_secret(
    client: &Client,
    install: &Install,
    target: &Target<'_>,
    grant: &Grant,
) -> Result<Change> {
    let name = install.kubeconfig_secret(&grant.cluster);
    let kubeconfig = grant.kubeconfig()?;
    let desired = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(install.namespace.clone()),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_owned(), "ferry".to_owned()),
                (LABEL_PEER.to_owned(), grant.cluster.clone()),
            ])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            KUBECONFIG_KEY.to_owned(),
            ByteString(kubeconfig.clone().into_bytes()),
        )])),
        ..Secret::default()
    };
    let api = Api::<Secret>::namespaced(client.clone(), &install.namespace);
    let (action, _) = ensure(
        target,
        &api,
        &name,
        || Ok(desired),
        |existing| {
            let label = existing
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_PEER));
            if label != Some(&grant.cluster) {
                return Err(JoinError::Conflict {
                    cluster: target.cluster.to_owned(),
                    kind: "Secret",
                    name: format!("{}/{name}", install.namespace),
                    reason: format!("it lacks the label {LABEL_PEER}={}", grant.cluster),
                });
            }
            let current = existing.data.as_ref().and_then(|d| d.get(KUBECONFIG_KEY));
            if current.map(|v| v.0.as_slice()) == Some(kubeconfig.as_bytes()) {
                return Ok(None);
            }
            let encoded =
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &kubeconfig);
            Ok(Some(json!({"data": {KUBECONFIG_KEY: encoded}})))
        },
    )
    .await?;
    Ok(target.change("Secret", Some(&install.namespace), &name, action))
}

async fn ensure_peer(
    api: &Api<ClusterPeer>,
    target: &Target<'_>,
    install: &Install,
    grant: &Grant,
    options: &AcceptOptions,
) -> Result<Change> {
    let owned = owned_fields(install, grant, options);
    let (action, _) =
        ensure(
            target,
            api,
            &grant.cluster,
            || new_peer(grant, &owned),
            |existing| {
                let current = serde_json::to_value(&existing.spec)
                    .map_err(|e| JoinError::invalid("ClusterPeer.spec", e.to_string()))?;
                let differs = owned
                    .iter()
                    .any(|(field, value)| !contains(&current[field.as_str()], value));
                Ok(differs
                    .then(|| json!({"spec": Value::Object(owned.clone().into_iter().collect())})))
            },
        )
        .await?;
    Ok(target.change("ClusterPeer", None, &grant.cluster, action))
}

/// The spec fields this accept writes: always the kubeconfig reference and
/// the keys; the description and the receiving settings when given.
fn owned_fields(
    install: &Install,
    grant: &Grant,
    options: &AcceptOptions,
) -> BTreeMap<String, Value> {
    let mut fields = BTreeMap::from([
        (
            "kubeconfigSecretRef".to_owned(),
            json!(SecretKeyRef {
                namespace: install.namespace.clone(),
                name: install.kubeconfig_secret(&grant.cluster),
                key: KUBECONFIG_KEY.to_owned(),
            }),
        ),
        ("publicKeys".to_owned(), json!(grant.public_keys)),
    ]);
    if let Some(region) = options.region.clone().or_else(|| grant.region.clone()) {
        fields.insert("region".to_owned(), json!(region));
    }
    let mut labels = grant.labels.clone();
    labels.extend(options.labels.clone());
    if !labels.is_empty() {
        fields.insert("labels".to_owned(), json!(labels));
    }
    if let Some(url) = options
        .prometheus
        .clone()
        .or_else(|| grant.prometheus.clone())
    {
        fields.insert("prometheus".to_owned(), json!({"url": url}));
    }
    if let Some(accept) = options.accept_from {
        fields.insert("acceptFrom".to_owned(), json!(accept));
    }
    if let Some(namespaces) = &options.allowed_namespaces {
        fields.insert("allowedNamespaces".to_owned(), json!(namespaces));
    }
    if options.allow_insecure {
        fields.insert(
            "insecure".to_owned(),
            json!({"plainHTTP": true, "credentialsOverPlainHTTP": true}),
        );
    }
    fields
}

/// The ClusterPeer to create: join's fields and the CRD's defaults.
fn new_peer(grant: &Grant, owned: &BTreeMap<String, Value>) -> Result<ClusterPeer> {
    let spec = Value::Object(owned.clone().into_iter().collect());
    let spec: ClusterPeerSpec = serde_json::from_value(spec)
        .map_err(|e| JoinError::invalid("ClusterPeer.spec", e.to_string()))?;
    Ok(ClusterPeer::new(&grant.cluster, spec))
}

/// Whether `current` already holds `wanted`: maps may hold more keys (a
/// user's labels, a Prometheus token reference), lists and scalars must be
/// equal.
fn contains(current: &Value, wanted: &Value) -> bool {
    match (current, wanted) {
        (Value::Object(current), Value::Object(wanted)) => wanted
            .iter()
            .all(|(k, v)| current.get(k).is_some_and(|c| contains(c, v))),
        _ => current == wanted,
    }
}
