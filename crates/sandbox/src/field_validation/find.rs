//! Finding the fields strict decoding objects to: unknown fields of an
//! object by the schema that describes it, and repeated keys in a JSON
//! document. Pure.

use std::collections::HashSet;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{MAX_ERRORS, Subject};
use crate::openapi::builtin::{Builtins, OBJECT_META, SCALE, builtins};
use crate::schema::{self, FieldPath, Step, dotted, index_step};

/// The unknown fields of `object`, in upstream's order (document order for
/// built-in kinds, sorted for custom resources). A kind no schema describes
/// has none.
pub(crate) fn unknown_fields(subject: Subject<'_>, object: &Value) -> Vec<FieldPath> {
    let builtins = builtins();
    let mut found = Vec::new();
    match subject {
        Subject::Resource(rt) => match &rt.schema {
            Some(crd_schema) => {
                if let Some(meta) = object.get("metadata") {
                    let meta_schema = builtins.definitions.get(OBJECT_META);
                    let mut path = vec![Step::Key("metadata".into())];
                    if let Some(meta_schema) = meta_schema {
                        walk(builtins, meta, meta_schema, &mut path, &mut found);
                    }
                }
                found.extend(schema::prune(&mut object.clone(), crd_schema));
                found.sort_by_cached_key(|p| dotted(p));
            }
            None => {
                if let Some(s) = builtins.schema_of(&rt.group, &rt.version, &rt.kind) {
                    walk(builtins, object, s, &mut Vec::new(), &mut found);
                }
            }
        },
        Subject::Scale => {
            if let Some(s) = builtins.definitions.get(SCALE) {
                walk(builtins, object, s, &mut Vec::new(), &mut found);
            }
        }
    }
    found.truncate(MAX_ERRORS);
    found
}

/// A built-in schema's view of a value: what Go's strict decoding into the
/// generated structs reports as unknown.
fn walk(
    builtins: &Builtins,
    value: &Value,
    schema: &Value,
    path: &mut FieldPath,
    found: &mut Vec<FieldPath>,
) {
    if found.len() >= MAX_ERRORS {
        return;
    }
    let schema = builtins.resolve(schema);
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return;
    }
    match value {
        Value::Object(map) => {
            let Some(schema) = alternative(builtins, schema, "object") else {
                return;
            };
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            // An object schema without fields is a raw type (RawExtension,
            // FieldsV1, JSON): Go keeps whatever it holds.
            if properties.is_none() && additional.is_none() {
                return;
            }
            for (key, field) in map {
                path.push(Step::Key(key.clone()));
                match (properties.and_then(|p| p.get(key)), additional) {
                    (Some(sub), _) => walk(builtins, field, sub, path, found),
                    (None, Some(sub)) if sub.is_object() => walk(builtins, field, sub, path, found),
                    (None, Some(Value::Bool(true))) => {}
                    _ => found.push(path.clone()),
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            let Some(item_schema) =
                alternative(builtins, schema, "array").and_then(|s| s.get("items"))
            else {
                return;
            };
            for (i, item) in items.iter().enumerate() {
                path.push(index_step(i, item));
                walk(builtins, item, item_schema, path, found);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The schema describing a value of JSON type `kind` (`object`, `array`):
/// the schema itself, or the `oneOf`/`anyOf` alternative for that type
/// (k8s-openapi describes `JSONSchemaPropsOrBool` and its kin so).
fn alternative<'a>(builtins: &'a Builtins, schema: &'a Value, kind: &str) -> Option<&'a Value> {
    let alternatives = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array);
    let Some(alternatives) = alternatives else {
        return Some(schema);
    };
    alternatives.iter().map(|a| builtins.resolve(a)).find(|a| {
        let type_ = a.get("type").and_then(Value::as_str);
        match kind {
            "object" => {
                type_ == Some("object")
                    || a.get("properties").is_some()
                    || a.get("additionalProperties").is_some()
            }
            _ => type_ == Some(kind) || a.get("items").is_some(),
        }
    })
}

/// The paths of repeated keys in a JSON document, or `None` when it is
/// not JSON (a YAML body, or one whose parse error is reported elsewhere).
pub(crate) fn duplicate_fields(body: &[u8]) -> Option<Vec<FieldPath>> {
    let mut found = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let scan = Scan {
        path: &mut Vec::new(),
        found: &mut found,
    };
    scan.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    found.truncate(MAX_ERRORS);
    Some(found)
}

/// Walks a JSON document without building it, noting repeated keys.
struct Scan<'a> {
    path: &'a mut FieldPath,
    found: &'a mut Vec<FieldPath>,
}

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            self.path.push(Step::Key(key.clone()));
            if !seen.insert(key) && self.found.len() < MAX_ERRORS {
                self.found.push(self.path.clone());
            }
            map.next_value_seed(Scan {
                path: &mut *self.path,
                found: &mut *self.found,
            })?;
            self.path.pop();
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            self.path.push(Step::Index(i, None));
            let more = seq.next_element_seed(Scan {
                path: &mut *self.path,
                found: &mut *self.found,
            })?;
            self.path.pop();
            if more.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn paths(found: &[FieldPath]) -> Vec<String> {
        found.iter().map(|p| dotted(p)).collect()
    }

    #[test]
    fn unknown_fields_of_a_builtin_kind_are_found_at_any_depth() {
        let registry = Registry::with_builtins();
        let rt = registry.get("apps", "v1", "deployments").unwrap();
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"a": "b"}, "bogus": 1,
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"replicas": 1, "foo": true, "selector": {"matchLabels": {"a": "b"}},
                "template": {"spec": {"containers": [{"name": "web", "image": "nginx", "imagePullPolicyy": "x",
                    "resources": {"limits": {"cpu": "1"}}, "ports": [{"containerPort": 80}]}]}}}});
        let mut found = paths(&unknown_fields(Subject::Resource(&rt), &deployment));
        found.sort();
        assert_eq!(
            found,
            [
                "metadata.bogus",
                "spec.foo",
                "spec.template.spec.containers[0].imagePullPolicyy"
            ]
        );
    }

    #[test]
    fn a_crd_object_is_judged_by_its_structural_schema_and_object_meta() {
        let mut registry = Registry::with_builtins();
        registry.register_crd(&json!({"spec": {"group": "g.dev", "names": {"plural": "things", "kind": "Thing"},
            "versions": [{"name": "v1", "served": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"size": {"type": "integer"},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}}]}}));
        let rt = registry.get("g.dev", "v1", "things").unwrap();
        let thing = json!({"apiVersion": "g.dev/v1", "kind": "Thing", "metadata": {"name": "t", "nope": 1},
            "spec": {"size": 1, "extra": 2, "free": {"anything": {"goes": true}}}, "status": {}});
        assert_eq!(
            paths(&unknown_fields(Subject::Resource(&rt), &thing)),
            ["metadata.nope", "spec.extra", "status"]
        );
    }

    #[test]
    fn schema_props_or_bool_and_raw_json_fields_accept_what_go_accepts() {
        let registry = Registry::with_builtins();
        let rt = registry
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.g.dev"},
            "spec": {"group": "g.dev", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "additionalProperties": false, "x-kubernetes-validations": [{"rule": "true"}],
                    "properties": {"spec": {"type": "object", "default": {"a": 1}, "enum": [1, "x"],
                        "additionalProperties": {"type": "string", "typo": 1},
                        "items": [{"type": "string"}]}}}}}]}});
        assert_eq!(
            paths(&unknown_fields(Subject::Resource(&rt), &crd)),
            ["spec.versions[0].schema.openAPIV3Schema.properties.spec.additionalProperties.typo"]
        );
    }

    #[test]
    fn duplicate_keys_are_found_with_their_path() {
        let body = br#"{"a": 1, "m": {"x": [ {"k": 1, "k": 2} ], "y": 1, "y": 2}, "a": 3}"#;
        assert_eq!(
            paths(&duplicate_fields(body).unwrap()),
            ["m.x[0].k", "m.y", "a"]
        );
        assert_eq!(duplicate_fields(b"{not json"), None);
        assert_eq!(duplicate_fields(b"a: 1\nb: 2\n"), None);
    }
}
