//! Rendering path items as OpenAPI 3.0 or Swagger 2.0 JSON. Both forms say
//! the same: every operation keeps its `x-kubernetes-action` and
//! `x-kubernetes-group-version-kind`, and every PATCH its `fieldValidation`
//! parameter, which kubectl looks for before it validates on the server.
//! Pure.

use serde_json::{Map, Value, json};

use super::builtin::reference;
use super::paths::{Action, Operation, Param, PathItem};

fn param_v3((name, type_, description): &Param, location: &str, required: bool) -> Value {
    let mut p = json!({
        "name": name,
        "in": location,
        "description": description,
        "schema": {"type": type_, "uniqueItems": true},
    });
    if required {
        p["required"] = json!(true);
    }
    p
}

fn path_params(item: &PathItem) -> Vec<Param> {
    let mut params: Vec<Param> = Vec::new();
    if item.named {
        params.push(("name", "string", "The name of the object."));
    }
    if item.namespaced {
        params.push(("namespace", "string", "The namespace of the object."));
    }
    params
}

const PRETTY: Param = ("pretty", "string", "If 'true', the answer is indented.");

fn extensions(op: &Operation, out: &mut Map<String, Value>) {
    out.insert(
        "x-kubernetes-action".into(),
        json!(op.action.kubernetes_action()),
    );
    let (group, version, kind) = &op.gvk;
    out.insert(
        "x-kubernetes-group-version-kind".into(),
        json!({"group": group, "kind": kind, "version": version}),
    );
}

/// OpenAPI v3 path items, keyed by path.
pub(crate) fn render_v3(items: &[PathItem], paths: &mut Map<String, Value>) {
    for item in items {
        let mut rendered = Map::new();
        let mut params: Vec<Value> = path_params(item)
            .iter()
            .map(|p| param_v3(p, "path", true))
            .collect();
        params.push(param_v3(&PRETTY, "query", false));
        rendered.insert("parameters".into(), Value::Array(params));
        for op in &item.operations {
            let reference = |name: &str| reference(name);
            let mut out = Map::new();
            out.insert("description".into(), json!(op.description));
            out.insert("operationId".into(), json!(op.operation_id));
            if !op.query.is_empty() {
                let query: Vec<Value> = op
                    .query
                    .iter()
                    .map(|p| param_v3(p, "query", false))
                    .collect();
                out.insert("parameters".into(), Value::Array(query));
            }
            if let Some((schema, types)) = &op.body {
                let content: Map<String, Value> = types
                    .iter()
                    .map(|t| (t.to_string(), json!({"schema": reference(schema)})))
                    .collect();
                out.insert("requestBody".into(), json!({"content": content}));
            }
            let mut responses = Map::new();
            for (code, description) in &op.codes {
                let mut content = Map::new();
                for t in ["application/json", "application/yaml"] {
                    content.insert(t.into(), json!({"schema": reference(&op.answer)}));
                }
                responses.insert(
                    code.to_string(),
                    json!({"description": description, "content": content}),
                );
            }
            responses.insert("401".into(), json!({"description": "Unauthorized"}));
            out.insert("responses".into(), Value::Object(responses));
            out.insert("tags".into(), json!([op.tag]));
            extensions(op, &mut out);
            rendered.insert(op.action.method().into(), Value::Object(out));
        }
        paths.insert(item.path.clone(), Value::Object(rendered));
    }
}

fn param_v2((name, type_, description): &Param, location: &str, required: bool) -> Value {
    let mut p = json!({
        "name": name,
        "in": location,
        "type": type_,
        "description": description,
        "uniqueItems": true,
    });
    if required {
        p["required"] = json!(true);
    }
    p
}

/// Swagger 2.0 path items, keyed by path; `$ref`s still point at
/// `#/components/schemas/` (the caller rewrites them).
pub(crate) fn render_v2(items: &[PathItem], paths: &mut Map<String, Value>) {
    for item in items {
        let mut rendered = Map::new();
        let mut params: Vec<Value> = path_params(item)
            .iter()
            .map(|p| param_v2(p, "path", true))
            .collect();
        params.push(param_v2(&PRETTY, "query", false));
        rendered.insert("parameters".into(), Value::Array(params));
        for op in &item.operations {
            let reference = |name: &str| reference(name);
            let mut out = Map::new();
            out.insert("description".into(), json!(op.description));
            out.insert("operationId".into(), json!(op.operation_id));
            out.insert("schemes".into(), json!(["https"]));
            out.insert(
                "produces".into(),
                json!(["application/json", "application/yaml"]),
            );
            let mut query: Vec<Value> = Vec::new();
            if let Some((schema, types)) = &op.body {
                out.insert("consumes".into(), json!(types));
                query.push(json!({
                    "name": "body",
                    "in": "body",
                    "required": op.action != Action::Delete && op.action != Action::DeleteCollection,
                    "schema": reference(schema),
                }));
            } else {
                out.insert("consumes".into(), json!(["*/*"]));
            }
            query.extend(op.query.iter().map(|p| param_v2(p, "query", false)));
            if !query.is_empty() {
                out.insert("parameters".into(), Value::Array(query));
            }
            let mut responses = Map::new();
            for (code, description) in &op.codes {
                responses.insert(
                    code.to_string(),
                    json!({"description": description, "schema": reference(&op.answer)}),
                );
            }
            responses.insert("401".into(), json!({"description": "Unauthorized"}));
            out.insert("responses".into(), Value::Object(responses));
            out.insert("tags".into(), json!([op.tag]));
            extensions(op, &mut out);
            rendered.insert(op.action.method().into(), Value::Object(out));
        }
        paths.insert(item.path.clone(), Value::Object(rendered));
    }
}
