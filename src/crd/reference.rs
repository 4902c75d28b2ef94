//! The CRD reference (`docs/crd-reference.md`), generated from the same
//! schemas as `crds/*.yaml`, so the page says what the API server enforces:
//! every field with its type, default, limits and description.

use std::fmt::Write as _;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// The command that regenerates the reference page.
pub const REFERENCE_COMMAND: &str = "cargo run -- crds --reference docs/crd-reference.md";

/// The whole reference page for `crds`, as Markdown.
pub fn reference_markdown(crds: &[CustomResourceDefinition]) -> String {
    let mut page = String::new();
    page.push_str("# Custom resource reference\n\n");
    let _ = writeln!(
        page,
        "<!-- Generated from src/crd by `{REFERENCE_COMMAND}`. Do not edit. -->\n"
    );
    page.push_str(
        "Every field of Ferry's custom resources, from the schemas the API server \
         enforces. A field marked *required* must be set; a default is what the \
         API server fills in when the field is left out. Rules a schema cannot \
         express are checked by the operator, which reports them in a \
         `Ready=False` condition with reason `InvalidSpec` (see \
         [troubleshooting](troubleshooting.md)).\n\n",
    );
    for crd in crds {
        let _ = writeln!(
            page,
            "- [{}](#{})",
            crd.spec.names.kind,
            anchor(&crd.spec.names.kind)
        );
    }
    page.push('\n');
    for crd in crds {
        write_crd(&mut page, crd);
    }
    page
}

fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn write_crd(page: &mut String, crd: &CustomResourceDefinition) {
    let names = &crd.spec.names;
    let _ = writeln!(page, "## {}\n", names.kind);
    let mut facts = vec![
        format!("group `{}`", crd.spec.group),
        format!("scope {}", crd.spec.scope),
        format!("plural `{}`", names.plural),
    ];
    if let Some(short) = names.short_names.as_ref().filter(|s| !s.is_empty()) {
        let short: Vec<String> = short.iter().map(|s| format!("`{s}`")).collect();
        facts.push(format!("short names {}", short.join(", ")));
    }
    for version in &crd.spec.versions {
        let _ = writeln!(page, "Version `{}`: {}.\n", version.name, facts.join(", "));
        let Some(schema) = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
        else {
            continue;
        };
        let schema = serde_json::to_value(schema).unwrap_or(Value::Null);
        if let Some(text) = schema["description"].as_str() {
            let _ = writeln!(page, "{}\n", one_line(text));
        }
        if let Some(columns) = version.additional_printer_columns.as_ref() {
            page.push_str("`kubectl get` shows: ");
            let shown: Vec<String> = columns
                .iter()
                .map(|c| match c.priority {
                    Some(p) if p > 0 => format!("{} (wide)", c.name),
                    _ => c.name.clone(),
                })
                .collect();
            let _ = writeln!(page, "{}.\n", shown.join(", "));
        }
        for part in ["spec", "status"] {
            let node = &schema["properties"][part];
            if node.is_null() {
                continue;
            }
            let _ = writeln!(page, "### {} `{part}`\n", names.kind);
            page.push_str("| field | type | default | description |\n|---|---|---|---|\n");
            let mut rows = Vec::new();
            collect_fields(node, part, &mut rows);
            for row in rows {
                page.push_str(&row);
            }
            page.push('\n');
        }
    }
}

/// One row per field under `node`, depth first, in the schema's order.
fn collect_fields(node: &Value, path: &str, rows: &mut Vec<String>) {
    let required: Vec<&str> = node["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = node["properties"].as_object() else {
        return;
    };
    for (name, field) in properties {
        let field_path = format!("{path}.{name}");
        rows.push(row(&field_path, field, required.contains(&name.as_str())));
        descend(field, &field_path, rows);
    }
}

/// Into an object's fields, a list's items, or a map's values.
fn descend(field: &Value, path: &str, rows: &mut Vec<String>) {
    match field["type"].as_str() {
        Some("object") if field["properties"].is_object() => collect_fields(field, path, rows),
        Some("object") if field["additionalProperties"].is_object() => {
            let values = &field["additionalProperties"];
            if values["properties"].is_object() {
                collect_fields(values, &format!("{path}.<key>"), rows);
            }
        }
        Some("array") => {
            let items = &field["items"];
            if items["properties"].is_object() {
                collect_fields(items, &format!("{path}[]"), rows);
            }
        }
        _ => {}
    }
}

fn row(path: &str, field: &Value, required: bool) -> String {
    let mut description = field["description"]
        .as_str()
        .map(one_line)
        .unwrap_or_default();
    let rules = rules(field);
    if !rules.is_empty() {
        if !description.is_empty() {
            description.push(' ');
        }
        description.push_str(&format!("*{}.*", rules.join("; ")));
    }
    let default = match &field["default"] {
        Value::Null if required => "*required*".to_owned(),
        Value::Null => String::new(),
        value => format!("`{}`", compact(value)),
    };
    format!(
        "| `{path}` | {} | {default} | {} |\n",
        type_of(field),
        escape(&description)
    )
}

fn type_of(field: &Value) -> String {
    match field["type"].as_str() {
        Some("array") => format!("list of {}", type_of(&field["items"])),
        Some("object") if field["additionalProperties"].is_object() => {
            format!("map of {}", type_of(&field["additionalProperties"]))
        }
        Some(other) => other.to_owned(),
        None if field["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true) => {
            "any JSON".to_owned()
        }
        None if field["x-kubernetes-int-or-string"] == Value::Bool(true) => {
            "integer or string".to_owned()
        }
        None => "any".to_owned(),
    }
}

/// What the schema enforces beyond the type: enums, patterns, ranges,
/// lengths, CEL rules.
fn rules(field: &Value) -> Vec<String> {
    let mut rules = Vec::new();
    if let Some(values) = field["enum"].as_array() {
        let values: Vec<String> = values.iter().map(|v| format!("`{}`", compact(v))).collect();
        rules.push(format!("one of {}", values.join(", ")));
    }
    if let Some(pattern) = field["pattern"].as_str() {
        rules.push(format!("matches `{pattern}`"));
    }
    for (key, words) in [
        ("minimum", "at least"),
        ("maximum", "at most"),
        ("minLength", "at least"),
        ("maxLength", "at most"),
        ("minItems", "at least"),
        ("maxItems", "at most"),
    ] {
        if let Some(n) = field[key].as_f64() {
            if key == "minLength" && n == 1.0 {
                rules.push("not empty".to_owned());
                continue;
            }
            let unit = match key {
                "minLength" | "maxLength" => " characters",
                "minItems" | "maxItems" => " items",
                _ => "",
            };
            rules.push(format!("{words} {}{unit}", number(n)));
        }
    }
    if field["nullable"] == Value::Bool(true) {
        rules.push("may be null".to_owned());
    }
    if let Some(checks) = field["x-kubernetes-validations"].as_array() {
        for check in checks {
            let text = check["message"]
                .as_str()
                .or(check["rule"].as_str())
                .unwrap_or_default();
            rules.push(format!("rule: {}", one_line(text)));
        }
    }
    rules
}

fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

fn compact(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_f64().map(number).unwrap_or_else(|| n.to_string()),
        other => other.to_string(),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table cell: no pipe may end the cell early.
fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_field_of_every_crd_has_a_row() {
        let page = reference_markdown(&crate::crd::all());
        for field in [
            "`spec.module.sha256`",
            "`spec.thresholds.cooldown`",
            "`spec.kubeconfigSecretRef.name`",
            "`spec.insecure.skipTLSVerify`",
            "`status.conditions[].reason`",
        ] {
            assert!(page.contains(field), "no row for {field}");
        }
        assert!(page.contains("one of `Enforce`, `DryRun`"));
    }

    #[test]
    fn a_pipe_in_a_description_stays_in_its_cell() {
        let field = serde_json::json!({"type": "string", "description": "a | b"});
        assert_eq!(
            row("spec.x", &field, false),
            "| `spec.x` | string |  | a \\| b |\n"
        );
    }
}
