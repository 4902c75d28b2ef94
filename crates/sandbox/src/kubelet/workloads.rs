//! Deployments and StatefulSets of the realistic mode: their Pods, named
//! and labelled as the real controllers name them and owned by them (so
//! the garbage collector takes them along), and their status, counted from
//! those Pods.
//!
//! - A Deployment's pods are `NAME-HASH-XXXXX`, HASH standing for its pod
//!   template (label `pod-template-hash`). A changed template gets a full
//!   set of new pods; the old ones go once the new ones are all ready, so a
//!   rollout that never becomes ready leaves the old pods serving. (No
//!   ReplicaSets are made.)
//! - A StatefulSet's pods are `NAME-0` … `NAME-(n-1)`, made in order, each
//!   once the ones below it are ready (unless `podManagementPolicy:
//!   Parallel`), removed from the highest ordinal down, and replaced from
//!   the highest down when the template changes and all are ready. Each
//!   `volumeClaimTemplates` entry gets a claim `TEMPLATE-NAME-ORDINAL`,
//!   kept when the pod goes, as upstream's default retention keeps it.

use serde_json::{Map, Value, json};

use super::instant::keep_transition_times;
use super::pods::{is_ready, timeless};
use super::{CLAIMS, DEPLOYMENTS, PODS, STATEFULSETS};
use crate::delete::{self, Policy, Propagation};
use crate::object::{Ids, is_deleting, label, meta_str, now};
use crate::store::State;

/// The most pods one pass makes (upstream's controllers burst as many):
/// a workload asking for more gets the rest in the passes that follow, each
/// started by the previous one's writes, so the state lock is never held
/// for a million pods at once.
const BURST: usize = 500;

/// Make and remove the pods of every Deployment and StatefulSet.
pub(super) fn run_pods(state: &mut State, ids: &Ids, node: &str) {
    let mut budget = BURST;
    for owner in live(state, DEPLOYMENTS) {
        deployment_pods(state, ids, node, &owner, &mut budget);
    }
    for owner in live(state, STATEFULSETS) {
        stateful_pods(state, ids, node, &owner, &mut budget);
    }
}

/// Take one pod from the pass's budget; false when it is spent.
fn spend(budget: &mut usize) -> bool {
    let left = *budget > 0;
    *budget = budget.saturating_sub(1);
    left
}

/// Write the status each Deployment and StatefulSet's pods lead to.
pub(super) fn update_status(state: &mut State) {
    for (resource, status) in [
        (
            DEPLOYMENTS,
            deployment_status as fn(&State, &Value) -> Value,
        ),
        (STATEFULSETS, stateful_status),
    ] {
        for owner in live(state, resource) {
            let old = owner.get("status").cloned().unwrap_or(json!({}));
            let desired = status(state, &owner);
            if timeless(&old) != timeless(&desired) {
                let mut updated = owner;
                updated["status"] = keep_transition_times(&old, desired);
                state.put(resource, updated);
            }
        }
    }
}

fn live(state: &State, resource: &str) -> Vec<Value> {
    state
        .range(resource, None, None)
        .map(|(_, o)| (**o).clone())
        .filter(|o| !is_deleting(o))
        .collect()
}

fn replicas(owner: &Value) -> usize {
    let n = owner.pointer("/spec/replicas").and_then(Value::as_i64);
    usize::try_from(n.unwrap_or(1)).unwrap_or(0)
}

/// The pods `owner` controls, in name order.
fn owned_pods(state: &State, owner: &Value) -> Vec<Value> {
    let uid = meta_str(owner, "uid");
    let mut pods: Vec<Value> = state
        .dependents_of(uid)
        .into_iter()
        .filter(|(resource, _, _)| resource == PODS)
        .filter_map(|(_, ns, name)| state.get(PODS, &ns, &name).map(|p| (**p).clone()))
        .filter(|pod| !is_deleting(pod))
        .collect();
    pods.sort_by(|a, b| meta_str(a, "name").cmp(meta_str(b, "name")));
    pods
}

/// A stable ten-character hash of the pod template, in the alphabet of
/// generated names (FNV-1a over its JSON).
fn template_hash(owner: &Value) -> String {
    let text = owner
        .pointer("/spec/template")
        .map(Value::to_string)
        .unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..10)
        .map(|_| {
            let c = ALPHABET[(hash % ALPHABET.len() as u64) as usize] as char;
            hash /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// A pod from `owner`'s template, as its controller would create it.
fn new_pod(ids: &Ids, node: &str, owner: &Value, name: &str, labels: &[(&str, String)]) -> Value {
    let template = owner
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(json!({}));
    let mut meta = template.get("metadata").cloned().unwrap_or(json!({}));
    let mut all_labels = meta.get("labels").cloned().unwrap_or(json!({}));
    for (key, value) in labels {
        all_labels[*key] = json!(value);
    }
    meta["labels"] = all_labels;
    meta["name"] = json!(name);
    meta["namespace"] = json!(meta_str(owner, "namespace"));
    meta["uid"] = json!(ids.uid());
    meta["creationTimestamp"] = json!(now());
    meta["ownerReferences"] = json!([{
        "apiVersion": owner.get("apiVersion").cloned().unwrap_or(json!("apps/v1")),
        "kind": owner.get("kind").cloned().unwrap_or(json!("")),
        "name": meta_str(owner, "name"),
        "uid": meta_str(owner, "uid"),
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    spec["nodeName"] = json!(node);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    })
}

fn remove(state: &mut State, resource: &str, object: &Value) {
    let policy = Policy::explicit(Propagation::Background);
    let (namespace, name) = (meta_str(object, "namespace"), meta_str(object, "name"));
    delete::delete_object(state, resource, namespace, name, policy, false);
}

fn deployment_pods(state: &mut State, ids: &Ids, node: &str, owner: &Value, budget: &mut usize) {
    let want = replicas(owner);
    let hash = template_hash(owner);
    let pods = owned_pods(state, owner);
    let (mut new, old): (Vec<Value>, Vec<Value>) = pods
        .into_iter()
        .partition(|p| label(p, "pod-template-hash") == Some(hash.as_str()));
    for _ in new.len()..want {
        if !spend(budget) {
            break;
        }
        let name = format!("{}-{hash}-{}", meta_str(owner, "name"), ids.suffix());
        let pod = new_pod(
            ids,
            node,
            owner,
            &name,
            &[("pod-template-hash", hash.clone())],
        );
        state.put(PODS, pod.clone());
        new.push(pod);
    }
    if new.len() > want {
        // Unready pods go first, then the youngest.
        new.sort_by_key(|p| {
            (
                is_ready(p),
                std::cmp::Reverse(meta_str(p, "creationTimestamp").to_string()),
            )
        });
        for pod in new.drain(..new.len() - want) {
            remove(state, PODS, &pod);
        }
    }
    if new.iter().filter(|p| is_ready(p)).count() >= want {
        for pod in &old {
            remove(state, PODS, pod);
        }
    }
}

fn deployment_status(state: &State, owner: &Value) -> Value {
    let want = replicas(owner);
    let hash = template_hash(owner);
    let pods = owned_pods(state, owner);
    let updated = pods
        .iter()
        .filter(|p| label(p, "pod-template-hash") == Some(hash.as_str()))
        .count();
    let ready = pods.iter().filter(|p| is_ready(p)).count();
    let updated_ready = pods
        .iter()
        .filter(|p| is_ready(p) && label(p, "pod-template-hash") == Some(hash.as_str()))
        .count();
    let available = ready >= want.saturating_sub(max_unavailable(owner, want));
    let done = updated == want && updated_ready >= want && pods.len() == want;
    let name = meta_str(owner, "name");
    let time = now();
    let condition = |type_: &str, status: bool, reason: &str, message: String| {
        json!({"type": type_, "status": if status { "True" } else { "False" }, "reason": reason,
            "message": message, "lastUpdateTime": time, "lastTransitionTime": time})
    };
    let available_condition = if available {
        condition(
            "Available",
            true,
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
        )
    } else {
        condition(
            "Available",
            false,
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
        )
    };
    let progressing = if done {
        condition(
            "Progressing",
            true,
            "NewReplicaSetAvailable",
            format!("ReplicaSet \"{name}-{hash}\" has successfully progressed."),
        )
    } else {
        condition(
            "Progressing",
            true,
            "ReplicaSetUpdated",
            format!("ReplicaSet \"{name}-{hash}\" is progressing."),
        )
    };
    let mut status = json!({
        "observedGeneration": owner.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "replicas": pods.len(),
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "conditions": [available_condition, progressing],
    });
    let unavailable = pods.len().max(want).saturating_sub(ready);
    if unavailable > 0 {
        status["unavailableReplicas"] = json!(unavailable);
    }
    status
}

/// `spec.strategy.rollingUpdate.maxUnavailable` (a count or a percentage,
/// rounded down; 25% when absent; 0 for `Recreate`).
fn max_unavailable(owner: &Value, want: usize) -> usize {
    if owner.pointer("/spec/strategy/type").and_then(Value::as_str) == Some("Recreate") {
        return 0;
    }
    match owner.pointer("/spec/strategy/rollingUpdate/maxUnavailable") {
        Some(Value::Number(n)) => n.as_u64().map_or(0, |n| n as usize),
        Some(Value::String(s)) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<usize>().ok())
            .map_or(0, |p| want * p / 100),
        _ => want / 4,
    }
}

/// The ordinal of a StatefulSet pod named `NAME-ORDINAL`.
fn ordinal(owner: &Value, pod: &Value) -> Option<usize> {
    let prefix = format!("{}-", meta_str(owner, "name"));
    meta_str(pod, "name").strip_prefix(&prefix)?.parse().ok()
}

fn stateful_pods(state: &mut State, ids: &Ids, node: &str, owner: &Value, budget: &mut usize) {
    let want = replicas(owner);
    let name = meta_str(owner, "name").to_string();
    let revision = format!("{name}-{}", template_hash(owner));
    let ordered = owner
        .pointer("/spec/podManagementPolicy")
        .and_then(Value::as_str)
        != Some("Parallel");
    let mut pods: Vec<(usize, Value)> = owned_pods(state, owner)
        .into_iter()
        .filter_map(|p| Some((ordinal(owner, &p)?, p)))
        .collect();
    pods.sort_by_key(|(i, _)| *i);
    // Above the wanted count: the highest ordinal goes first, one a pass
    // when ordered (the next pass follows the write at once).
    let extra: Vec<Value> = pods
        .iter()
        .rev()
        .filter(|(i, _)| *i >= want)
        .map(|(_, p)| p.clone())
        .collect();
    for pod in extra.iter().take(if ordered { 1 } else { usize::MAX }) {
        remove(state, PODS, pod);
    }
    if !extra.is_empty() {
        return;
    }
    let by_ordinal: std::collections::BTreeMap<usize, &Value> =
        pods.iter().map(|(i, p)| (*i, p)).collect();
    let mut lower_ready = true;
    let mut made = Vec::new();
    for i in 0..want {
        if let Some(pod) = by_ordinal.get(&i) {
            lower_ready &= is_ready(pod);
            continue;
        }
        if (ordered && !lower_ready) || !spend(budget) {
            break;
        }
        let pod_name = format!("{name}-{i}");
        let mut pod = new_pod(
            ids,
            node,
            owner,
            &pod_name,
            &[
                ("controller-revision-hash", revision.clone()),
                ("statefulset.kubernetes.io/pod-name", pod_name.clone()),
                ("apps.kubernetes.io/pod-index", i.to_string()),
            ],
        );
        pod["spec"]["hostname"] = json!(pod_name);
        if let Some(service) = owner.pointer("/spec/serviceName").and_then(Value::as_str) {
            pod["spec"]["subdomain"] = json!(service);
        }
        for claim in claims(state, ids, owner, i) {
            let volumes = pod["spec"]
                .as_object_mut()
                .map(|s| s.entry("volumes").or_insert(json!([])));
            if let Some(Value::Array(volumes)) = volumes {
                volumes.retain(|v| v.get("name") != claim.get("name"));
                volumes.push(claim);
            }
        }
        state.put(PODS, pod);
        made.push(i);
        if ordered {
            break;
        }
    }
    if !made.is_empty() {
        // New pods are not ready yet: no update this pass.
        return;
    }
    // A rolling update: once all are there and ready, replace the highest
    // pod of an older revision.
    if pods.len() == want
        && pods.iter().all(|(_, p)| is_ready(p))
        && owner
            .pointer("/spec/updateStrategy/type")
            .and_then(Value::as_str)
            != Some("OnDelete")
        && let Some((_, stale)) = pods
            .iter()
            .rev()
            .find(|(_, p)| label(p, "controller-revision-hash") != Some(revision.as_str()))
    {
        remove(state, PODS, stale);
    }
}

/// Make the claims of ordinal `i` that are missing; the pod volumes that
/// mount them.
fn claims(state: &mut State, ids: &Ids, owner: &Value, i: usize) -> Vec<Value> {
    let templates = owner
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let namespace = meta_str(owner, "namespace").to_string();
    let selector = owner
        .pointer("/spec/selector/matchLabels")
        .cloned()
        .unwrap_or(json!({}));
    let mut volumes = Vec::new();
    for template in templates {
        let volume = meta_str(&template, "name").to_string();
        let claim = format!("{volume}-{}-{i}", meta_str(owner, "name"));
        if state.get(CLAIMS, &namespace, &claim).is_none() {
            let mut meta = Map::new();
            meta.insert("name".into(), json!(claim));
            meta.insert("namespace".into(), json!(namespace));
            meta.insert("labels".into(), selector.clone());
            meta.insert("uid".into(), json!(ids.uid()));
            meta.insert("creationTimestamp".into(), json!(now()));
            let spec = template.get("spec").cloned().unwrap_or(json!({}));
            state.put(CLAIMS, json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}));
        }
        volumes.push(json!({"name": volume, "persistentVolumeClaim": {"claimName": claim}}));
    }
    volumes
}

fn stateful_status(state: &State, owner: &Value) -> Value {
    let revision = format!("{}-{}", meta_str(owner, "name"), template_hash(owner));
    let pods = owned_pods(state, owner);
    let of = |rev: &str| {
        pods.iter()
            .filter(|p| label(p, "controller-revision-hash") == Some(rev))
            .count()
    };
    let updated = of(&revision);
    let current = if updated == pods.len() {
        revision.clone()
    } else {
        pods.iter()
            .filter_map(|p| label(p, "controller-revision-hash"))
            .find(|r| *r != revision)
            .unwrap_or(&revision)
            .to_string()
    };
    let ready = pods.iter().filter(|p| is_ready(p)).count();
    json!({
        "observedGeneration": owner.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "replicas": pods.len(),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "currentReplicas": of(&current),
        "updatedReplicas": updated,
        "currentRevision": current,
        "updateRevision": revision,
        "collisionCount": 0,
    })
}
