//! Per-kind defaults and checks the API server applies on every write of a
//! built-in kind: Deployment and StatefulSet replicas, Secret `stringData`, CRD names,
//! validation rules and status. (A Namespace's rules live with its
//! lifecycle, in `namespaces.rs`.)

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use crate::object::{meta_str, now};
use crate::registry::ResourceType;
use crate::store::State;

pub(crate) fn apply(rt: &ResourceType, object: &mut Value, state: &State) -> ApiResult<()> {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments" | "statefulsets") => {
            if object.pointer("/spec/replicas").is_none_or(Value::is_null)
                && let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.insert("replicas".into(), json!(1));
            }
            match object.pointer("/spec/replicas").and_then(Value::as_i64) {
                Some(n) if n < 0 => Err(invalid(
                    rt,
                    object,
                    "spec.replicas",
                    format!("Invalid value: {n}: must be greater than or equal to 0"),
                )),
                _ => Ok(()),
            }
        }
        ("", "secrets") => {
            if let Some(Value::Object(strings)) =
                object.as_object_mut().and_then(|m| m.remove("stringData"))
            {
                let data = object
                    .as_object_mut()
                    .map(|m| m.entry("data").or_insert_with(|| json!({})));
                if let Some(Value::Object(data)) = data {
                    for (key, value) in strings {
                        let text = value.as_str().unwrap_or_default().to_string();
                        data.insert(key, json!(STANDARD.encode(text)));
                    }
                }
            }
            Ok(())
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => crd(rt, object, state),
        _ => Ok(()),
    }
}

fn invalid(rt: &ResourceType, object: &Value, field: &str, message: String) -> ApiError {
    let cause = Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message,
    };
    ApiError::invalid(&rt.group, &rt.kind, meta_str(object, "name"), &[cause])
}

/// A CRD must be named `<plural>.<group>`, must not take over another CRD's
/// resource, and is accepted and established at once.
fn crd(rt: &ResourceType, object: &mut Value, state: &State) -> ApiResult<()> {
    let group = object
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let plural = object
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = object
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = meta_str(object, "name").to_string();
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return Err(invalid(
            rt,
            object,
            "spec",
            "Required value: spec.group, spec.names.plural and spec.names.kind are required".into(),
        ));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            rt,
            object,
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let versions = object
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        return Err(invalid(
            rt,
            object,
            "spec.versions",
            "Required value: must have exactly one version marked as storage version".into(),
        ));
    }
    // Rules are compiled only for schemas that changed: the schema a version
    // serves now was checked when it was stored.
    let rule_causes = crate::validation_rules::check_crd(object, |version, schema| {
        state
            .registry
            .get(&group, version, &plural)
            .is_some_and(|served| served.schema.as_ref() == Some(schema))
    });
    if !rule_causes.is_empty() {
        return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &rule_causes));
    }
    let owned_elsewhere = state.registry.serves(&group, &plural)
        && state.get(crate::store::CRD_KEY, "", &name).is_none();
    if owned_elsewhere {
        return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
    }
    let storage: Vec<Value> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    let names = object.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let established = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.get("type").and_then(Value::as_str) == Some("Established"))
        });
    if established {
        // An update: keep the conditions (and their times), follow the names.
        if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) {
            status.insert("acceptedNames".into(), names);
            status.insert("storedVersions".into(), Value::Array(storage));
        }
        return Ok(());
    }
    let time = now();
    if let Some(map) = object.as_object_mut() {
        map.insert(
            "status".into(),
            json!({
                "acceptedNames": names,
                "storedVersions": storage,
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": time},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": time}
                ]
            }),
        );
    }
    Ok(())
}
