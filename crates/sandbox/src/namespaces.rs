//! Namespace lifecycle, as kube-apiserver (the NamespaceLifecycle admission
//! plugin, the Namespace storage) and kube-controller-manager's namespace
//! controller enforce it together:
//!
//! - creating a namespaced object needs its namespace to exist (404
//!   `namespaces "x" not found`) and not to be terminating (403 with the
//!   `NamespaceTerminating` cause); updates and deletes are always admitted;
//! - `default`, `kube-system` and `kube-public` cannot be deleted;
//! - a Namespace carries `spec.finalizers: [kubernetes]` from its creation,
//!   `status.phase` and the `kubernetes.io/metadata.name` label; only
//!   `/finalize` changes `spec.finalizers`, only `/status` changes `status`,
//!   and the phase must agree with the deletionTimestamp;
//! - deleting one makes it Terminating; its content is then deleted, its
//!   conditions say what remains, and once it is empty the `kubernetes`
//!   finalizer goes, which removes the namespace unless other finalizers
//!   still hold it.
//!
//! It never removes content that finalizers hold: it waits, as the real
//! controller does.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::delete::{self, Policy, Propagation};
use crate::error::{ApiError, ApiResult, Cause};
use crate::meta_rules;
use crate::object::{is_deleting, meta_mut, meta_str, now};
use crate::registry::ResourceType;
use crate::store::{Event, EventType, NAMESPACE_KEY, State};

/// The finalizer the namespace controller removes once the namespace is empty.
pub(crate) const KUBERNETES_FINALIZER: &str = "kubernetes";
/// The label every namespace carries, set to its name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// Namespaces every cluster starts with.
const SYSTEM: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];
/// Namespaces that can never be deleted (`kube-node-lease` can, upstream too).
const IMMORTAL: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Create the namespaces every cluster starts with.
pub(crate) fn seed(cluster: &Cluster) {
    cluster.write(|state| {
        for name in SYSTEM {
            let mut namespace = json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "uid": cluster.ids.uid(), "creationTimestamp": now(), "generation": 1},
                "spec": {},
            });
            prepare_for_create(&mut namespace);
            state.put(NAMESPACE_KEY, namespace);
        }
    });
}

/// The NamespaceLifecycle admission plugin for a create; `name` is the
/// object's name, or its generateName when the server is to pick one.
pub(crate) fn admit_create(
    state: &State,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
) -> ApiResult<()> {
    // Answering "no such namespace" to an access review would tell who may
    // not see a namespace that it exists; upstream exempts them.
    let access_review =
        rt.group == "authorization.k8s.io" && rt.plural == "localsubjectaccessreviews";
    if !rt.namespaced || access_review {
        return Ok(());
    }
    let Some(current) = state.get(NAMESPACE_KEY, "", namespace) else {
        return Err(ApiError::not_found("", "namespaces", namespace));
    };
    if phase(current) != "Terminating" {
        return Ok(());
    }
    let cause = json!({
        "reason": "NamespaceTerminating",
        "message": format!("namespace {namespace} is being terminated"),
        "field": "metadata.namespace",
    });
    Err(ApiError::forbidden(
        &rt.group,
        &rt.plural,
        name,
        &format!(
            "unable to create new content in namespace {namespace} because it is being terminated"
        ),
    )
    .with_cause(cause))
}

/// The NamespaceLifecycle admission plugin for a delete of a namespace.
pub(crate) fn admit_delete(name: &str) -> ApiResult<()> {
    if IMMORTAL.contains(&name) {
        return Err(ApiError::forbidden(
            "",
            "namespaces",
            name,
            "this namespace may not be deleted",
        ));
    }
    Ok(())
}

/// The Namespace strategy on create: Active, the `kubernetes` finalizer,
/// the name label.
pub(crate) fn prepare_for_create(object: &mut Value) {
    set_name_label(object);
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    let list = spec
        .as_object_mut()
        .map(|spec| spec.entry("finalizers").or_insert_with(|| json!([])));
    if let Some(list) = list {
        if !list.is_array() {
            *list = json!([]);
        }
        if let Some(list) = list.as_array_mut()
            && !list.iter().any(|f| f == KUBERNETES_FINALIZER)
        {
            list.push(json!(KUBERNETES_FINALIZER));
        }
    }
    map.insert("status".into(), json!({"phase": "Active"}));
}

/// The Namespace strategies on update, after the generic rules made `new`
/// from `old` (status already kept unless writing `/status`): the main
/// resource keeps `spec.finalizers`; `/finalize` may change only those, to
/// valid names; `/status` must keep the phase in step with deletion.
pub(crate) fn prepare_for_update(
    rt: &ResourceType,
    sub: Option<&str>,
    old: &Value,
    new: &mut Value,
) -> ApiResult<()> {
    let invalid = |field: String, message: String| {
        let cause = Cause {
            reason: "FieldValueInvalid",
            field,
            message,
        };
        ApiError::invalid(&rt.group, &rt.kind, meta_str(old, "name"), &[cause])
    };
    match sub {
        Some("status") => {
            let phase = phase(new).to_string();
            let (want, rule) = if is_deleting(new) {
                (
                    "Terminating",
                    "may only be 'Terminating' if `deletionTimestamp` is not empty",
                )
            } else {
                (
                    "Active",
                    "may only be 'Active' if `deletionTimestamp` is empty",
                )
            };
            if phase != want {
                return Err(invalid(
                    "status.Phase".into(),
                    format!("Invalid value: {}: {rule}", json!(phase)),
                ));
            }
        }
        Some("finalize") => {
            set_name_label(new);
            let list = spec_finalizers(new);
            if list.is_empty() {
                set_spec_finalizers(new, None);
            }
            for (i, name) in list.iter().enumerate() {
                if !name.contains('/') && !meta_rules::is_standard_finalizer(name) {
                    return Err(invalid(
                        format!("spec.finalizers[{i}]"),
                        format!(
                            "Invalid value: {name:?}: name is neither a standard finalizer name nor is it fully qualified"
                        ),
                    ));
                }
            }
        }
        _ => {
            set_name_label(new);
            set_spec_finalizers(new, old.pointer("/spec/finalizers").cloned());
        }
    }
    Ok(())
}

/// The first delete of a namespace: Terminating, a deletionTimestamp, and
/// the `orphan`/`foregroundDeletion` finalizers as the options ask (here the
/// deprecated `orphanDependents: false` asks for foreground). A later delete
/// changes nothing while `spec.finalizers` remain; `None` once they are
/// gone, when the namespace is deleted like any other object.
pub(crate) fn terminate(current: &Value, policy: Policy) -> Option<Value> {
    if is_deleting(current) {
        return (!spec_finalizers(current).is_empty()).then(|| current.clone());
    }
    let mut next = current.clone();
    let existing = delete::finalizers(current);
    let has = |f: &str| existing.iter().any(|e| e == f);
    let (orphan, foreground) = match (policy.orphan_dependents, policy.propagation) {
        (Some(orphan), _) => (orphan, !orphan),
        (None, Some(p)) => (p == Propagation::Orphan, p == Propagation::Foreground),
        (None, None) => (has(delete::ORPHAN), has(delete::FOREGROUND)),
    };
    let mut finalizers: Vec<String> = existing
        .iter()
        .filter(|f| *f != delete::ORPHAN && *f != delete::FOREGROUND)
        .cloned()
        .collect();
    if orphan {
        finalizers.push(delete::ORPHAN.into());
    }
    if foreground {
        finalizers.push(delete::FOREGROUND.into());
    }
    if let Some(meta) = meta_mut(&mut next) {
        meta.insert("deletionTimestamp".into(), json!(now()));
        if finalizers.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), json!(finalizers));
        }
    }
    if let Some(map) = next.as_object_mut() {
        let status = map.entry("status").or_insert_with(|| json!({}));
        if !status.is_object() {
            *status = json!({});
        }
        status["phase"] = json!("Terminating");
    }
    Some(next)
}

/// Note the namespaces an event concerns that the controller must look at.
pub(crate) fn observe(state: &State, event: &Event, dirty: &mut BTreeSet<String>) {
    if event.resource == NAMESPACE_KEY {
        if event.type_ != EventType::Deleted && is_deleting(&event.object) {
            dirty.insert(meta_str(&event.object, "name").to_string());
        }
    } else if !event.namespace.is_empty()
        && state
            .get(NAMESPACE_KEY, "", &event.namespace)
            .is_some_and(|ns| is_deleting(ns))
    {
        dirty.insert(event.namespace.clone());
    }
}

/// The namespace controller, once, for one terminating namespace: delete
/// the content (background propagation, as upstream), report what remains in
/// the conditions, and once nothing remains remove the `kubernetes`
/// finalizer. Writes only what changes, so a pass with nothing to do
/// commits nothing.
pub(crate) fn sync(state: &mut State, name: &str) {
    let Some(namespace) = state.get(NAMESPACE_KEY, "", name) else {
        return;
    };
    if !is_deleting(namespace) || spec_finalizers(namespace).is_empty() {
        return;
    }
    let resources = state.resources();
    for resource in &resources {
        let names: Vec<String> = state
            .range(resource, Some(name), None)
            .map(|((_, n), _)| n.clone())
            .collect();
        for object in names {
            let background = Policy::explicit(Propagation::Background);
            delete::delete_object(state, resource, name, &object, background, false);
        }
    }
    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
    let mut held: BTreeMap<String, usize> = BTreeMap::new();
    for resource in &resources {
        for (_, object) in state.range(resource, Some(name), None) {
            let (group, plural) = resource.split_once('/').unwrap_or(("", resource));
            *remaining.entry(format!("{plural}.{group}")).or_default() += 1;
            for finalizer in delete::finalizers(object) {
                *held.entry(finalizer).or_default() += 1;
            }
        }
    }
    let Some(current) = state.get(NAMESPACE_KEY, "", name) else {
        return;
    };
    let mut next = (**current).clone();
    update_conditions(&mut next, &remaining, &held);
    if remaining.is_empty() {
        let mut left: Vec<String> = spec_finalizers(&next)
            .into_iter()
            .filter(|f| f != KUBERNETES_FINALIZER)
            .collect();
        left.sort();
        left.dedup();
        // An empty list is omitted, as the API server's encoding omits it.
        set_spec_finalizers(&mut next, (!left.is_empty()).then(|| json!(left)));
    }
    if next != **current {
        delete::store(state, NAMESPACE_KEY, next);
    }
}

/// The namespace controller's conditions: every type it owns, False when
/// fine, the two "remaining" ones True while content or finalizers remain.
/// A condition's transition time moves only when its status does.
fn update_conditions(
    namespace: &mut Value,
    remaining: &BTreeMap<String, usize>,
    held: &BTreeMap<String, usize>,
) {
    let list = |counts: &BTreeMap<String, usize>, what: &str| {
        counts
            .iter()
            .map(|(name, n)| format!("{name} {what} {n} resource instances"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let wanted = [
        (
            "NamespaceDeletionDiscoveryFailure",
            false,
            "ResourcesDiscovered",
            "All resources successfully discovered".to_string(),
        ),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            false,
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed".into(),
        ),
        (
            "NamespaceDeletionContentFailure",
            false,
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization".into(),
        ),
        if remaining.is_empty() {
            (
                "NamespaceContentRemaining",
                false,
                "ContentRemoved",
                "All content successfully removed".into(),
            )
        } else {
            (
                "NamespaceContentRemaining",
                true,
                "SomeResourcesRemain",
                format!("Some resources are remaining: {}", list(remaining, "has")),
            )
        },
        if held.is_empty() {
            (
                "NamespaceFinalizersRemaining",
                false,
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished".into(),
            )
        } else {
            (
                "NamespaceFinalizersRemaining",
                true,
                "SomeFinalizersRemain",
                format!(
                    "Some content in the namespace has finalizers remaining: {}",
                    list(held, "in")
                ),
            )
        },
    ];
    let Some(status) = namespace.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(conditions) = conditions.as_array_mut() else {
        return;
    };
    for (type_, on, reason, message) in wanted {
        let state = if on { "True" } else { "False" };
        let existing = conditions
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(type_));
        match existing {
            Some(c) => {
                if c.get("status").and_then(Value::as_str) != Some(state) {
                    c["lastTransitionTime"] = json!(now());
                }
                c["status"] = json!(state);
                c["reason"] = json!(reason);
                c["message"] = json!(message);
            }
            None => conditions.push(json!({
                "type": type_, "status": state, "lastTransitionTime": now(),
                "reason": reason, "message": message,
            })),
        }
    }
}

/// `spec.finalizers` of a namespace.
pub(crate) fn spec_finalizers(namespace: &Value) -> Vec<String> {
    crate::object::strings_at(namespace, "/spec/finalizers")
}

/// Set (or, with `None`, remove) `spec.finalizers`.
fn set_spec_finalizers(namespace: &mut Value, list: Option<Value>) {
    let Some(map) = namespace.as_object_mut() else {
        return;
    };
    let spec = map.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    if let Some(spec) = spec.as_object_mut() {
        match list {
            Some(list) => spec.insert("finalizers".into(), list),
            None => spec.remove("finalizers"),
        };
    }
}

fn phase(namespace: &Value) -> &str {
    namespace
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The label kube-apiserver's defaulting sets on every namespace write.
fn set_name_label(object: &mut Value) {
    let name = meta_str(object, "name").to_string();
    let Some(meta) = meta_mut(object) else {
        return;
    };
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    labels[NAME_LABEL] = json!(name);
}
