//! The metadata rules every write keeps so that deletion works, as
//! `ValidateObjectMeta(Update)` has them: no finalizer added to an object
//! being deleted, not both `orphan` and `foregroundDeletion`, only the
//! standard finalizers without a `domain/` prefix on built-in kinds, and
//! ownerReferences that name their owner in full with at most one
//! controller. Pure: it judges a write, it never changes one.

use serde_json::{Value, json};

use crate::delete::{FOREGROUND, ORPHAN, finalizers};
use crate::error::{ApiError, ApiResult, Cause};
use crate::namespaces;
use crate::object::{is_deleting, meta_str};
use crate::registry::ResourceType;

/// Judge the metadata of `new` (replacing `old`, if any): a 422 naming
/// each field that breaks a rule.
pub(crate) fn check(
    rt: &ResourceType,
    builtin: bool,
    old: Option<&Value>,
    new: &Value,
) -> ApiResult<()> {
    let mut causes = Vec::new();
    let list = finalizers(new);
    if let Some(old) = old.filter(|old| is_deleting(old)) {
        let before = finalizers(old);
        let mut added: Vec<&String> = list.iter().filter(|f| !before.contains(f)).collect();
        added.sort();
        added.dedup();
        if !added.is_empty() {
            let go_list: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
            causes.push(Cause {
                reason: "FieldValueForbidden",
                field: "metadata.finalizers".into(),
                message: format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    go_list.join(", ")
                ),
            });
        }
    }
    causes.extend(owner_reference_causes(new));
    if list.iter().any(|f| f == ORPHAN) && list.iter().any(|f| f == FOREGROUND) {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "metadata.finalizers".into(),
            message: format!(
                "Invalid value: {}: finalizer {ORPHAN} and {FOREGROUND} cannot be both set",
                serde_json::to_string(&list).unwrap_or_default()
            ),
        });
    }
    if builtin {
        for (i, f) in list.iter().enumerate() {
            if !f.contains('/') && !is_standard_finalizer(f) {
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    field: format!("metadata.finalizers[{i}]"),
                    message: format!("Invalid value: {f:?}: name is neither a standard finalizer name nor is it fully qualified"),
                });
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &rt.group,
            &rt.kind,
            meta_str(new, "name"),
            &causes,
        ))
    }
}

/// The finalizers that may be written without a `domain/` prefix.
pub(crate) fn is_standard_finalizer(name: &str) -> bool {
    matches!(name, namespaces::KUBERNETES_FINALIZER | ORPHAN | FOREGROUND)
}

fn owner_reference_causes(object: &Value) -> Vec<Cause> {
    let Some(refs) = object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    let mut controllers = Vec::new();
    for (i, reference) in refs.iter().enumerate() {
        let text = |key: &str| reference.get(key).and_then(Value::as_str).unwrap_or("");
        let path = format!("metadata.ownerReferences[{i}]");
        let api_version = text("apiVersion");
        let required = |field: &str| Cause {
            reason: "FieldValueRequired",
            field: format!("{path}.{field}"),
            message: "Required value: must not be empty".into(),
        };
        if api_version.is_empty() {
            causes.push(required("apiVersion"));
        } else if api_version.split('/').count() > 2 || api_version.ends_with('/') {
            causes.push(Cause {
                reason: "FieldValueInvalid",
                field: format!("{path}.apiVersion"),
                message: format!(
                    "Invalid value: {api_version:?}: must be <group>/<version> or <version>"
                ),
            });
        }
        for field in ["kind", "name", "uid"] {
            if text(field).is_empty() {
                causes.push(required(field));
            }
        }
        if reference.get("controller").and_then(Value::as_bool) == Some(true) {
            controllers.push(format!("{}/{}", text("kind"), text("name")));
        }
    }
    if controllers.len() > 1 {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "metadata.ownerReferences".into(),
            message: format!(
                "Invalid value: {}: Only one reference can have Controller set to true. Found \"true\" in references for {} and {}",
                go_owner_references(refs),
                controllers[0],
                controllers[1]
            ),
        });
    }
    causes
}

/// ownerReferences rendered as Go's encoding/json writes the struct: its
/// fields in declaration order, the optional ones only when set.
fn go_owner_references(refs: &[Value]) -> String {
    let items: Vec<String> = refs
        .iter()
        .map(|r| {
            let mut fields = Vec::new();
            for key in ["apiVersion", "kind", "name", "uid"] {
                let value = r.get(key).and_then(Value::as_str).unwrap_or("");
                fields.push(format!("{key:?}:{}", json!(value)));
            }
            for key in ["controller", "blockOwnerDeletion"] {
                if let Some(flag) = r.get(key).and_then(Value::as_bool) {
                    fields.push(format!("{key:?}:{flag}"));
                }
            }
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_controllers_are_refused_with_the_references_as_go_prints_them() {
        let object = json!({"metadata": {"name": "x", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "2", "controller": true, "blockOwnerDeletion": false},
        ]}});
        let causes = owner_reference_causes(&object);
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].message,
            "Invalid value: [{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"a\",\"uid\":\"1\",\"controller\":true},{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"b\",\"uid\":\"2\",\"controller\":true,\"blockOwnerDeletion\":false}]: Only one reference can have Controller set to true. Found \"true\" in references for ConfigMap/a and ConfigMap/b"
        );
    }
}
