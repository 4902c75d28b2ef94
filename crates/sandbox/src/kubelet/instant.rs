//! The instant mode (the default): after a delay, Deployment status follows
//! the spec as a finished rollout would (or stays unavailable when told
//! so), with no Pods. Status is written only when it differs, so the
//! kubelet's own writes do not feed back into it.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::object::{meta_mut, meta_str, now};

use super::DEPLOYMENTS;

pub(super) fn schedule(cluster: &Arc<Cluster>, due: BTreeSet<(String, String)>) {
    if due.is_empty() {
        return;
    }
    let delay = cluster.kubelet.delay();
    if delay.is_zero() {
        for (namespace, name) in due {
            settle(cluster, &namespace, &name);
        }
        return;
    }
    let cluster = cluster.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        for (namespace, name) in due {
            settle(&cluster, &namespace, &name);
        }
    });
}

/// Write the status the Deployment's current spec leads to, if it differs.
fn settle(cluster: &Cluster, namespace: &str, name: &str) {
    let ready = cluster.kubelet.rollouts_ready();
    cluster.write(|state| {
        let Some(current) = state.get(DEPLOYMENTS, namespace, name) else {
            return;
        };
        if crate::object::is_deleting(current) {
            return;
        }
        let desired = desired_status(current, ready);
        let old = current.get("status").cloned().unwrap_or(json!({}));
        if strip_times(&old) == strip_times(&desired) {
            return;
        }
        let mut updated = (**current).clone();
        updated["status"] = keep_transition_times(&old, desired);
        if let Some(meta) = meta_mut(&mut updated) {
            meta.remove("resourceVersion");
        }
        state.put(DEPLOYMENTS, updated);
    });
}

fn desired_status(deployment: &Value, ready: bool) -> Value {
    let replicas = deployment
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let generation = deployment
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let time = now();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| json!({"type": type_, "status": status, "reason": reason, "message": message, "lastUpdateTime": time, "lastTransitionTime": time});
    let name = meta_str(deployment, "name");
    if ready {
        json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
                condition("Progressing", "True", "NewReplicaSetAvailable", &format!("ReplicaSet \"{name}\" has successfully progressed.")),
            ]
        })
    } else {
        json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": 0,
            "availableReplicas": 0,
            "unavailableReplicas": replicas,
            "conditions": [
                condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
                condition("Progressing", "True", "ReplicaSetUpdated", &format!("ReplicaSet \"{name}\" is progressing.")),
            ]
        })
    }
}

pub(super) fn strip_times(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions.iter_mut().filter_map(Value::as_object_mut) {
            c.remove("lastUpdateTime");
            c.remove("lastTransitionTime");
        }
    }
    status
}

/// A condition whose status did not change keeps its transition time.
pub(super) fn keep_transition_times(old: &Value, mut desired: Value) -> Value {
    let previous = old
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(conditions) = desired.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conditions.iter_mut() {
            let same = previous
                .iter()
                .find(|p| p.get("type") == c.get("type") && p.get("status") == c.get("status"));
            if let Some(time) = same.and_then(|p| p.get("lastTransitionTime")) {
                c["lastTransitionTime"] = time.clone();
            }
        }
    }
    desired
}
