//! EndpointSlices, as the EndpointSlice controller
//! keeps them: one slice per Service with a selector, labelled
//! `kubernetes.io/service-name`, owned by the Service, listing every
//! matching pod that has an IP with `conditions.ready` from its Ready
//! condition, and the Service's ports resolved to the pods' ports. The
//! instant mode, which makes no Pods, lists stand-ins for each Deployment's
//! ready replicas instead.

use serde_json::{Value, json};

use super::pods::is_ready;
use super::{DEPLOYMENTS, ENDPOINT_SLICES, PODS, SERVICES};
use crate::delete::{self, Policy, Propagation};
use crate::object::{Ids, is_deleting, label, meta_str, now};
use crate::store::State;

const SERVICE_NAME: &str = "kubernetes.io/service-name";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const CONTROLLER: &str = "endpointslice-controller.k8s.io";

/// Bring every managed slice in line with its Service and pods.
pub(super) fn sync(state: &mut State, ids: &Ids) {
    sync_with(state, ids, |state, namespace| {
        state
            .range(PODS, Some(namespace), None)
            .map(|(_, p)| (**p).clone())
            .filter(|p| !is_deleting(p) && p.pointer("/status/podIP").is_some())
            .collect()
    });
}

/// The instant mode's slices, which has no Pods: each Deployment stands
/// for as many ready endpoints as its status has ready replicas, at
/// addresses derived from its uid, with no `targetRef`.
pub(super) fn sync_instant(state: &mut State, ids: &Ids) {
    sync_with(state, ids, |state, namespace| {
        state
            .range(DEPLOYMENTS, Some(namespace), None)
            .filter(|(_, d)| !is_deleting(d))
            .flat_map(|(_, d)| stand_ins(d))
            .collect()
    });
}

/// Pod-like values for the ready replicas of the Deployment `d`.
fn stand_ins(d: &Value) -> Vec<Value> {
    let ready = d
        .pointer("/status/readyReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .clamp(0, 250);
    let subnet = meta_str(d, "uid").bytes().map(u32::from).sum::<u32>() % 250;
    (0..ready)
        .map(|i| {
            json!({
                "metadata": {
                    "namespace": meta_str(d, "namespace"),
                    "labels": d.pointer("/spec/template/metadata/labels").cloned().unwrap_or(json!({})),
                },
                "spec": d.pointer("/spec/template/spec").cloned().unwrap_or(json!({})),
                "status": {
                    "podIP": format!("10.245.{subnet}.{}", i + 2),
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            })
        })
        .collect()
}

/// [`sync`] over the backends `backends` lists for a namespace.
fn sync_with(state: &mut State, ids: &Ids, backends: impl Fn(&State, &str) -> Vec<Value>) {
    let services: Vec<Value> = state
        .range(SERVICES, None, None)
        .map(|(_, s)| (**s).clone())
        .filter(|s| !is_deleting(s))
        .collect();
    let slices: Vec<Value> = state
        .range(ENDPOINT_SLICES, None, None)
        .map(|(_, s)| (**s).clone())
        .filter(|s| label(s, MANAGED_BY) == Some(CONTROLLER))
        .collect();
    for slice in &slices {
        let namespace = meta_str(slice, "namespace");
        let service = label(slice, SERVICE_NAME).unwrap_or("");
        let kept = services.iter().any(|s| {
            meta_str(s, "namespace") == namespace
                && meta_str(s, "name") == service
                && selector(s).is_some()
        });
        if !kept {
            let policy = Policy::explicit(Propagation::Background);
            delete::delete_object(
                state,
                ENDPOINT_SLICES,
                namespace,
                meta_str(slice, "name"),
                policy,
                false,
            );
        }
    }
    for service in &services {
        let Some(selector) = selector(service) else {
            continue;
        };
        let namespace = meta_str(service, "namespace");
        let name = meta_str(service, "name");
        let pods: Vec<Value> = backends(state, namespace)
            .into_iter()
            .filter(|p| selector.iter().all(|(k, v)| label(p, k) == v.as_str()))
            .collect();
        let endpoints: Vec<Value> = pods.iter().map(endpoint).collect();
        let ports = ports(service, pods.first());
        let existing = slices.iter().find(|s| {
            meta_str(s, "namespace") == namespace && label(s, SERVICE_NAME) == Some(name)
        });
        let slice = match existing {
            Some(slice)
                if slice["endpoints"] == json!(endpoints) && slice["ports"] == json!(ports) =>
            {
                continue;
            }
            Some(slice) => slice.clone(),
            None => new_slice(ids, service),
        };
        let mut slice = slice;
        slice["endpoints"] = json!(endpoints);
        slice["ports"] = json!(ports);
        state.put(ENDPOINT_SLICES, slice);
    }
}

/// The Service's selector, if it selects pods at all.
fn selector(service: &Value) -> Option<serde_json::Map<String, Value>> {
    if service.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return None;
    }
    service
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|s| !s.is_empty())
        .cloned()
}

fn new_slice(ids: &Ids, service: &Value) -> Value {
    let name = meta_str(service, "name");
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{name}-{}", ids.suffix()),
            "namespace": meta_str(service, "namespace"),
            "uid": ids.uid(),
            "creationTimestamp": now(),
            "generateName": format!("{name}-"),
            "labels": {SERVICE_NAME: name, MANAGED_BY: CONTROLLER},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                "uid": meta_str(service, "uid"), "controller": true, "blockOwnerDeletion": true}],
        },
        "addressType": "IPv4",
    })
}

fn endpoint(pod: &Value) -> Value {
    let ready = is_ready(pod);
    let mut endpoint = json!({
        "addresses": [pod.pointer("/status/podIP").cloned().unwrap_or(Value::Null)],
        "conditions": {"ready": ready, "serving": ready, "terminating": false},
    });
    if !meta_str(pod, "uid").is_empty() {
        endpoint["targetRef"] = json!({"kind": "Pod", "namespace": meta_str(pod, "namespace"),
            "name": meta_str(pod, "name"), "uid": meta_str(pod, "uid")});
    }
    if let Some(node) = pod.pointer("/spec/nodeName") {
        endpoint["nodeName"] = node.clone();
    }
    endpoint
}

/// The Service's ports, each with the pod port its `targetPort` names (a
/// number, or a container port's name looked up in `pod`).
fn ports(service: &Value, pod: Option<&Value>) -> Vec<Value> {
    let container_port = |name: &str| {
        pod.and_then(|p| p.pointer("/spec/containers"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|c| {
                c.get("ports")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .find(|p| p.get("name").and_then(Value::as_str) == Some(name))
            .and_then(|p| p.get("containerPort").cloned())
    };
    service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|port| {
            let target = match port.get("targetPort") {
                Some(Value::String(name)) => container_port(name)?,
                Some(number @ Value::Number(_)) => number.clone(),
                _ => port.get("port")?.clone(),
            };
            Some(json!({
                "name": port.get("name").cloned().unwrap_or(json!("")),
                "port": target,
                "protocol": port.get("protocol").cloned().unwrap_or(json!("TCP")),
            }))
        })
        .collect()
}
