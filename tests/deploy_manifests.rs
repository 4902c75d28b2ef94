//! The Helm chart in `deploy/chart/ferry` and the plain manifests in
//! `deploy/manifests`, which are the chart rendered with its default values
//! (plus `namespace.create=true`).
//!
//! No `helm` binary can be installed on these machines, so this file carries a
//! small renderer for the subset of Go templates the chart uses: `.Values`,
//! `.Release` and `.Chart` fields, `if`/`else`/`end`, comments, and the
//! functions `toYaml`, `nindent`, `indent`, `quote` and `default`. Anything
//! else in a template fails the test, so the chart cannot outgrow the renderer
//! unnoticed. `scripts/render-manifests` runs the drift test with
//! `FERRY_RENDER_MANIFESTS=1`, which writes the files instead of comparing;
//! where `helm` is on PATH the drift test also checks that `helm template`
//! renders the same objects.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const RENDER_COMMAND: &str = "scripts/render-manifests";
const RENDER_ENV: &str = "FERRY_RENDER_MANIFESTS";
const RELEASE_NAME: &str = "ferry";
const RELEASE_NAMESPACE: &str = "ferry-system";
const KUBERNETES_VALIDATE_INSTALL: &str = "python3 -m pip install kubernetes-validate==1.37.0";

/// The chart's templates in apply order, with the number that prefixes their
/// file in `deploy/manifests`. The CRDs come as `01-crd-*`.
const TEMPLATES: &[(&str, &str)] = &[
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

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chart_dir() -> PathBuf {
    root().join("deploy/chart/ferry")
}

fn manifests_dir() -> PathBuf {
    root().join("deploy/manifests")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn yaml_files(dir: &Path) -> BTreeSet<String> {
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
fn context(overrides: &[(&str, Value)]) -> Value {
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

enum Token {
    Text(String),
    Action(String),
}

/// Splits a template into text and `{{ }}` actions, applying `{{-` and `-}}`
/// whitespace trimming as Go does.
fn tokenize(source: &str) -> Vec<Token> {
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

enum Node {
    Text(String),
    Output(String),
    If {
        condition: String,
        then: Vec<Node>,
        otherwise: Vec<Node>,
    },
}

/// Parses tokens up to an `else` or `end`, which it returns.
fn parse(tokens: &[Token], at: &mut usize) -> (Vec<Node>, Option<&'static str>) {
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
fn split_unquoted(text: &str, sep: impl Fn(char) -> bool) -> Vec<String> {
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

fn operand(word: &str, context: &Value, lenient: bool) -> Value {
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

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        other => panic!("cannot print {other} directly: use toYaml"),
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn indent(width: &Value, text: &Value) -> String {
    let pad = " ".repeat(width.as_u64().expect("indent width") as usize);
    format!("{pad}{}", text_of(text).replace('\n', &format!("\n{pad}")))
}

/// Helm's `toYaml` sorts keys; serde_json keeps insertion order when another
/// crate turns on its `preserve_order` feature.
fn sorted(value: &Value) -> Value {
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

fn call(function: &str, args: &[Value]) -> Value {
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
fn pipeline(action: &str, context: &Value, lenient: bool) -> Value {
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

fn evaluate(nodes: &[Node], context: &Value, out: &mut String) {
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

fn render_template(source: &str, context: &Value) -> String {
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
fn render(overrides: &[(&str, Value)]) -> BTreeMap<String, String> {
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

fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap_or_else(|err| panic!("not YAML: {err}\n{yaml}"))
        .into_iter()
        .filter(|doc| !doc.is_null())
        .collect()
}

/// Every object of the plain manifests, keyed by `Kind/name`.
fn objects(files: &BTreeMap<String, String>) -> BTreeMap<String, Value> {
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

fn plain_manifests() -> BTreeMap<String, String> {
    render(&[])
}

// ---------------------------------------------------------------------------
// Drift.

#[test]
fn plain_manifests_are_the_chart_rendered_with_default_values() {
    let chart_crds = chart_dir().join("crds");
    let generated_crds = yaml_files(&root().join("crds"));
    let writing = std::env::var_os(RENDER_ENV).is_some();
    if writing {
        for stale in yaml_files(&chart_crds).difference(&generated_crds) {
            std::fs::remove_file(chart_crds.join(stale)).unwrap();
        }
        for crd in &generated_crds {
            std::fs::copy(root().join("crds").join(crd), chart_crds.join(crd)).unwrap();
        }
    }
    assert_eq!(
        yaml_files(&chart_crds),
        generated_crds,
        "deploy/chart/ferry/crds/ must hold the files of crds/; run `{RENDER_COMMAND}`"
    );
    for crd in &generated_crds {
        assert!(
            read(&chart_crds.join(crd)) == read(&root().join("crds").join(crd)),
            "deploy/chart/ferry/crds/{crd} differs from crds/{crd}; run `{RENDER_COMMAND}`"
        );
    }

    let templates: BTreeSet<String> = yaml_files(&chart_dir().join("templates"));
    let known: BTreeSet<String> = TEMPLATES.iter().map(|(_, t)| t.to_string()).collect();
    assert_eq!(
        templates, known,
        "every chart template needs a place in TEMPLATES (the apply order) in this test"
    );

    let expected = plain_manifests();
    let dir = manifests_dir();
    if writing {
        std::fs::create_dir_all(&dir).unwrap();
        for stale in yaml_files(&dir) {
            if !expected.contains_key(&stale) {
                std::fs::remove_file(dir.join(stale)).unwrap();
            }
        }
        for (name, content) in &expected {
            std::fs::write(dir.join(name), content).unwrap();
        }
    }
    let present = yaml_files(&dir);
    let wanted: BTreeSet<String> = expected.keys().cloned().collect();
    assert_eq!(
        present, wanted,
        "deploy/manifests/ holds other files than the chart renders; run `{RENDER_COMMAND}`"
    );
    for (name, content) in &expected {
        assert!(
            &read(&dir.join(name)) == content,
            "deploy/manifests/{name} is out of date with the chart; run `{RENDER_COMMAND}`"
        );
    }

    // The renderer above must agree with Helm where Helm can be had.
    if let Ok(out) = Command::new("helm")
        .args(["template", RELEASE_NAME])
        .arg(chart_dir())
        .args([
            "--namespace",
            RELEASE_NAMESPACE,
            "--include-crds",
            "--set",
            "namespace.create=true",
        ])
        .output()
    {
        assert!(
            out.status.success(),
            "helm template failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let by_helm = objects(&BTreeMap::from([("helm".to_string(), stdout)]));
        assert_eq!(by_helm, objects(&expected), "helm renders other objects");
    } else {
        eprintln!("helm is not on PATH: compared with this test's renderer only");
    }
}

#[test]
fn the_service_monitor_is_rendered_only_when_enabled() {
    assert!(
        !plain_manifests()
            .keys()
            .any(|f| f.contains("servicemonitor"))
    );

    let files = render(&[
        ("serviceMonitor.enabled", json!(true)),
        (
            "serviceMonitor.labels",
            json!({ "release": "kube-prometheus" }),
        ),
    ]);
    let objects = objects(&files);
    let monitor = &objects["ServiceMonitor/ferry"];
    let service = &objects["Service/ferry-metrics"];
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["namespace"], RELEASE_NAMESPACE);
    assert_eq!(monitor["metadata"]["labels"]["release"], "kube-prometheus");
    for (key, value) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "the ServiceMonitor selects a label the Service lacks: {key}"
        );
    }
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["port"], service["spec"]["ports"][0]["name"]);
}

#[test]
fn values_reach_the_deployment() {
    let files = render(&[
        ("image.tag", json!("9.9.9")),
        ("clusterName", json!("eu-west")),
        ("replicas", json!(3)),
        ("env", json!([{ "name": "EXTRA", "value": "1" }])),
        ("nodeSelector", json!({ "pool": "system" })),
        ("podAnnotations", json!({ "a": "b" })),
    ]);
    let deployment = &objects(&files)["Deployment/ferry"];
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(container["image"], "ghcr.io/ferry-dev/ferry:9.9.9");
    let env = container["env"].as_array().unwrap();
    assert!(env.contains(&json!({ "name": "CLUSTER_NAME", "value": "eu-west" })));
    assert!(env.contains(&json!({ "name": "EXTRA", "value": "1" })));
    assert_eq!(pod["spec"]["nodeSelector"]["pool"], "system");
    assert_eq!(pod["metadata"]["annotations"]["a"], "b");
}

#[test]
fn the_renderer_trims_and_branches_as_go_templates_do() {
    let context = json!({ "Values": { "on": true, "off": false, "name": "x", "list": [], "map": { "b": 2, "a": 1 } } });
    let cases = [
        ("k: {{ .Values.name }}", "k: x"),
        ("k: {{ .Values.name | quote }}", "k: \"x\""),
        (
            "a:\n  {{- if .Values.on }}\n  b: 1\n  {{- end }}\n",
            "a:\n  b: 1\n",
        ),
        (
            "a:\n  {{- if .Values.off }}\n  b: 1\n  {{- end }}\n",
            "a:\n",
        ),
        ("{{ if .Values.list }}y{{ else }}n{{ end }}", "n"),
        ("{{ if .Values.missing }}y{{ else }}n{{ end }}", "n"),
        (
            "m:\n  {{- toYaml .Values.map | nindent 2 }}",
            "m:\n  a: 1\n  b: 2",
        ),
        ("{{/* a comment */}}k: {{ .Values.name -}}  \n  !", "k: x!"),
        ("{{ .Values.off | default \"d\" }}", "d"),
    ];
    for (template, expected) in cases {
        assert_eq!(
            render_template(template, &context),
            expected,
            "{template:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// What the manifests say.

fn deployment() -> Value {
    objects(&plain_manifests())["Deployment/ferry"].clone()
}

#[test]
fn the_deployment_runs_two_hardened_replicas() {
    let deployment = deployment();
    assert_eq!(
        deployment["spec"]["replicas"], 2,
        "leader election wants a standby"
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], RELEASE_NAME);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "ghcr.io/ferry-dev/ferry:0.1.0");
    let security = &container["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["runAsUser"], 65532);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
    for kind in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(
                container["resources"][kind][resource].is_string(),
                "resources.{kind}.{resource} is unset"
            );
        }
    }

    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "run");
    assert!(args.contains(&"--cluster-name=$(CLUSTER_NAME)"), "{args:?}");
    let env_names: Vec<&str> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    // `$(VAR)` in args expands only for variables the container defines.
    for arg in &args {
        if let Some((_, var)) = arg.split_once("$(") {
            let var = var.trim_end_matches(')');
            assert!(env_names.contains(&var), "{arg} names an undefined {var}");
        }
    }

    let ports = container["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 1, "one port serves metrics and probes");
    assert_eq!(ports[0]["name"], "metrics");
    assert_eq!(ports[0]["containerPort"], 8080);
    assert!(args.contains(&"--listen=0.0.0.0:8080"), "{args:?}");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["livenessProbe"]["httpGet"]["port"], "metrics");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "metrics");

    let mount = &container["volumeMounts"][0];
    assert_eq!(mount["mountPath"], "/var/cache/ferry");
    let volume = &pod["volumes"][0];
    assert_eq!(volume["name"], mount["name"]);
    assert!(volume["emptyDir"].is_object());
    assert!(args.contains(&"--cache-dir=/var/cache/ferry"), "{args:?}");
}

/// `(API group, resource)` → verbs, from Role-like rules.
fn grants(rules: &Value) -> BTreeSet<(String, String, String)> {
    let mut grants = BTreeSet::new();
    for rule in rules.as_array().expect("rules") {
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                for verb in rule["verbs"].as_array().unwrap() {
                    grants.insert((
                        group.as_str().unwrap().to_string(),
                        resource.as_str().unwrap().to_string(),
                        verb.as_str().unwrap().to_string(),
                    ));
                }
            }
        }
    }
    grants
}

/// The RBAC table of deploy/README.md, between its `rbac:begin`/`rbac:end`
/// markers: `| group | resources | verbs | scope | why |`.
fn documented_grants(scope: &str) -> BTreeSet<(String, String, String)> {
    let readme = read(&root().join("deploy/README.md"));
    let table = readme
        .split("<!-- rbac:begin -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- rbac:end -->").next())
        .expect("deploy/README.md has the RBAC table between its markers");
    let mut grants = BTreeSet::new();
    for row in table.lines().filter(|l| l.starts_with('|')).skip(2) {
        let cells: Vec<String> = row
            .split('|')
            .map(|cell| cell.replace('`', "").trim().to_string())
            .collect();
        if cells[4] != scope {
            continue;
        }
        for group in cells[1].split(',').map(str::trim) {
            let group = if group == "core" { "" } else { group };
            for resource in cells[2].split(',') {
                for verb in cells[3].split(',') {
                    grants.insert((
                        group.to_string(),
                        resource.trim().to_string(),
                        verb.trim().to_string(),
                    ));
                }
            }
        }
    }
    grants
}

#[test]
fn rbac_grants_exactly_what_the_readme_documents_and_no_wildcards() {
    let objects = objects(&plain_manifests());
    let cluster = grants(&objects["ClusterRole/ferry"]["rules"]);
    let namespaced = grants(&objects["Role/ferry-leader-election"]["rules"]);
    for (group, resource, verb) in cluster.iter().chain(&namespaced) {
        assert!(
            group != "*" && resource != "*" && verb != "*",
            "a wildcard grant: {group} {resource} {verb}"
        );
    }
    for (granted, scope) in [(cluster, "cluster"), (namespaced, "namespace")] {
        let documented = documented_grants(scope);
        assert!(
            granted == documented,
            "the {scope}-scoped rules and deploy/README.md disagree\n\
             granted, not documented: {:?}\ndocumented, not granted: {:?}",
            granted.difference(&documented).collect::<Vec<_>>(),
            documented.difference(&granted).collect::<Vec<_>>()
        );
    }

    let binding = &objects["ClusterRoleBinding/ferry"];
    assert_eq!(binding["roleRef"]["name"], "ferry");
    assert_eq!(
        binding["subjects"][0],
        json!({ "kind": "ServiceAccount", "name": "ferry", "namespace": RELEASE_NAMESPACE })
    );
    let binding = &objects["RoleBinding/ferry-leader-election"];
    assert_eq!(binding["roleRef"]["name"], "ferry-leader-election");
    assert_eq!(binding["subjects"][0]["name"], "ferry");
}

// ---------------------------------------------------------------------------
// Against Kubernetes' schemas and an API server.

#[test]
fn plain_manifests_pass_kubernetes_schema_validation() {
    let files: Vec<PathBuf> = yaml_files(&manifests_dir())
        .into_iter()
        .map(|name| manifests_dir().join(name))
        .collect();
    assert!(!files.is_empty());
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", "1.30.0"])
        .args(&files)
        .output()
        .unwrap_or_else(|err| {
            panic!("kubernetes-validate does not run ({err}); install it: {KUBERNETES_VALIDATE_INSTALL}")
        });
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "invalid manifests:\n{report}");
    // An unknown apiVersion or kind is only a warning to the tool; here every
    // object is a built-in kind, so a missing schema means a typo.
    assert!(
        !report.contains("Couldn't find schema"),
        "an object of no known kind:\n{report}"
    );
    assert_eq!(
        report.matches(" passed for resource ").count(),
        objects(&plain_manifests()).len(),
        "not every object was validated:\n{report}"
    );
}

/// Kinds the sandbox does not serve, so the apply test leaves them out. The
/// test checks that the sandbox still refuses them: when it learns one, drop
/// it from here.
const NOT_SERVED_BY_THE_SANDBOX: &[&str] = &[
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

fn kubectl(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs (scripts/test installs Debian's kubernetes-client)")
}

fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let out = kubectl(kubeconfig, args);
    assert!(
        out.status.success(),
        "kubectl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_manifests_apply_to_a_sandbox_cluster() {
    let sandbox = ferry_sandbox::Sandbox::start(ferry_sandbox::SandboxConfig::new("deploy"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sandbox.write_kubeconfig(&kubeconfig).unwrap();

    let result = tokio::task::spawn_blocking(move || {
        let mut served = Vec::new();
        let mut skipped = Vec::new();
        for name in yaml_files(&manifests_dir()) {
            let path = manifests_dir().join(&name);
            let docs = documents(&read(&path));
            let kind = docs[0]["kind"].as_str().unwrap().to_string();
            if NOT_SERVED_BY_THE_SANDBOX.contains(&kind.as_str()) {
                skipped.push(path);
            } else {
                served.push(path);
            }
        }
        assert!(!skipped.is_empty() && !served.is_empty());

        let mut apply = vec!["apply".to_string(), "--validate=false".to_string()];
        for path in &served {
            apply.push("-f".into());
            apply.push(path.display().to_string());
        }
        let apply: Vec<&str> = apply.iter().map(String::as_str).collect();
        kubectl_ok(&kubeconfig, &apply);

        for path in &skipped {
            let out = kubectl(
                &kubeconfig,
                &["apply", "--validate=false", "-f", &path.display().to_string()],
            );
            assert!(
                !out.status.success(),
                "the sandbox now serves the kind in {}: apply it too",
                path.display()
            );
        }

        kubectl_ok(&kubeconfig, &["get", "namespace", RELEASE_NAMESPACE]);
        for plural in ["clusterpeers", "migrationpolicies", "workloadmigrations"] {
            kubectl_ok(
                &kubeconfig,
                &[
                    "wait",
                    "--for=condition=Established",
                    &format!("crd/{plural}.ferry.dev"),
                    "--timeout=30s",
                ],
            );
            kubectl_ok(&kubeconfig, &["get", plural, "-A"]);
        }
        let deployment: Value = serde_json::from_str(&kubectl_ok(
            &kubeconfig,
            &["get", "deployment", "ferry", "-n", RELEASE_NAMESPACE, "-o", "json"],
        ))
        .unwrap();
        assert_eq!(deployment["spec"]["replicas"], 2);
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["securityContext"]
                ["readOnlyRootFilesystem"],
            true
        );
        kubectl_ok(
            &kubeconfig,
            &[
                "wait",
                "--for=condition=Available",
                "deployment/ferry",
                "-n",
                RELEASE_NAMESPACE,
                "--timeout=60s",
            ],
        );
        kubectl_ok(
            &kubeconfig,
            &["get", "service", "ferry-metrics", "-n", RELEASE_NAMESPACE],
        );

        // Applying again changes nothing.
        let again = kubectl_ok(&kubeconfig, &apply);
        let served_objects: usize = served.iter().map(|p| documents(&read(p)).len()).sum();
        assert_eq!(again.lines().count(), served_objects, "{again}");
        for line in again.lines() {
            assert!(line.ends_with(" unchanged"), "a second apply changed: {line}");
        }
    })
    .await;
    sandbox.shutdown().await;
    if let Err(err) = result {
        std::panic::resume_unwind(err.into_panic());
    }
}
