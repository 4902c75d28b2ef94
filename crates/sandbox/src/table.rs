//! `meta.k8s.io/v1 Table` output, as kubectl asks for it: Name and Age
//! columns plus a CRD's additionalPrinterColumns (fields, indexes and
//! equality filters of JSONPath). Pure.

use serde_json::{Value, json};

use crate::object::{age_seconds, human_age, meta_str};
use crate::registry::ResourceType;

/// List metadata shared by lists and tables.
#[derive(Debug, Default, Clone)]
pub(crate) struct ListMeta {
    pub(crate) resource_version: String,
    pub(crate) continue_token: Option<String>,
}

/// Whether an Accept header asks for a Table (protobuf is ignored: the
/// answer is always JSON).
pub(crate) fn wanted(accept: &str) -> bool {
    accept.split(',').any(|part| part.contains("as=Table"))
}

/// A Table of `objects`; `with_columns` is false for watch events after the
/// first, as the API server sends column definitions once.
pub(crate) fn table(
    rt: &ResourceType,
    objects: &[&Value],
    meta: &ListMeta,
    with_columns: bool,
    include: Option<&str>,
) -> Value {
    let mut columns = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
    ];
    if counts_data(rt) {
        columns.push(json!({"name": "Data", "type": "string", "format": "", "description": CONFIG_MAP_DATA, "priority": 0}));
    }
    for col in &rt.printer_columns {
        columns.push(json!({"name": col.name, "type": col.type_, "format": col.format, "description": col.description, "priority": col.priority}));
    }
    let has_age = rt
        .printer_columns
        .iter()
        .any(|c| c.name.eq_ignore_ascii_case("age"));
    if !has_age {
        columns.push(json!({"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}));
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| row(rt, o, has_age, include))
        .collect();
    let mut list_meta = json!({"resourceVersion": meta.resource_version});
    if let Some(token) = &meta.continue_token {
        list_meta["continue"] = json!(token);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": if with_columns { Value::Array(columns) } else { Value::Array(Vec::new()) },
        "rows": rows,
    })
}

fn row(rt: &ResourceType, object: &Value, has_age: bool, include: Option<&str>) -> Value {
    let age = |time: &str| age_seconds(time).map_or(json!("<unknown>"), |s| json!(human_age(s)));
    let mut cells = vec![json!(meta_str(object, "name"))];
    if counts_data(rt) {
        let count = |field: &str| {
            object
                .get(field)
                .and_then(Value::as_object)
                .map_or(0, |m| m.len())
        };
        cells.push(json!(count("data") + count("binaryData")));
    }
    for col in &rt.printer_columns {
        let value = lookup(object, &col.json_path)
            .cloned()
            .unwrap_or(Value::Null);
        let cell = match (col.type_.as_str(), &value) {
            ("date", Value::String(time)) => age(time),
            (_, Value::Object(_) | Value::Array(_)) => json!(value.to_string()),
            _ => value,
        };
        cells.push(cell);
    }
    if !has_age {
        cells.push(age(meta_str(object, "creationTimestamp")));
    }
    let object = match include {
        Some("None") => Value::Null,
        Some("Object") => object.clone(),
        _ => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": object.get("metadata").cloned().unwrap_or(json!({})),
        }),
    };
    json!({"cells": cells, "object": object})
}

/// ConfigMap's printer (kube-apiserver's `printConfigMap`,
/// pkg/printers/internalversion/printers.go) adds a Data column between
/// Name and Age: the number of `data` and `binaryData` entries.
fn counts_data(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.kind == "ConfigMap"
}

/// The Data column's description: ConfigMap's `data` field documentation.
const CONFIG_MAP_DATA: &str = "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.";

/// Evaluate a printer column's JSONPath: fields (`.a.b`), indexes
/// (`[0]`) and equality filters over a list (`[?(@.type=="Ready")]`, the
/// first element that matches), optionally in `{}`.
pub(crate) fn lookup<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut node = object;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[?(") {
            let end = after.find(")]")?;
            node = first_match(node, &after[..end])?;
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            node = node.get(after[..end].trim().parse::<usize>().ok()?)?;
            rest = &after[end + 1..];
        } else {
            let after = rest.strip_prefix('.').unwrap_or(rest);
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end > 0 {
                node = node.get(&after[..end])?;
            }
            rest = &after[end..];
        }
    }
    Some(node)
}

/// The first element of the list `node` for which `@.path == "value"`
/// (single or double quotes) holds.
fn first_match<'a>(node: &'a Value, filter: &str) -> Option<&'a Value> {
    let (left, right) = filter.split_once("==")?;
    let path = left.trim().strip_prefix('@')?;
    let right = right.trim();
    let wanted = right
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| right.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))?;
    node.as_array()?
        .iter()
        .find(|item| lookup(item, path).and_then(Value::as_str) == Some(wanted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_json_paths_resolve() {
        let obj = json!({"status": {"phase": "Ready", "conditions": [{"type": "A"}]}});
        assert_eq!(lookup(&obj, ".status.phase"), Some(&json!("Ready")));
        assert_eq!(
            lookup(&obj, "{.status.conditions[0].type}"),
            Some(&json!("A"))
        );
        assert_eq!(lookup(&obj, ".spec.x"), None);
    }

    #[test]
    fn an_equality_filter_picks_the_first_matching_element() {
        let obj = json!({"status": {"conditions": [
            {"type": "Connected", "status": "True"},
            {"type": "Ready", "status": "False"},
        ]}});
        let ready = r#".status.conditions[?(@.type=="Ready")].status"#;
        assert_eq!(lookup(&obj, ready), Some(&json!("False")));
        let quoted = ".status.conditions[?(@.type=='Connected')].status";
        assert_eq!(lookup(&obj, quoted), Some(&json!("True")));
        let absent = r#".status.conditions[?(@.type=="Degraded")].status"#;
        assert_eq!(lookup(&obj, absent), None);
        assert_eq!(lookup(&json!({}), ready), None);
    }
}
