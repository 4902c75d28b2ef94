//! What the receiver applied for a migration, found by its label
//! (`ferry.dev/migration=<name>`): the receiver writes it with that label,
//! and either side removes it on a rollback by listing that label.
//!
//! The label is the only link between a migration and its copies, so this
//! part must never apply an object without it, nor delete anything the
//! label does not select.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use super::error::{Error, Result, is_not_found};
use super::names::LABEL_MIGRATION;

/// Applies each object labelled with the migration's name.
pub(crate) async fn apply_labelled<K>(
    api: &Api<K>,
    kind: &str,
    objects: Vec<Value>,
    migration: &str,
    params: &PatchParams,
) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for mut object in objects {
        object["metadata"]["labels"][LABEL_MIGRATION] = migration.into();
        let object_name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        api.patch(&object_name, params, &Patch::Apply(&object))
            .await
            .map_err(|e| Error::kube(format!("apply {kind} {object_name}"), e))?;
    }
    Ok(())
}

/// Deletes the Deployments, ConfigMaps and Secrets labelled with the
/// migration in `namespace` of `client`'s cluster.
pub(crate) async fn delete_applied(
    client: &Client,
    namespace: &str,
    migration: &str,
) -> Result<()> {
    let selector = ListParams::default().labels(&format!("{LABEL_MIGRATION}={migration}"));
    delete_labelled::<Deployment>(client, namespace, &selector).await?;
    delete_labelled::<ConfigMap>(client, namespace, &selector).await?;
    delete_labelled::<Secret>(client, namespace, &selector).await?;
    Ok(())
}

async fn delete_labelled<K>(client: &Client, namespace: &str, selector: &ListParams) -> Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(selector)
        .await
        .map_err(|e| Error::kube("list the applied copies", e))?;
    for object in list.items {
        match api
            .delete(&object.name_any(), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::kube("delete an applied copy", e)),
        }
    }
    Ok(())
}
