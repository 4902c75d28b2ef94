//! Every object of the kinds an attack could change, in one cluster, by
//! `kind/namespace/name` → `uid@resourceVersion`, so a test can say "nothing
//! changed" by comparing two inventories. Events, Leases and the requests'
//! own status are left out: refusing is allowed to write those. So is a
//! ClusterPeer's status, which the peer controller's probes write whenever
//! reachability changes (a busy machine can make a probe time out); its
//! spec is compared by generation.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::ListParams;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use ferry::crd::{ClusterPeer, WorkloadMigration};

pub type Inventory = BTreeMap<String, String>;

async fn add<K>(client: &Client, inventory: &mut Inventory)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .expect("list for the inventory");
    for object in list.items {
        let key = format!(
            "{}/{}/{}",
            K::kind(&()),
            object.namespace().unwrap_or_default(),
            object.name_any()
        );
        let value = format!(
            "{}@{}",
            object.uid().unwrap_or_default(),
            object.resource_version().unwrap_or_default()
        );
        inventory.insert(key, value);
    }
}

/// The inventory of `client`'s cluster (an admin client).
pub async fn inventory(client: &Client) -> Inventory {
    let mut inventory = Inventory::new();
    add::<Deployment>(client, &mut inventory).await;
    add::<ConfigMap>(client, &mut inventory).await;
    add::<Secret>(client, &mut inventory).await;
    add::<Namespace>(client, &mut inventory).await;
    add::<ServiceAccount>(client, &mut inventory).await;
    add::<Role>(client, &mut inventory).await;
    add::<RoleBinding>(client, &mut inventory).await;
    add::<ClusterRole>(client, &mut inventory).await;
    add::<ClusterRoleBinding>(client, &mut inventory).await;
    let peers: Api<ClusterPeer> = Api::all(client.clone());
    for peer in peers
        .list(&ListParams::default())
        .await
        .expect("list peers")
        .items
    {
        let key = format!("ClusterPeer//{}", peer.name_any());
        let value = format!(
            "{}#{}",
            peer.uid().unwrap_or_default(),
            peer.metadata.generation.unwrap_or_default()
        );
        inventory.insert(key, value);
    }
    // Requests: their identity only (their status and finalizers are the
    // receiver's to write when it refuses).
    let requests: Api<WorkloadMigration> = Api::all(client.clone());
    for wm in requests
        .list(&ListParams::default())
        .await
        .expect("list requests")
        .items
    {
        let key = format!(
            "WorkloadMigration/{}/{}",
            wm.namespace().unwrap_or_default(),
            wm.name_any()
        );
        inventory.insert(key, wm.uid().unwrap_or_default());
    }
    inventory
}

/// Panics with the differences unless `after` equals `before`, ignoring the
/// keys `except` says to.
pub fn assert_unchanged(what: &str, before: &Inventory, after: &Inventory, except: &[&str]) {
    let skip = |key: &String| except.iter().any(|e| key.starts_with(e));
    let changed: Vec<String> = before
        .iter()
        .filter(|(k, _)| !skip(k))
        .filter(|(k, v)| after.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k}: {v} -> {:?}", after.get(k)))
        .chain(
            after
                .keys()
                .filter(|k| !skip(k) && !before.contains_key(*k))
                .map(|k| format!("{k}: new")),
        )
        .collect();
    assert!(changed.is_empty(), "{what} changed: {changed:#?}");
}
