//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902). Strategic merge
//! patch is served as a merge patch: lists are replaced, not merged by key,
//! and `$patch` directives are not interpreted. Pure.

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// Apply an RFC 7386 merge patch in place.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target_map) = target {
        for (key, value) in patch_map {
            if value.is_null() {
                target_map.remove(key);
            } else {
                merge(target_map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Apply an RFC 6902 JSON patch, all operations or none.
pub(crate) fn json_patch(target: &Value, patch: &Value) -> ApiResult<Value> {
    let ops = patch
        .as_array()
        .ok_or_else(|| ApiError::bad_request("a JSON patch must be a list of operations"))?;
    let mut doc = target.clone();
    for op in ops {
        let field = |name: &str| -> ApiResult<&str> {
            op.get(name).and_then(Value::as_str).ok_or_else(|| {
                ApiError::bad_request(format!("JSON patch operation without \"{name}\": {op}"))
            })
        };
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                ApiError::bad_request(format!("JSON patch operation without \"value\": {op}"))
            })
        };
        let path = field("path")?;
        match field("op")? {
            "add" => add(&mut doc, path, value()?)?,
            "remove" => {
                remove(&mut doc, path)?;
            }
            "replace" => {
                remove(&mut doc, path)?;
                add(&mut doc, path, value()?)?;
            }
            "move" => {
                let moved = remove(&mut doc, field("from")?)?;
                add(&mut doc, path, moved)?;
            }
            "copy" => {
                let copied = doc
                    .pointer(field("from")?)
                    .cloned()
                    .ok_or_else(|| missing(field("from").unwrap_or_default()))?;
                add(&mut doc, path, copied)?;
            }
            "test" => {
                if !passes_test(&doc, path, &value()?)? {
                    return Err(ApiError::invalid_patch(format!("test failed at {path}")));
                }
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown JSON patch operation {other:?}"
                )));
            }
        }
    }
    Ok(doc)
}

/// A `test` operation as kube-apiserver's JSON patch library runs it: a
/// member missing from an existing object tests equal to `null`. Clients
/// rely on it: kube-runtime's finalizer helper adds the first finalizer only
/// after testing that `/metadata/finalizers` is null.
fn passes_test(doc: &Value, path: &str, want: &Value) -> ApiResult<bool> {
    if let Some(found) = doc.pointer(path) {
        return Ok(found == want);
    }
    let (parent, _) = split(path)?;
    Ok(want.is_null() && doc.pointer(parent).is_some_and(Value::is_object))
}

fn missing(path: &str) -> ApiError {
    ApiError::invalid_patch(format!("no value at {path}"))
}

/// Split a JSON pointer into its parent pointer and unescaped last token.
fn split(path: &str) -> ApiResult<(&str, String)> {
    let at = path
        .rfind('/')
        .ok_or_else(|| ApiError::bad_request(format!("invalid JSON pointer {path:?}")))?;
    let last = path[at + 1..].replace("~1", "/").replace("~0", "~");
    Ok((&path[..at], last))
}

fn add(doc: &mut Value, path: &str, value: Value) -> ApiResult<()> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(last, value);
            Ok(())
        }
        Some(Value::Array(list)) => {
            let index = if last == "-" {
                list.len()
            } else {
                last.parse::<usize>().map_err(|_| missing(path))?
            };
            if index > list.len() {
                return Err(missing(path));
            }
            list.insert(index, value);
            Ok(())
        }
        _ => Err(missing(parent)),
    }
}

fn remove(doc: &mut Value, path: &str) -> ApiResult<Value> {
    let (parent, last) = split(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => map.remove(&last).ok_or_else(|| missing(path)),
        Some(Value::Array(list)) => {
            let index = last.parse::<usize>().map_err(|_| missing(path))?;
            if index >= list.len() {
                return Err(missing(path));
            }
            Ok(list.remove(index))
        }
        _ => Err(missing(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_nulls_remove_and_maps_merge() {
        let mut doc = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge(&mut doc, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(doc, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn json_patch_supports_every_operation() {
        let doc = json!({"a": 1, "list": [1, 2], "m": {"x/y": 5}});
        let patch = json!([
            {"op": "test", "path": "/a", "value": 1},
            {"op": "add", "path": "/list/-", "value": 3},
            {"op": "replace", "path": "/a", "value": 2},
            {"op": "copy", "from": "/a", "path": "/b"},
            {"op": "move", "from": "/m/x~1y", "path": "/z"},
            {"op": "remove", "path": "/list/0"}
        ]);
        let out = json_patch(&doc, &patch).unwrap();
        assert_eq!(
            out,
            json!({"a": 2, "b": 2, "list": [2, 3], "m": {}, "z": 5})
        );
        let failed = json_patch(&doc, &json!([{"op": "test", "path": "/a", "value": 9}]));
        assert_eq!(failed.unwrap_err().code, 422);
    }

    #[test]
    fn a_missing_member_tests_equal_to_null_only() {
        let doc = json!({"metadata": {"name": "x"}});
        let absent_is_null = json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]);
        assert!(json_patch(&doc, &absent_is_null).is_ok());
        let absent_is_not_a_list =
            json!([{"op": "test", "path": "/metadata/finalizers", "value": []}]);
        assert!(json_patch(&doc, &absent_is_not_a_list).is_err());
        let no_parent = json!([{"op": "test", "path": "/spec/replicas", "value": null}]);
        assert!(json_patch(&doc, &no_parent).is_err());
    }
}
