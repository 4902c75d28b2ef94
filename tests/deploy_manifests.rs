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

mod support;
use support::chart::*;

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
const NOT_SERVED_BY_THE_SANDBOX: &[&str] = &["ServiceAccount"];

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
