//! The cluster's built-in controllers, run to a standstill after every
//! write, before the state lock is released: the garbage collector
//! (`gc.rs`), the namespace controller (`namespaces.rs`) and the removal of
//! a deleted CRD's objects. They read the events the write committed, and
//! the events their own writes commit, until a round commits nothing.
//!
//! Running them inside the write makes their outcome deterministic and
//! visible to the next request; the order of events a watcher sees is the
//! one kube-apiserver would produce. It must never await or block: every
//! step is a bounded piece of work on the state, and every step that writes
//! removes something or changes a value for good (a timestamp, a finalizer,
//! a reference), so the loop ends.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::store::{CRD_KEY, EventType, State};
use crate::{gc, namespaces};

/// Apply every consequence of the changes committed since the last call.
pub(crate) fn reconcile(state: &mut State) {
    let mut gc_work = gc::Work::default();
    let mut namespaces_work = BTreeSet::new();
    loop {
        for event in state.take_pending() {
            if event.resource == CRD_KEY && event.type_ == EventType::Deleted {
                remove_custom_resources(state, &event.object);
            }
            gc::observe(state, &event, &mut gc_work);
            namespaces::observe(state, &event, &mut namespaces_work);
        }
        // One step at a time, then back to the events it caused: a
        // dependent deleted here is noticed before its owner is looked at.
        if let Some(at) = gc_work.dependents.pop_first() {
            gc::collect(state, &at);
        } else if let Some(at) = gc_work.owners.pop_first() {
            gc::finish_owner(state, &at);
        } else if let Some(name) = namespaces_work.pop_first() {
            namespaces::sync(state, &name);
        } else {
            break;
        }
    }
}

/// A deleted CRD takes its resource and every object of it along.
fn remove_custom_resources(state: &mut State, crd: &Value) {
    let text = |pointer: &str| crd.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let key = format!("{}/{}", text("/spec/group"), text("/spec/names/plural"));
    state.registry.unregister_crd(crd);
    let doomed: Vec<Value> = state
        .range(&key, None, None)
        .map(|(_, o)| (**o).clone())
        .collect();
    for object in doomed {
        state.remove(&key, object);
    }
}
