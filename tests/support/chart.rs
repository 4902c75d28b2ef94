//! A small renderer for the subset of Go templates Ferry's Helm chart uses
//! (`.Values`, `.Release` and `.Chart` fields, `if`/`else`/`end`, comments,
//! `toYaml`, `nindent`, `indent`, `quote`, `default`), because no `helm`
//! binary can be installed on these machines. Anything else in a template
//! fails, so the chart cannot outgrow the renderer unnoticed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub const RENDER_COMMAND: &str = "scripts/render-manifests";
pub const RENDER_ENV: &str = "FERRY_RENDER_MANIFESTS";
pub const RELEASE_NAME: &str = "ferry";
pub const RELEASE_NAMESPACE: &str = "ferry-system";
pub const KUBERNETES_VALIDATE_INSTALL: &str = "python3 -m pip install kubernetes-validate==1.37.0";

/// The chart's templates in apply order, with the number that prefixes their
/// file in `deploy/manifests`. The CRDs come as `01-crd-*`.
pub const TEMPLATES: &[(&str, &str)] = &[
    ("00", "namespace.yaml"),
    ("02", "serviceaccount.yaml"),
    ("03", "clusterrole.yaml"),
    ("04", "clusterrolebinding.yaml"),
    ("05", "role.yaml"),
    ("06", "rolebinding.yaml"),
    ("07", "service.yaml"),
    ("08", "deployment.yaml"),
    ("09", "servicemonitor.yaml"),
];

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn chart_dir() -> PathBuf {
    root().join("deploy/chart/ferry")
}

pub fn manifests_dir() -> PathBuf {
    root().join("deploy/manifests")
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

pub fn yaml_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".yaml"))
        .collect()
}

// ---------------------------------------------------------------------------
// The renderer.

/// What templates see: `.Values`, `.Release` and `.Chart`. The plain
/// manifests set one value beyond the chart's defaults, `namespace.create`
/// (off by default so that `helm install --create-namespace` works); other
/// overrides come after it.
pub fn context(overrides: &[(&str, Value)]) -> Value {
    let mut values: Value = serde_saphyr::from_str(&read(&chart_dir().join("values.yaml")))
        .expect("values.yaml is YAML");
    let plain = [("namespace.create", Value::Bool(true))];
    for (path, value) in plain.iter().chain(overrides) {
        let mut slot = &mut values;
        for key in path.split('.') {
            slot = &mut slot[key];
        }
        *slot = value.clone();
    }
    let chart: Value =
        serde_saphyr::from_str(&read(&chart_dir().join("Chart.yaml"))).expect("Chart.yaml");
    json!({
        "Values": values,
        "Release": { "Name": RELEASE_NAME, "Namespace": RELEASE_NAMESPACE, "Service": "Helm" },
        "Chart": { "Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"] },
    })
}

pub enum Token {
    Text(String),
    Action(String),
}

/// Splits a template into text and `{{ }}` actions, applying `{{-` and `-}}`
/// whitespace trimming as Go does.
pub fn tokenize(source: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut rest = source;
    let mut trim_next = false;
    while let Some(start) = rest.find("{{") {
        let end = start
            + rest[start..]
                .find("}}")
                .unwrap_or_else(|| panic!("unclosed action in {rest}"));
        let mut text = &rest[..start];
        if trim_next {
            text = text.trim_start();
        }
        let mut inner = &rest[start + 2..end];
        if let Some(body) = inner.strip_prefix("- ") {
            text = text.trim_end();
            inner = body;
        }
        trim_next = false;
        if let Some(body) = inner.strip_suffix(" -") {
            trim_next = true;
            inner = body;
        }
        tokens.push(Token::Text(text.to_string()));
        tokens.push(Token::Action(inner.trim().to_string()));
        rest = &rest[end + 2..];
    }
    let text = if trim_next { rest.trim_start() } else { rest };
    tokens.push(Token::Text(text.to_string()));
    tokens
}

pub enum Node {
    Text(String),
    Output(String),
    If {
        condition: String,
        then: Vec<Node>,
        otherwise: Vec<Node>,
    },
}

/// Parses tokens up to an `else` or `end`, which it returns.
pub fn parse(tokens: &[Token], at: &mut usize) -> (Vec<Node>, Option<&'static str>) {
    let mut nodes = Vec::new();
    while *at < tokens.len() {
        let token = &tokens[*at];
        *at += 1;
        match token {
            Token::Text(text) => nodes.push(Node::Text(text.clone())),
            Token::Action(action) if action.starts_with("/*") => {}
            Token::Action(action) if action == "end" => return (nodes, Some("end")),
            Token::Action(action) if action == "else" => return (nodes, Some("else")),
            Token::Action(action) => {
                if let Some(condition) = action.strip_prefix("if ") {
                    let (then, ended) = parse(tokens, at);
                    let otherwise = match ended {
                        Some("else") => match parse(tokens, at) {
                            (nodes, Some("end")) => nodes,
                            _ => panic!("`if {condition}` has no matching end"),
                        },
                        Some(_) => Vec::new(),
                        None => panic!("`if {condition}` has no matching end"),
                    };
                    nodes.push(Node::If {
                        condition: condition.trim().to_string(),
                        then,
                        otherwise,
                    });
                } else {
                    let word = action.split_whitespace().next().unwrap_or("");
                    assert!(
                        !["range", "with", "define", "template", "include", "block"]
                            .contains(&word),
                        "the chart uses `{action}`, which this test's renderer does not support: \
                         keep the chart's templates simple or extend the renderer"
                    );
                    nodes.push(Node::Output(action.clone()));
                }
            }
        }
    }
    (nodes, None)
}

/// Splits on `sep` outside double-quoted strings.
pub fn split_unquoted(text: &str, sep: impl Fn(char) -> bool) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut quoted = false;
    let mut escaped = false;
    for c in text.chars() {
        if quoted {
            parts.last_mut().unwrap().push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => quoted = false,
                _ => {}
            }
        } else if sep(c) {
            parts.push(String::new());
        } else {
            if c == '"' {
                quoted = true;
            }
            parts.last_mut().unwrap().push(c);
        }
    }
    parts
        .into_iter()
        .map(|part| part.trim().to_string())
        .filter(|part| !part.is_empty())
        .collect()
}

pub fn operand(word: &str, context: &Value, lenient: bool) -> Value {
    if word.starts_with('"') {
        return serde_json::from_str(word).unwrap_or_else(|err| panic!("{word}: {err}"));
    }
    if let Ok(number) = word.parse::<i64>() {
        return json!(number);
    }
    let path = word
        .strip_prefix('.')
        .unwrap_or_else(|| panic!("`{word}` is not a value the renderer knows"));
    let mut value = context;
    for key in path.split('.') {
        match value.get(key) {
            Some(next) => value = next,
            // Go templates give nothing for a missing key; outside a condition
            // that is almost always a typo, so it fails here.
            None if lenient => return Value::Null,
            None => panic!("`{word}`: no `{key}` (is it in values.yaml?)"),
        }
    }
    value.clone()
}

pub fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => panic!("cannot print {other} directly: use toYaml"),
    }
}

pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

pub fn indent(width: &Value, text: &Value) -> String {
    let pad = " ".repeat(width.as_u64().expect("indent width") as usize);
    format!("{pad}{}", text_of(text).replace('\n', &format!("\n{pad}")))
}

/// Helm's `toYaml` sorts keys; serde_json keeps insertion order when another
/// crate turns on its `preserve_order` feature.
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

pub fn call(function: &str, args: &[Value]) -> Value {
    match (function, args) {
        ("toYaml", [value]) => {
            let yaml = serde_saphyr::to_string(&sorted(value)).expect("toYaml");
            Value::String(yaml.trim_end_matches('\n').to_string())
        }
        ("indent", [width, text]) => Value::String(indent(width, text)),
        ("nindent", [width, text]) => Value::String(format!("\n{}", indent(width, text))),
        ("quote", [value]) => {
            Value::String(serde_json::to_string(&text_of(value)).expect("a string serializes"))
        }
        ("default", [fallback, value]) => {
            if truthy(value) {
                value.clone()
            } else {
                fallback.clone()
            }
        }
        _ => panic!(
            "the chart calls `{function}` with {} arguments, which this test's renderer does not \
             support: keep the chart's templates simple or extend the renderer",
            args.len()
        ),
    }
}

/// Evaluates `operand-or-call | call | call`.
pub fn pipeline(action: &str, context: &Value, lenient: bool) -> Value {
    let mut piped: Option<Value> = None;
    for command in split_unquoted(action, |c| c == '|') {
        let words = split_unquoted(&command, char::is_whitespace);
        let (head, rest) = words.split_first().expect("an empty command");
        let mut args: Vec<Value> = rest
            .iter()
            .map(|word| operand(word, context, lenient))
            .collect();
        args.extend(piped.take());
        let is_operand = head.starts_with('.') || head.starts_with('"');
        piped = Some(if is_operand {
            assert!(args.is_empty(), "`{command}`: a value takes no arguments");
            operand(head, context, lenient)
        } else {
            call(head, &args)
        });
    }
    piped.unwrap_or(Value::Null)
}

pub fn evaluate(nodes: &[Node], context: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Output(action) => out.push_str(&text_of(&pipeline(action, context, false))),
            Node::If {
                condition,
                then,
                otherwise,
            } => {
                let branch = if truthy(&pipeline(condition, context, true)) {
                    then
                } else {
                    otherwise
                };
                evaluate(branch, context, out);
            }
        }
    }
}

pub fn render_template(source: &str, context: &Value) -> String {
    let tokens = tokenize(source);
    let mut at = 0;
    let (nodes, ended) = parse(&tokens, &mut at);
    assert!(ended.is_none(), "an `{}` without an `if`", ended.unwrap());
    let mut out = String::new();
    evaluate(&nodes, context, &mut out);
    out
}

/// The plain manifests with these values changed: file name → content. A template
/// that renders to nothing has no file.
pub fn render(overrides: &[(&str, Value)]) -> BTreeMap<String, String> {
    let context = context(overrides);
    let mut files = BTreeMap::new();
    for crd in yaml_files(&chart_dir().join("crds")) {
        let content = read(&chart_dir().join("crds").join(&crd));
        files.insert(format!("01-crd-{crd}"), content);
    }
    for (order, template) in TEMPLATES {
        let source = read(&chart_dir().join("templates").join(template));
        let rendered = render_template(&source, &context);
        let body = rendered.trim();
        if body.is_empty() {
            continue;
        }
        files.insert(
            format!("{order}-{template}"),
            format!(
                "# Rendered from deploy/chart/ferry/templates/{template} by `{RENDER_COMMAND}`. \
                 Do not edit.\n{body}\n"
            ),
        );
    }
    files
}

pub fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap_or_else(|err| panic!("not YAML: {err}\n{yaml}"))
        .into_iter()
        .filter(|doc| !doc.is_null())
        .collect()
}

/// Every object of the plain manifests, keyed by `Kind/name`.
pub fn objects(files: &BTreeMap<String, String>) -> BTreeMap<String, Value> {
    files
        .values()
        .flat_map(|content| documents(content))
        .map(|doc| {
            let key = format!(
                "{}/{}",
                doc["kind"].as_str().unwrap_or("?"),
                doc["metadata"]["name"].as_str().unwrap_or("?")
            );
            (key, doc)
        })
        .collect()
}

pub fn plain_manifests() -> BTreeMap<String, String> {
    render(&[])
}
