//! Assembling the OpenAPI documents from the registry: one OpenAPI 3.0
//! document per group-version (`/openapi/v3/apis/GROUP/VERSION`) and the
//! Swagger 2.0 document of everything (`/openapi/v2`). Built-in kinds are
//! described by k8s-openapi's schemas, each served custom resource version
//! by its CRD's `openAPIV3Schema` with the standard object metadata added.
//! Pure: documents are values; serving them is `mod.rs`'s job.
//!
//! A kind the registry serves but no schema describes is described as an
//! open object (`x-kubernetes-preserve-unknown-fields`), never with a
//! schema that is not its own.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::builtin::{
    DELETE_OPTIONS, LIST_META, OBJECT_META, PATCH, SCALE, STATUS, V3_PREFIX, builtins, closure,
    reference,
};
use super::paths::{self, Names, PathItem};
use super::render;
use crate::discovery;
use crate::registry::{Registry, ResourceType};

/// `api/v1` or `apis/GROUP/VERSION`: a key of the v3 discovery document.
pub(crate) fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The served group-versions, by their v3 key.
pub(crate) fn group_versions(registry: &Registry) -> BTreeMap<String, (String, String)> {
    registry
        .all()
        .map(|rt| {
            (
                gv_key(&rt.group, &rt.version),
                (rt.group.clone(), rt.version.clone()),
            )
        })
        .collect()
}

/// A CRD's group reversed, as upstream names its definitions:
/// `test.ferry.dev`, `v1`, `Widget` → `dev.ferry.test.v1.Widget`. The core
/// group is `io.k8s.api.core`.
fn definition_name(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() {
        return format!("io.k8s.api.core.{version}.{kind}");
    }
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// The kind and list definitions of one served resource. A custom resource
/// has its CRD's schema (apiextensions v1 requires one), a built-in kind
/// k8s-openapi's. A built-in kind missing from the table is still
/// described, as an open object: kubectl refuses to apply a kind whose
/// PATCH operation it cannot find, and the server judges no field of it.
fn definitions_of(rt: &ResourceType) -> (Names, Value, Value) {
    let builtins = builtins();
    let described = builtins
        .name_of(&rt.group, &rt.version, &rt.kind)
        .and_then(|name| Some((name, builtins.definitions.get(name)?)));
    let (object_name, object, builtin) = match (&rt.schema, described) {
        (Some(_), _) => {
            let name = definition_name(&rt.group, &rt.version, &rt.kind);
            (name, custom_resource_schema(rt), false)
        }
        (None, Some((name, schema))) => (name.to_string(), schema.clone(), true),
        (None, None) => {
            let name = definition_name(&rt.group, &rt.version, &rt.kind);
            let mut schema =
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
            add_standard_properties(&mut schema, true);
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": rt.group, "kind": rt.kind, "version": rt.version}]);
            (name, schema, true)
        }
    };
    let list_name = format!("{object_name}List");
    let list = list_schema(rt, &object_name);
    let names = Names {
        object: object_name,
        list: list_name,
        builtin,
    };
    (names, object, list)
}

/// The TypeMeta and ObjectMeta properties every object has, with the
/// descriptions k8s-openapi gives them.
fn standard_property(name: &str) -> Value {
    builtins()
        .schema_of("", "v1", "ConfigMap")
        .and_then(|s| s.pointer(&format!("/properties/{name}")))
        .cloned()
        .unwrap_or_else(|| json!({"type": "string"}))
}

/// A custom resource version's schema as upstream publishes it: the CRD's
/// `openAPIV3Schema` with `apiVersion`, `kind` and `metadata` (also inside
/// embedded resources) and the group-version-kind.
fn custom_resource_schema(rt: &ResourceType) -> Value {
    let mut schema = match &rt.schema {
        Some(s) if s.is_object() => s.clone(),
        _ => json!({"type": "object"}),
    };
    add_standard_properties(&mut schema, true);
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": rt.group, "kind": rt.kind, "version": rt.version}]);
    schema
}

fn add_standard_properties(schema: &mut Value, root: bool) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    for key in ["properties", "additionalProperties"] {
        match map.get_mut(key) {
            Some(Value::Object(children)) if key == "properties" => {
                for child in children.values_mut() {
                    add_standard_properties(child, false);
                }
            }
            Some(child) => add_standard_properties(child, false),
            None => {}
        }
    }
    if let Some(items) = map.get_mut("items") {
        add_standard_properties(items, false);
    }
    let embedded = map
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true);
    if !(root || embedded) {
        return;
    }
    let properties = map
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(properties) = properties.as_object_mut() {
        properties.insert("apiVersion".into(), standard_property("apiVersion"));
        properties.insert("kind".into(), standard_property("kind"));
        properties.insert("metadata".into(), standard_property("metadata"));
    }
    if embedded {
        let required = map.entry("required").or_insert_with(|| json!([]));
        if let Some(required) = required.as_array_mut() {
            for field in ["kind", "apiVersion"] {
                if !required.iter().any(|r| r == field) {
                    required.push(json!(field));
                }
            }
        }
    }
}

fn list_schema(rt: &ResourceType, object_name: &str) -> Value {
    let kind = &rt.kind;
    let mut metadata = reference(LIST_META);
    metadata["description"] = json!("Standard list metadata.");
    json!({
        "description": format!("{kind}List is a list of {kind}"),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": standard_property("apiVersion"),
            "kind": standard_property("kind"),
            "items": {
                "description": format!("The {} in the list.", rt.plural),
                "type": "array",
                "items": reference(object_name),
            },
            "metadata": metadata,
        },
        "x-kubernetes-group-version-kind": [{"group": rt.group, "kind": format!("{kind}List"), "version": rt.version}],
    })
}

/// The resources of one group-version, with their path items and the
/// definitions they bring.
struct Assembly {
    items: Vec<PathItem>,
    definitions: BTreeMap<String, Value>,
    crd_names: Vec<String>,
}

fn assemble<'a>(resources: impl Iterator<Item = &'a std::sync::Arc<ResourceType>>) -> Assembly {
    let builtins = builtins();
    let mut own = BTreeMap::new();
    let mut items = Vec::new();
    let mut crd_names = Vec::new();
    let mut needs_scale = false;
    for rt in resources {
        let (names, object, list) = definitions_of(rt);
        needs_scale |= rt.has_scale;
        items.extend(paths::resource_paths(rt, &names));
        if !names.builtin {
            crd_names.push(names.object.clone());
        }
        own.insert(names.object, object);
        own.insert(names.list, list);
    }
    let mut roots: Vec<Value> = [STATUS, DELETE_OPTIONS, PATCH, LIST_META, OBJECT_META]
        .iter()
        .map(|name| reference(name))
        .collect();
    if needs_scale {
        roots.push(reference(SCALE));
    }
    let mut definitions = own.clone();
    for name in closure(roots.iter().chain(own.values()), &builtins.definitions) {
        if let Some(schema) = builtins.definitions.get(&name) {
            definitions.entry(name).or_insert_with(|| schema.clone());
        }
    }
    Assembly {
        items,
        definitions,
        crd_names,
    }
}

fn info() -> Value {
    let version = discovery::version();
    json!({"title": "Kubernetes", "version": version["gitVersion"]})
}

/// The OpenAPI v3 document of one group-version, or `None` when nothing
/// is served there.
pub(crate) fn v3(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let served: Vec<_> = registry
        .all()
        .filter(|rt| rt.group == group && rt.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let assembly = assemble(served.into_iter());
    let mut paths = Map::new();
    render::render_v3(&assembly.items, &mut paths);
    Some(json!({
        "openapi": "3.0.0",
        "info": info(),
        "paths": paths,
        "components": {
            "schemas": assembly.definitions,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "in": "header", "name": "authorization", "description": "Bearer token authentication"}},
        },
    }))
}

/// The Swagger 2.0 document of everything served.
pub(crate) fn v2(registry: &Registry) -> Value {
    let assembly = assemble(registry.all());
    let mut paths = Map::new();
    render::render_v2(&assembly.items, &mut paths);
    let mut definitions = Map::new();
    for (name, mut schema) in assembly.definitions {
        if assembly.crd_names.contains(&name) {
            crd_to_v2(&mut schema);
        }
        to_v2(&mut schema);
        definitions.insert(name, schema);
    }
    let mut document = json!({
        "swagger": "2.0",
        "info": info(),
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "in": "header", "name": "authorization", "description": "Bearer token authentication"}},
        "security": [{"BearerToken": []}],
    });
    rewrite_refs(&mut document);
    document
}

/// Swagger 2.0 has no `oneOf`, `anyOf`, `not` or `nullable`; upstream drops
/// them (and `allOf`) from what it publishes there.
fn to_v2(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for key in ["oneOf", "anyOf", "not", "allOf", "nullable"] {
                map.remove(key);
            }
            map.values_mut().for_each(to_v2);
        }
        Value::Array(items) => items.iter_mut().for_each(to_v2),
        _ => {}
    }
}

/// What upstream changes in a custom resource's schema for v2 clients:
/// nullable and unknown-preserving parts lose their type and structure, so
/// that old kubectl validation does not refuse what the server accepts.
fn crd_to_v2(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    let flag =
        |map: &Map<String, Value>, key: &str| map.get(key).and_then(Value::as_bool) == Some(true);
    if flag(map, "nullable") || flag(map, "x-kubernetes-preserve-unknown-fields") {
        map.remove("type");
        map.remove("items");
        map.remove("properties");
    }
    if map.get("type").and_then(Value::as_str) == Some("array") && !map.contains_key("items") {
        map.remove("type");
    }
    let nullable: Vec<String> = map
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, s)| s.get("nullable").and_then(Value::as_bool) == Some(true))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(required)) = map.get_mut("required") {
        required.retain(|r| !nullable.iter().any(|n| r == n));
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(crd_to_v2);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            crd_to_v2(child);
        }
    }
}

fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref")
                && let Some(name) = r.strip_prefix(V3_PREFIX)
            {
                *r = format!("#/definitions/{name}");
            }
            map.values_mut().for_each(rewrite_refs);
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry_with_widget() -> Registry {
        let mut registry = Registry::with_builtins();
        registry.register_crd(&json!({"spec": {
            "group": "test.ferry.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "description": "The widget's wishes.", "properties": {
                        "size": {"type": "integer", "nullable": true},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
                    }}
                }}}}]
        }}));
        registry
    }

    #[test]
    fn a_crd_version_gets_metadata_and_its_group_version_kind() {
        let registry = registry_with_widget();
        let doc = v3(&registry, "test.ferry.dev", "v1").unwrap();
        let schemas = &doc["components"]["schemas"];
        let widget = &schemas["dev.ferry.test.v1.Widget"];
        assert_eq!(
            widget["x-kubernetes-group-version-kind"],
            json!([{"group": "test.ferry.dev", "kind": "Widget", "version": "v1"}])
        );
        assert_eq!(
            widget["properties"]["metadata"]["$ref"],
            format!("{V3_PREFIX}{OBJECT_META}")
        );
        assert!(schemas.get(OBJECT_META).is_some(), "ObjectMeta is included");
        let template = &widget["properties"]["spec"]["properties"]["template"];
        assert!(template["properties"]["metadata"].is_object());
        assert_eq!(
            schemas["dev.ferry.test.v1.WidgetList"]["x-kubernetes-group-version-kind"][0]["kind"],
            "WidgetList"
        );
        assert!(
            doc["paths"]["/apis/test.ferry.dev/v1/namespaces/{namespace}/widgets/{name}"]["patch"]
                .is_object()
        );
    }

    #[test]
    fn a_builtin_group_version_holds_only_its_kinds_and_what_they_reference() {
        let registry = Registry::with_builtins();
        let doc = v3(&registry, "apps", "v1").unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("io.k8s.api.apps.v1.Deployment"));
        assert!(schemas.contains_key("io.k8s.api.apps.v1.DeploymentList"));
        assert!(schemas.contains_key(SCALE));
        assert!(schemas.contains_key("io.k8s.api.apps.v1.StatefulSet"));
        assert!(
            !schemas.contains_key("io.k8s.api.apps.v1.DaemonSet"),
            "not served"
        );
        assert!(v3(&registry, "apps", "v9").is_none());
    }

    #[test]
    fn a_kind_no_schema_describes_is_an_open_object_with_its_operations() {
        let mut registry = Registry::with_builtins();
        registry.register_crd(&json!({"spec": {
            "group": "test.ferry.dev", "scope": "Cluster",
            "names": {"plural": "blobs", "kind": "Blob"},
            "versions": [{"name": "v1", "served": true, "storage": true}]
        }}));
        let doc = v3(&registry, "test.ferry.dev", "v1").unwrap();
        let blob = &doc["components"]["schemas"]["dev.ferry.test.v1.Blob"];
        assert_eq!(blob["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(blob["x-kubernetes-group-version-kind"][0]["kind"], "Blob");
        let patch = &doc["paths"]["/apis/test.ferry.dev/v1/blobs/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Blob");
    }

    #[test]
    fn the_v2_document_points_refs_at_definitions_and_drops_what_v2_lacks() {
        let registry = registry_with_widget();
        let doc = v2(&registry);
        let text = doc.to_string();
        assert!(!text.contains("#/components/schemas/"));
        assert!(text.contains("#/definitions/io.k8s.api.apps.v1.Deployment"));
        let spec = &doc["definitions"]["dev.ferry.test.v1.Widget"]["properties"]["spec"];
        assert!(spec["properties"]["size"].get("nullable").is_none());
        assert!(spec["properties"]["size"].get("type").is_none());
        assert!(spec["properties"]["template"].get("properties").is_none());
    }
}
