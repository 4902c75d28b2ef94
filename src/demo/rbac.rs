//! The demo's clusters get the permissions a real install has: the chart's
//! ServiceAccount, roles and bindings (the plain manifests, rendered from
//! the chart by `scripts/render-manifests` and compiled in), and for each
//! peer an inbox namespace and a ServiceAccount bound to the peer
//! ClusterRole in that inbox only, as the chart's `peers` value renders them. The operators then act as `ferry`, peers as
//! `ferry-peer-<name>`; never as the admin, whose kubeconfigs are only for
//! the person watching.

use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::{Error, Result};
use crate::sandbox::Sandbox;

/// The chart's RBAC objects, as `deploy/manifests` holds them.
const MANIFESTS: [&str; 6] = [
    include_str!("../../deploy/manifests/02-serviceaccount.yaml"),
    include_str!("../../deploy/manifests/03-clusterrole.yaml"),
    include_str!("../../deploy/manifests/04-clusterrolebinding.yaml"),
    include_str!("../../deploy/manifests/05-role.yaml"),
    include_str!("../../deploy/manifests/06-rolebinding.yaml"),
    include_str!("../../deploy/manifests/10-peer-clusterrole.yaml"),
];

/// The manifests' release and namespace.
const RELEASE: &str = "ferry";
pub(crate) const NAMESPACE: &str = "ferry-system";
const MANAGER: &str = "ferry-demo";

/// How long the demo's tokens live: longer than any demo runs.
const TOKEN_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Applies the chart's RBAC objects and one peer account per name in
/// `peers`, as the admin `client`.
pub(crate) async fn install(client: &Client, cluster: &str, peers: &[&str]) -> Result<()> {
    let mut objects = Vec::new();
    for manifest in MANIFESTS {
        let doc: Value = serde_saphyr::from_str(manifest).expect("the compiled-in manifests parse");
        objects.push(doc);
    }
    for peer in peers {
        let name = format!("{RELEASE}-peer-{peer}");
        let inbox = format!("ferry-inbox-{peer}");
        objects.push(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": inbox, "labels": {"ferry.dev/inbox-of": peer}},
        }));
        objects.push(json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": NAMESPACE},
        }));
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": inbox},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": format!("{RELEASE}-peer")},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}],
        }));
    }
    for object in objects {
        apply(client, cluster, &object).await?;
    }
    Ok(())
}

async fn apply(client: &Client, cluster: &str, object: &Value) -> Result<()> {
    let (group, version) = match object["apiVersion"].as_str().unwrap_or_default() {
        api_version if api_version.contains('/') => api_version
            .split_once('/')
            .map(|(g, v)| (g.to_owned(), v.to_owned()))
            .unwrap_or_default(),
        version => (String::new(), version.to_owned()),
    };
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, kind));
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|source| Error::Setup {
        cluster: cluster.to_owned(),
        step: format!("applying the chart's {kind} {name}"),
        source,
    })?;
    Ok(())
}

/// A kubeconfig for the ServiceAccount `name` of Ferry's namespace.
pub(crate) fn kubeconfig(sandbox: &Sandbox, name: &str) -> Result<String> {
    sandbox
        .kubeconfig_for_service_account(NAMESPACE, name, TOKEN_TTL)
        .map_err(|source| Error::Sandbox {
            name: sandbox.name().to_owned(),
            source,
        })
}

/// The operator's kubeconfig: the `ferry` ServiceAccount's.
pub(crate) fn operator_kubeconfig(sandbox: &Sandbox) -> Result<String> {
    kubeconfig(sandbox, RELEASE)
}

/// The kubeconfig the cluster `from` reaches `sandbox` with as a peer.
pub(crate) fn peer_kubeconfig(sandbox: &Sandbox, from: &str) -> Result<String> {
    kubeconfig(sandbox, &format!("{RELEASE}-peer-{from}"))
}
