//! A stored object's JSON as the CEL value a rule sees, typed by the schema
//! node it sits at, as kube-apiserver types it. Pure.
//!
//! What the schema does not declare is not visible: an object with
//! `properties` shows only those (under their escaped names), a map shows
//! its `additionalProperties`, and fields kept by
//! `x-kubernetes-preserve-unknown-fields` stay out of reach. It must never
//! fail: a value the schema does not describe becomes the plain JSON value.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value as Cel;
use cel::objects::Key;
use serde_json::Value;

/// CEL's reserved words: a property named like one is `__word__` in rules.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The name a property has in CEL, or `None` when it cannot be named there
/// (it starts with a digit or holds a character other than letters, digits,
/// `_`, `-`, `.` and `/`).
pub(crate) fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// `value` as CEL sees it at a node with `schema`. At the root of a resource
/// (or of an embedded one) `apiVersion`, `kind` and `metadata.name` and
/// `metadata.generateName` are visible too.
pub(crate) fn to_cel(value: &Value, schema: &Value, resource_root: bool) -> Cel {
    let mut converted = convert(value, schema);
    if resource_root && let (Cel::Map(map), Value::Object(object)) = (&mut converted, value) {
        let mut fields: HashMap<Key, Cel> = (*map.map).clone();
        for key in ["apiVersion", "kind"] {
            if let Some(Value::String(s)) = object.get(key) {
                fields.insert(key.into(), Cel::from(s.as_str()));
            }
        }
        if let Some(Value::Object(meta)) = object.get("metadata") {
            let mut visible: HashMap<Key, Cel> = HashMap::new();
            for key in ["name", "generateName"] {
                if let Some(Value::String(s)) = meta.get(key) {
                    visible.insert(key.into(), Cel::from(s.as_str()));
                }
            }
            fields.insert("metadata".into(), Cel::from(visible));
        }
        converted = Cel::from(fields);
    }
    converted
}

fn convert(value: &Value, schema: &Value) -> Cel {
    let declared = schema.get("type").and_then(Value::as_str).unwrap_or("");
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => {
            // `type: number` is a double even when written without a
            // fraction; an integer stays an int wherever it fits.
            match (declared, n.as_i64(), n.as_u64()) {
                ("number", _, _) => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
                (_, Some(i), _) => Cel::Int(i),
                (_, None, Some(u)) => Cel::UInt(u),
                _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
            }
        }
        Value::String(s) => Cel::from(s.as_str()),
        Value::Array(items) => {
            let item_schema = schema.get("items").unwrap_or(&Value::Null);
            Cel::List(Arc::new(
                items
                    .iter()
                    .map(|item| convert(item, item_schema))
                    .collect(),
            ))
        }
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let mut fields: HashMap<Key, Cel> = HashMap::new();
            for (key, field) in map {
                if let Some(sub) = properties.and_then(|p| p.get(key)) {
                    if let Some(name) = escape(key) {
                        fields.insert(name.into(), convert(field, sub));
                    }
                } else if let Some(sub) = additional {
                    fields.insert(key.as_str().into(), convert(field, sub));
                } else if properties.is_none() && declared.is_empty() {
                    // No schema at all below here: the JSON as it is.
                    fields.insert(key.as_str().into(), convert(field, &Value::Null));
                }
            }
            Cel::from(fields)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn property_names_escape_as_upstream() {
        for (name, want) in [
            ("namespace", Some("__namespace__")),
            ("foo-bar", Some("foo__dash__bar")),
            ("a.b/c", Some("a__dot__b__slash__c")),
            ("x__y", Some("x__underscores__y")),
            ("plain_name", Some("plain_name")),
            ("1st", None),
            ("white space", None),
            ("", None),
        ] {
            assert_eq!(escape(name).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn values_take_their_type_from_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "ratio": {"type": "number"},
            "count": {"type": "integer"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }});
        let value = json!({"ratio": 1, "count": 2, "labels": {"a-b": "c"}, "free": {"x": 1}, "undeclared": true});
        let Cel::Map(map) = to_cel(&value, &schema, false) else {
            panic!("an object is a map");
        };
        let get = |k: &str| map.map.get(&Key::from(k)).cloned();
        assert_eq!(get("ratio"), Some(Cel::Float(1.0)));
        assert_eq!(get("count"), Some(Cel::Int(2)));
        assert_eq!(get("undeclared"), None);
        let Some(Cel::Map(labels)) = get("labels") else {
            panic!("labels are a map")
        };
        assert_eq!(labels.map.get(&Key::from("a-b")), Some(&Cel::from("c")));
        let Some(Cel::Map(free)) = get("free") else {
            panic!("free is a map")
        };
        assert!(free.map.is_empty(), "preserved fields stay out of reach");
    }

    #[test]
    fn a_resource_root_shows_its_identity() {
        let value = json!({"apiVersion": "ferry.dev/v1alpha1", "kind": "K",
            "metadata": {"name": "a", "namespace": "n", "labels": {"x": "y"}}, "spec": {}});
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let Cel::Map(map) = to_cel(&value, &schema, true) else {
            panic!("an object is a map");
        };
        assert_eq!(map.map.get(&Key::from("kind")), Some(&Cel::from("K")));
        let Some(Cel::Map(meta)) = map.map.get(&Key::from("metadata")) else {
            panic!("metadata is visible")
        };
        assert_eq!(meta.map.len(), 1, "only name and generateName");
    }
}
