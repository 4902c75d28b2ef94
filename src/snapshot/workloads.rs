//! The workloads of the operator's own cluster, as the policy contract sees
//! them: Deployments with their requests, labels and observed usage.

use k8s_openapi::api::apps::v1::Deployment;

use crate::contract::{Label, Resources, Workload};
use crate::metrics::{WorkloadKey, WorkloadMap};
use crate::units::quantity;

/// One Deployment as a contract workload in `cluster`, with usage and cost
/// from `usage` when known. Pure: needs no client.
pub fn from_deployment(
    deployment: &Deployment,
    cluster: &str,
    usage: Option<&WorkloadMap>,
) -> Option<Workload> {
    let namespace = deployment.metadata.namespace.clone()?;
    let name = deployment.metadata.name.clone()?;
    let spec = &deployment.spec;
    let replicas = u32::try_from(spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
    let per_pod = spec
        .template
        .spec
        .as_ref()
        .map(|pod| pod_requests(&pod.containers))
        .unwrap_or_default();
    let mut workload = Workload {
        namespace: namespace.clone(),
        name: name.clone(),
        kind: "Deployment".to_owned(),
        cluster: cluster.to_owned(),
        replicas,
        requests: Resources {
            cpu_millis: per_pod.cpu_millis.saturating_mul(u64::from(replicas)),
            memory_bytes: per_pod.memory_bytes.saturating_mul(u64::from(replicas)),
        },
        labels: deployment
            .metadata
            .labels
            .as_ref()
            .map(Label::from_map)
            .unwrap_or_default(),
        ..Workload::default()
    };
    if let Some(metrics) = usage.and_then(|u| u.get(&WorkloadKey::new(namespace, name))) {
        super::apply_usage(metrics, &mut workload);
    }
    Some(workload)
}

/// Requests of one pod: the sum over its containers (unparseable is zero).
fn pod_requests(containers: &[k8s_openapi::api::core::v1::Container]) -> Resources {
    let mut total = Resources::default();
    for container in containers {
        let Some(requests) = container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
        else {
            continue;
        };
        if let Some(cpu) = requests.get("cpu").and_then(|q| quantity::parse(&q.0)) {
            total.cpu_millis += (cpu * 1000.0).round() as u64;
        }
        if let Some(memory) = requests.get("memory").and_then(|q| quantity::parse(&q.0)) {
            total.memory_bytes += memory.round() as u64;
        }
    }
    total
}
