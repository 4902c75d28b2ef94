//! Structural-schema checks for custom resources: pruning of unknown fields
//! and validation against a CRD version's `openAPIV3Schema`, with the field
//! paths and messages the API server uses. Pure.
//!
//! Supported keywords: `type`, `nullable`, `required`, `properties`,
//! `additionalProperties`, `items`, `enum`, `minimum`/`maximum` (and their
//! `exclusive*` flags), `pattern`, `minLength`/`maxLength`,
//! `minItems`/`maxItems`, `minProperties`/`maxProperties`, `allOf`/`anyOf`/
//! `oneOf`/`not`, `x-kubernetes-preserve-unknown-fields`,
//! `x-kubernetes-int-or-string`. Not checked: `format`, `uniqueItems` and
//! list-type/map-type uniqueness. `x-kubernetes-validations` (CEL) are
//! `validation_rules`' part.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use serde_json::{Map, Value};

use crate::error::Cause;

/// One step of a field path: a map key, or a list index with the item's
/// `name` when it has one (server-side apply names list items by it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    Key(String),
    Index(usize, Option<String>),
}

/// Where a field is in an object, from its root.
pub(crate) type FieldPath = Vec<Step>;

/// `spec.items[0].name`: a path as strict decoding errors name it.
pub(crate) fn dotted(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Step::Index(i, _) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The step into the `i`th item of a list.
pub(crate) fn index_step(i: usize, item: &Value) -> Step {
    let name = item.get("name").and_then(Value::as_str).map(String::from);
    Step::Index(i, name)
}

/// Remove fields the schema does not declare (unless it preserves unknown
/// fields) and `null`s where the schema is not nullable. Returns the paths
/// of the unknown fields removed, in the order met.
///
/// `apiVersion`, `kind` and `metadata` of the object and of embedded
/// resources (`x-kubernetes-embedded-resource`) are left alone: the API
/// server checks them against ObjectMeta, not against the schema.
pub(crate) fn prune(value: &mut Value, schema: &Value) -> Vec<FieldPath> {
    let mut unknown = Vec::new();
    prune_at(value, schema, true, &mut Vec::new(), &mut unknown);
    unknown
}

fn prune_at(
    value: &mut Value,
    schema: &Value,
    embedded: bool,
    path: &mut FieldPath,
    unknown: &mut Vec<FieldPath>,
) {
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = embedded || flag(schema, "x-kubernetes-embedded-resource");
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let declares_object = schema.get("type").and_then(Value::as_str) == Some("object");
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let sub = properties
                    .and_then(|p| p.get(&key))
                    .or(additional.filter(|a| a.is_object()));
                match (sub, map.get_mut(&key)) {
                    (Some(sub), Some(field)) if field.is_null() && !flag(sub, "nullable") => {
                        map.remove(&key);
                    }
                    (Some(sub), Some(field)) => {
                        path.push(Step::Key(key));
                        prune_at(field, sub, false, path, unknown);
                        path.pop();
                    }
                    _ => {
                        let keep = preserve
                            || additional == Some(&Value::Bool(true))
                            || (!declares_object && properties.is_none());
                        if !keep {
                            map.remove(&key);
                            let mut gone = path.clone();
                            gone.push(Step::Key(key));
                            unknown.push(gone);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    path.push(index_step(i, item));
                    prune_at(item, item_schema, false, path, unknown);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

/// Check `value` against `schema`; causes name the failing field paths.
pub(crate) fn validate(value: &Value, schema: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    // The API server checks metadata itself; the schema covers the rest.
    if let (Value::Object(map), Some(properties)) =
        (value, schema.get("properties").and_then(Value::as_object))
    {
        for (key, sub) in properties {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(field) = map.get(key) {
                check(field, sub, key, &mut causes);
            }
        }
        for required in strings(schema.get("required")) {
            if !map.contains_key(required)
                && !matches!(required, "apiVersion" | "kind" | "metadata")
            {
                causes.push(cause(
                    "FieldValueRequired",
                    required.to_string(),
                    "Required value".into(),
                ));
            }
        }
    }
    causes
}

fn cause(reason: &'static str, field: String, message: String) -> Cause {
    Cause {
        reason,
        field,
        message,
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn strings(v: Option<&Value>) -> impl Iterator<Item = &str> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as the API server quotes it in messages.
fn shown(v: &Value) -> String {
    match v {
        Value::Array(_) | Value::Object(_) => format!("\"{}\"", type_name(v)),
        other => other.to_string(),
    }
}

fn type_matches(value: &Value, want: &str) -> bool {
    match want {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "number" => value.is_number(),
        _ => true,
    }
}

fn check(value: &Value, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    if value.is_null() && flag(schema, "nullable") {
        return;
    }
    let invalid = |causes: &mut Vec<Cause>, why: String| {
        causes.push(cause(
            "FieldValueInvalid",
            path.to_string(),
            format!("Invalid value: {}: {path} in body {why}", shown(value)),
        ));
    };
    if flag(schema, "x-kubernetes-int-or-string") {
        if !(value.is_string() || type_matches(value, "integer")) {
            invalid(
                causes,
                format!("must be of type integer-or-string: {}", shown(value)),
            );
            return;
        }
    } else if let Some(want) = schema.get("type").and_then(Value::as_str)
        && !type_matches(value, want)
    {
        causes.push(cause(
            "FieldValueTypeInvalid",
            path.to_string(),
            format!(
                "Invalid value: \"{}\": {path} in body must be of type {want}: \"{}\"",
                type_name(value),
                type_name(value)
            ),
        ));
        return;
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let supported: Vec<String> = options.iter().map(Value::to_string).collect();
        causes.push(cause(
            "FieldValueNotSupported",
            path.to_string(),
            format!(
                "Unsupported value: {}: supported values: {}",
                shown(value),
                supported.join(", ")
            ),
        ));
    }
    check_number(value, schema, &invalid, causes);
    check_string(value, schema, path, &invalid, causes);
    match value {
        Value::Array(items) => check_array(items, schema, path, causes),
        Value::Object(map) => check_object(map, schema, path, causes),
        _ => {}
    }
    check_combinators(value, schema, path, &invalid, causes);
}

type Invalid<'a> = dyn Fn(&mut Vec<Cause>, String) + 'a;

fn check_number(value: &Value, schema: &Value, invalid: &Invalid<'_>, causes: &mut Vec<Cause>) {
    let Some(n) = value.as_f64() else { return };
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        if flag(schema, "exclusiveMinimum") && n <= min {
            invalid(causes, format!("should be greater than {}", number(min)));
        } else if n < min {
            invalid(
                causes,
                format!("should be greater than or equal to {}", number(min)),
            );
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        if flag(schema, "exclusiveMaximum") && n >= max {
            invalid(causes, format!("should be less than {}", number(max)));
        } else if n > max {
            invalid(
                causes,
                format!("should be less than or equal to {}", number(max)),
            );
        }
    }
}

fn number(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        f.to_string()
    }
}

fn check_string(
    value: &Value,
    schema: &Value,
    path: &str,
    invalid: &Invalid<'_>,
    causes: &mut Vec<Cause>,
) {
    let Some(s) = value.as_str() else { return };
    let len = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        causes.push(cause(
            "FieldValueTooLong",
            path.to_string(),
            format!("Too long: may not be more than {max} bytes"),
        ));
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        invalid(causes, format!("should be at least {min} chars long"));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        match compiled(pattern) {
            Some(re) if !re.is_match(s) => invalid(causes, format!("should match '{pattern}'")),
            Some(_) => {}
            None => invalid(
                causes,
                format!("has a pattern that does not compile: '{pattern}'"),
            ),
        }
    }
}

/// Patterns are compiled once per process.
fn compiled(pattern: &str) -> Option<Regex> {
    static CACHE: LazyLock<Mutex<HashMap<String, Option<Regex>>>> = LazyLock::new(Default::default);
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok())
        .clone()
}

fn check_array(items: &[Value], schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let n = items.len() as u64;
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && n > max
    {
        causes.push(cause(
            "FieldValueTooMany",
            path.to_string(),
            format!("Too many: {n}: must have at most {max} items"),
        ));
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && n < min
    {
        causes.push(cause(
            "FieldValueInvalid",
            path.to_string(),
            format!("Invalid value: {n}: {path} in body should have at least {min} items"),
        ));
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(item, item_schema, &format!("{path}[{i}]"), causes);
        }
    }
}

fn check_object(map: &Map<String, Value>, schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, field) in map {
        let child = format!("{path}.{key}");
        match (
            properties.and_then(|p| p.get(key)),
            schema.get("additionalProperties"),
        ) {
            (Some(sub), _) => check(field, sub, &child, causes),
            (None, Some(additional)) if additional.is_object() => {
                check(field, additional, &child, causes)
            }
            _ => {}
        }
    }
    for required in strings(schema.get("required")) {
        if !map.contains_key(required) {
            causes.push(cause(
                "FieldValueRequired",
                format!("{path}.{required}"),
                "Required value".into(),
            ));
        }
    }
    let n = map.len() as u64;
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
        && n > max
    {
        causes.push(cause(
            "FieldValueTooMany",
            path.to_string(),
            format!("Too many: {n}: must have at most {max} items"),
        ));
    }
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
        && n < min
    {
        causes.push(cause(
            "FieldValueInvalid",
            path.to_string(),
            format!("Invalid value: {n}: {path} in body should have at least {min} properties"),
        ));
    }
}

fn check_combinators(
    value: &Value,
    schema: &Value,
    path: &str,
    invalid: &Invalid<'_>,
    causes: &mut Vec<Cause>,
) {
    let passes = |sub: &Value| {
        let mut inner = Vec::new();
        check(value, sub, path, &mut inner);
        inner
    };
    for sub in schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        causes.extend(passes(sub));
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array)
        && !any.is_empty()
        && !any.iter().any(|s| passes(s).is_empty())
    {
        invalid(causes, "must validate at least one schema (anyOf)".into());
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array)
        && !one.is_empty()
        && one.iter().filter(|s| passes(s).is_empty()).count() != 1
    {
        invalid(
            causes,
            "must validate one and only one schema (oneOf)".into(),
        );
    }
    if let Some(not) = schema.get("not")
        && passes(not).is_empty()
    {
        invalid(causes, "must not validate the schema (not)".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["mode"], "properties": {
            "mode": {"type": "string", "enum": ["Enforce", "DryRun"]},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
            "thresholds": {"type": "object", "properties": {"minSavingsPercent": {"type": "number", "minimum": 0, "maximum": 100}}},
            "port": {"x-kubernetes-int-or-string": true},
            "items": {"type": "array", "items": {"type": "integer"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "note": {"type": "string", "nullable": true}
        }}}})
    }

    #[test]
    fn a_minimum_violation_names_the_field_path() {
        let obj = json!({"spec": {"mode": "DryRun", "thresholds": {"minSavingsPercent": -1}}});
        let causes = validate(&obj, &schema());
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.thresholds.minSavingsPercent");
        assert!(
            causes[0].message.contains("Invalid value: -1"),
            "{}",
            causes[0].message
        );
        assert!(causes[0].message.contains("greater than or equal to 0"));
    }

    #[test]
    fn each_keyword_reports_its_own_cause() {
        let obj = json!({"spec": {"mode": "Sometimes", "name": "ABCDEFG", "port": true, "items": [1, "x"], "labels": {"a": 1}}});
        let fields: Vec<String> = validate(&obj, &schema())
            .into_iter()
            .map(|c| c.field)
            .collect();
        for want in [
            "spec.mode",
            "spec.name",
            "spec.port",
            "spec.items[1]",
            "spec.labels.a",
        ] {
            assert!(
                fields.iter().any(|f| f == want),
                "{want} missing from {fields:?}"
            );
        }
        let missing = validate(&json!({"spec": {}}), &schema());
        assert_eq!(missing[0].field, "spec.mode");
        assert_eq!(missing[0].message, "Required value");
    }

    #[test]
    fn unknown_fields_are_pruned_unless_preserved() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "extra": 1,
            "spec": {"mode": "DryRun", "bogus": true, "note": null, "free": {"anything": [1]}, "name": null}});
        let mut unknown: Vec<String> = prune(&mut obj, &schema())
            .iter()
            .map(|p| dotted(p))
            .collect();
        unknown.sort();
        assert_eq!(
            obj,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"},
            "spec": {"mode": "DryRun", "note": null, "free": {"anything": [1]}}})
        );
        assert_eq!(
            unknown,
            ["extra", "spec.bogus"],
            "nulls are dropped, not unknown"
        );
    }

    #[test]
    fn embedded_resources_keep_their_type_and_object_metadata() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"type": "object", "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object", "properties": {"x": {"type": "integer"}}}}}}}}}});
        let mut obj = json!({"spec": {"items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "spec": {"x": 1, "y": 2}}]}});
        let unknown: Vec<String> = prune(&mut obj, &schema).iter().map(|p| dotted(p)).collect();
        assert_eq!(unknown, ["spec.items[0].spec.y"]);
        assert_eq!(obj["spec"]["items"][0]["kind"], "ConfigMap");
    }
}
