//! The garbage collector: what `ownerReferences` and the `orphan` and
//! `foregroundDeletion` finalizers mean, decided as kube-controller-manager's
//! garbage collector decides them, but synchronously, before the write that
//! caused the work releases the state lock.
//!
//! - An object whose owners are all gone (or are themselves waiting for
//!   their dependents to go) is deleted; one that still has a live owner
//!   only loses its references to the others.
//! - An owner being deleted with `orphan` has the reference to it removed
//!   from every dependent, then loses that finalizer.
//! - An owner being deleted with `foregroundDeletion` has its dependents
//!   deleted (in the foreground when they have dependents of their own) and
//!   loses that finalizer once no dependent that has
//!   `blockOwnerDeletion: true` remains.
//!
//! It only ever edits ownerReferences and finalizers or deletes through
//! `delete::delete_object`, so every rule of deletion (finalizers included)
//! applies to what it does. It never deletes an object whose owner it
//! cannot look up (a kind the sandbox does not serve): upstream retries
//! those forever.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::delete::{self, FOREGROUND, ORPHAN, Policy, Propagation};
use crate::object::{is_deleting, meta_str, owner_uids};
use crate::store::{Event, EventType, ObjectRef, State};

/// Objects the collector must look at, deduplicated so that an owner with
/// many dependents is looked at once per round, not once per dependent.
#[derive(Default)]
pub(crate) struct Work {
    /// Objects that may have lost their owners.
    pub(crate) dependents: BTreeSet<ObjectRef>,
    /// Owners being deleted with `orphan` or `foregroundDeletion`.
    pub(crate) owners: BTreeSet<ObjectRef>,
}

/// Note what an event gives the collector to do.
pub(crate) fn observe(state: &State, event: &Event, work: &mut Work) {
    let object = &event.object;
    let at: ObjectRef = (
        event.resource.clone(),
        event.namespace.clone(),
        meta_str(object, "name").to_string(),
    );
    // An owner waiting for its dependents looks again whenever one of them
    // changes: it may have gone, or stopped naming or blocking it.
    let before = event.old.as_deref().map(references).unwrap_or_default();
    for reference in references(object).iter().chain(&before) {
        if let Ok(Some((owner, value))) = resolve(state, &event.namespace, reference)
            && waits_for_dependents(&value)
        {
            work.owners.insert(owner);
        }
    }
    if event.type_ == EventType::Deleted {
        work.dependents
            .extend(state.dependents_of(meta_str(object, "uid")));
    } else if is_deleting(object) {
        if has(object, ORPHAN) || has(object, FOREGROUND) {
            work.owners.insert(at);
        }
    } else if owner_uids(object).next().is_some() {
        work.dependents.insert(at);
    }
}

/// `attemptToDeleteItem`: delete a dependent none of whose owners is alive,
/// or drop its references to owners that are gone or waiting for it.
pub(crate) fn collect(state: &mut State, at: &ObjectRef) {
    let Some(object) = state.get(&at.0, &at.1, &at.2).map(|o| (**o).clone()) else {
        return;
    };
    // Being deleted is a one-way trip; owners waiting on it are handled
    // when it is gone.
    let refs = references(&object);
    if is_deleting(&object) || refs.is_empty() {
        return;
    }
    let (mut solid, mut waiting, mut stale) = (false, false, Vec::new());
    for reference in &refs {
        let uid = reference.get("uid").and_then(Value::as_str).unwrap_or("");
        match resolve(state, &at.1, reference) {
            Err(Unresolvable) => return,
            Ok(None) => stale.push(uid.to_string()),
            Ok(Some((_, owner))) if waits_for_dependents(&owner) => {
                waiting = true;
                stale.push(uid.to_string());
            }
            Ok(Some(_)) => solid = true,
        }
    }
    if solid {
        if !stale.is_empty() {
            let next = without_references(&object, |uid| stale.iter().any(|s| s == uid));
            delete::store(state, &at.0, next);
        }
        return;
    }
    let uid = meta_str(&object, "uid").to_string();
    let dependents = state.dependents_of(&uid);
    let propagation = if waiting && !dependents.is_empty() {
        // A dependent of ours that waits for its own dependents may wait for
        // us too: stop blocking our owners so that the chain can unwind.
        let cycle = dependents.iter().any(|d| {
            state
                .get(&d.0, &d.1, &d.2)
                .is_some_and(|d| waits_for_dependents(d))
        });
        if cycle {
            delete::store(state, &at.0, unblocked(&object));
        }
        Propagation::Foreground
    } else if has(&object, ORPHAN) {
        Propagation::Orphan
    } else if has(&object, FOREGROUND) {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    delete::delete_object(
        state,
        &at.0,
        &at.1,
        &at.2,
        Policy::explicit(propagation),
        false,
    );
}

/// An owner being deleted: orphan its dependents, or delete them and let
/// it go once none blocks it.
pub(crate) fn finish_owner(state: &mut State, at: &ObjectRef) {
    let Some(owner) = state.get(&at.0, &at.1, &at.2).map(|o| (**o).clone()) else {
        return;
    };
    if !is_deleting(&owner) {
        return;
    }
    let uid = meta_str(&owner, "uid").to_string();
    if has(&owner, ORPHAN) {
        for dependent in state.dependents_of(&uid) {
            if let Some(object) = state.get(&dependent.0, &dependent.1, &dependent.2) {
                let next = without_references(object, |u| u == uid);
                delete::store(state, &dependent.0, next);
            }
        }
        remove_finalizer(state, at, ORPHAN);
    } else if has(&owner, FOREGROUND) {
        for dependent in state.dependents_of(&uid) {
            collect(state, &dependent);
        }
        let blocked = state.dependents_of(&uid).iter().any(|d| {
            state.get(&d.0, &d.1, &d.2).is_some_and(|object| {
                references(object).iter().any(|r| {
                    r.get("uid").and_then(Value::as_str) == Some(&uid)
                        && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
                })
            })
        });
        if !blocked {
            remove_finalizer(state, at, FOREGROUND);
        }
    }
}

/// An owner reference that names a kind the sandbox cannot look up.
struct Unresolvable;

/// The live owner a reference names, looked up where upstream looks: in
/// the dependent's namespace for a namespaced kind, cluster-wide otherwise.
/// `Ok(None)` when it is absent or has another uid (a dangling reference).
fn resolve(
    state: &State,
    namespace: &str,
    reference: &Value,
) -> Result<Option<(ObjectRef, Value)>, Unresolvable> {
    let text = |key: &str| reference.get(key).and_then(Value::as_str).unwrap_or("");
    let (group, version) = match text("apiVersion").split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", text("apiVersion")),
    };
    let kind = text("kind");
    let rt = state
        .registry
        .all()
        .find(|rt| rt.group == group && rt.version == version && rt.kind == kind)
        .cloned()
        .ok_or(Unresolvable)?;
    if rt.namespaced && namespace.is_empty() {
        // A cluster-scoped object cannot be owned by a namespaced one.
        return Err(Unresolvable);
    }
    let namespace = if rt.namespaced { namespace } else { "" };
    let at = (rt.key(), namespace.to_string(), text("name").to_string());
    Ok(state
        .get(&at.0, &at.1, &at.2)
        .filter(|owner| meta_str(owner, "uid") == text("uid"))
        .map(|owner| (at.clone(), (**owner).clone())))
}

fn references(object: &Value) -> Vec<Value> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn has(object: &Value, finalizer: &str) -> bool {
    delete::finalizers(object).iter().any(|f| f == finalizer)
}

/// Being deleted in the foreground: waiting for its dependents to go.
fn waits_for_dependents(object: &Value) -> bool {
    is_deleting(object) && has(object, FOREGROUND)
}

fn without_references(object: &Value, drop: impl Fn(&str) -> bool) -> Value {
    let mut next = object.clone();
    retain(&mut next, "ownerReferences", |r| {
        !drop(r.get("uid").and_then(Value::as_str).unwrap_or(""))
    });
    next
}

/// Keep the items of a metadata list that pass `keep`; an emptied list is
/// dropped, as the API server's encoding omits it.
fn retain(object: &mut Value, field: &str, keep: impl Fn(&Value) -> bool) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(Value::Array(list)) = meta.get_mut(field) {
        list.retain(|item| keep(item));
        if list.is_empty() {
            meta.remove(field);
        }
    }
}

/// Every reference that blocks its owner's deletion, made non-blocking.
fn unblocked(object: &Value) -> Value {
    let mut next = object.clone();
    if let Some(Value::Array(list)) = next.pointer_mut("/metadata/ownerReferences") {
        for reference in list.iter_mut().filter_map(Value::as_object_mut) {
            if reference.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
                reference.insert("blockOwnerDeletion".into(), Value::Bool(false));
            }
        }
    }
    next
}

/// Drop one finalizer; the object goes if it was the last.
fn remove_finalizer(state: &mut State, at: &ObjectRef, finalizer: &str) {
    let Some(object) = state.get(&at.0, &at.1, &at.2) else {
        return;
    };
    let mut next = (**object).clone();
    retain(&mut next, "finalizers", |f| f != finalizer);
    delete::store(state, &at.0, next);
}
