//! The workloads of the operator's own cluster, as the policy contract sees
//! them: Deployments with their requests, labels and observed usage.

use k8s_openapi::api::apps::v1::Deployment;

use crate::contract::{Label, Resources, Workload};
use crate::metrics::{WorkloadKey, WorkloadMap};
use crate::units::quantity;

/// A StatefulSet (or any `apps/v1` workload manifest) read through the
/// fields it shares with a Deployment: metadata, replicas, selector and
/// pod template, which are all a contract workload needs. `None` when the
/// manifest does not read so.
pub fn deployment_view(manifest: &serde_json::Value) -> Option<Deployment> {
    let mut view = manifest.clone();
    view["apiVersion"] = "apps/v1".into();
    view["kind"] = "Deployment".into();
    if let Some(spec) = view
        .get_mut("spec")
        .and_then(serde_json::Value::as_object_mut)
    {
        spec.retain(|field, _| matches!(field.as_str(), "replicas" | "selector" | "template"));
    }
    if let Some(status) = view.as_object_mut() {
        status.remove("status");
    }
    serde_json::from_value(view).ok()
}

/// One Deployment as a contract workload in `cluster`, with usage and cost
/// from `usage` when known. Pure: needs no client.
pub fn from_deployment(
    deployment: &Deployment,
    cluster: &str,
    usage: Option<&WorkloadMap>,
) -> Option<Workload> {
    let replicas = u32::try_from(deployment.spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
    workload(deployment, cluster, replicas, usage)
}

/// A Deployment this cluster moved away and scaled to zero, as the workload
/// it is now: running in `moved_to` with the `replicas` it had before the
/// move. It carries no usage (its pods run elsewhere) and stays in the
/// snapshot so that a policy sees where it went.
pub fn moved_away(deployment: &Deployment, moved_to: &str, replicas: u32) -> Option<Workload> {
    workload(deployment, moved_to, replicas, None)
}

fn workload(
    deployment: &Deployment,
    cluster: &str,
    replicas: u32,
    usage: Option<&WorkloadMap>,
) -> Option<Workload> {
    let namespace = deployment.metadata.namespace.clone()?;
    let name = deployment.metadata.name.clone()?;
    let spec = &deployment.spec;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i32) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "shop", "name": "web", "labels": {"tier": "web"}},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "1"}}},
                ]}},
            },
        }))
        .unwrap()
    }

    #[test]
    fn requests_are_per_pod_sums_times_replicas() {
        let w = from_deployment(&deployment(3), "a", None).unwrap();
        assert_eq!((w.cluster.as_str(), w.replicas), ("a", 3));
        assert_eq!(w.requests.cpu_millis, 3 * 1250);
        assert_eq!(w.requests.memory_bytes, 3 * (1 << 30));
        assert_eq!(w.labels[0].key, "tier");
    }

    #[test]
    fn a_moved_away_workload_runs_where_it_went_with_its_old_replicas() {
        let w = moved_away(&deployment(0), "b", 2).unwrap();
        assert_eq!((w.cluster.as_str(), w.replicas), ("b", 2));
        assert_eq!(w.requests.cpu_millis, 2 * 1250);
        assert_eq!(w.cpu_usage_millis, None);
    }
}
