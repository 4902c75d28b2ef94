//! Building the policy's input from metrics plus the cluster's own state.

pub mod quantity;
mod workloads;

use k8s_openapi::api::apps::v1::Deployment;

use crate::metrics::WorkloadMap;
use crate::contract::Workload;

pub use workloads::from_deployment;

/// The Deployments visible to `client`, as contract workloads of `cluster`,
/// sorted by namespace and name.
pub async fn list_workloads(
    client: kube::Client,
    cluster: &str,
    usage: Option<&WorkloadMap>,
) -> kube::Result<Vec<Workload>> {
    let deployments = kube::Api::<Deployment>::all(client)
        .list(&kube::api::ListParams::default())
        .await?;
    let mut workloads: Vec<Workload> = deployments
        .iter()
        .filter_map(|deployment| from_deployment(deployment, cluster, usage))
        .collect();
    workloads.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(workloads)
}
