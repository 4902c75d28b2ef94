//! PersistentVolumeClaims of the realistic mode bind at once, as with a
//! provisioner that never waits: `status.phase: Bound`, the access modes
//! and the requested storage as capacity, and a volume name.

use serde_json::{Value, json};

use super::CLAIMS;
use crate::object::{is_deleting, meta_str};
use crate::store::State;

/// Bind every claim that is not yet bound.
pub(super) fn bind(state: &mut State) {
    let pending: Vec<Value> = state
        .range(CLAIMS, None, None)
        .map(|(_, c)| (**c).clone())
        .filter(|c| !is_deleting(c))
        .filter(|c| c.pointer("/status/phase").and_then(Value::as_str) != Some("Bound"))
        .collect();
    for mut claim in pending {
        let volume = format!("pvc-{}", meta_str(&claim, "uid"));
        if let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut) {
            spec.entry("volumeName").or_insert(json!(volume));
        }
        let mut status = json!({"phase": "Bound"});
        if let Some(modes) = claim.pointer("/spec/accessModes") {
            status["accessModes"] = modes.clone();
        }
        if let Some(storage) = claim.pointer("/spec/resources/requests/storage") {
            status["capacity"] = json!({"storage": storage});
        }
        claim["status"] = status;
        let annotations = claim
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .map(|m| m.entry("annotations").or_insert(json!({})));
        if let Some(Value::Object(annotations)) = annotations {
            annotations.insert("pv.kubernetes.io/bind-completed".into(), json!("yes"));
        }
        state.put(CLAIMS, claim);
    }
}
