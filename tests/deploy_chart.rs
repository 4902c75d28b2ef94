//! The chart's values, rendered by the pinned Helm: `helm lint` and
//! `helm template` over every values file in `deploy/chart/ferry/ci/`, the
//! values schema refusing bad values, and each render applied to a sandbox
//! API server with RBAC enforced.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

mod support;
use support::chart::{chart_dir, documents, run_helm, yaml_files};
use support::tools::kubectl;

const NAMESPACE: &str = "ferry-system";

fn values_files() -> Vec<PathBuf> {
    let dir = chart_dir().join("ci");
    let files: Vec<PathBuf> = yaml_files(&dir).into_iter().map(|n| dir.join(n)).collect();
    assert!(files.len() >= 3, "deploy/chart/ferry/ci/ holds {files:?}");
    files
}

/// `helm template RELEASE` in [`NAMESPACE`] with `args` (`-f FILE`,
/// `--set-json k=v`, ...): the documents, or helm's stderr.
fn template(release: &str, args: &[&str]) -> Result<Vec<Value>, String> {
    let chart = chart_dir().display().to_string();
    let mut all = vec!["template", release, &chart, "--namespace", NAMESPACE];
    all.extend_from_slice(args);
    let out = run_helm(&all);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(documents(&String::from_utf8(out.stdout).expect("UTF-8")))
}

fn render(release: &str, sets: &[(&str, Value)]) -> Vec<Value> {
    let sets: Vec<String> = sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut args = Vec::new();
    for set in &sets {
        args.extend(["--set-json", set.as_str()]);
    }
    template(release, &args).unwrap_or_else(|err| panic!("helm template {args:?}: {err}"))
}

fn render_file(release: &str, file: &Path) -> Vec<Value> {
    let file = file.display().to_string();
    template(release, &["-f", &file]).unwrap_or_else(|err| panic!("helm template -f {file}: {err}"))
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

fn the<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    find(docs, kind, name).unwrap_or_else(|| panic!("no {kind}/{name} rendered"))
}

fn args_of(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

// ---------------------------------------------------------------------------
// helm lint and the values schema.

#[test]
fn every_ci_values_file_passes_helm_lint() {
    let chart = chart_dir().display().to_string();
    for file in values_files() {
        let file = file.display().to_string();
        let out = run_helm(&["lint", "--strict", &chart, "-f", &file]);
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "helm lint -f {file}:\n{report}");
        assert!(
            report.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{report}"
        );
    }
}

#[test]
fn the_values_schema_refuses_bad_values_naming_the_field() {
    for (set, field) in [
        ("replicas=0", "/replicas"),
        ("secretAccess.scope=\"everywhere\"", "/secretAccess/scope"),
        ("clusterName=\"East_1\"", "/clusterName"),
        ("image.digest=\"latest\"", "/image/digest"),
        (
            "leaderElection.leaseDuration=\"15\"",
            "/leaderElection/leaseDuration",
        ),
        ("logFormat=\"xml\"", "/logFormat"),
        ("peers=[\"UPPER\"]", "/peers/0"),
        ("metrics.port=70000", "/metrics/port"),
        ("prometheus.url=\"prometheus:9090\"", "/prometheus/url"),
        // A misspelt value is refused, not silently ignored.
        ("replica=3", "replica"),
        ("serviceAccount.annotation={}", "annotation"),
    ] {
        let err = template("ferry", &["--set-json", set])
            .expect_err(&format!("the schema accepted {set}"));
        assert!(
            err.contains(field),
            "refusing {set}, helm does not name {field}:\n{err}"
        );
    }
    // And the values it documents pass.
    render(
        "ferry",
        &[
            ("leaderElection.leaseDuration", json!("1m30s")),
            ("image.digest", json!(format!("sha256:{}", "ab".repeat(32)))),
            ("peers", json!(["west", "eu-1"])),
        ],
    );
}

// ---------------------------------------------------------------------------
// What the values render.

#[test]
fn names_follow_the_release_or_the_full_name_override() {
    let docs = render("east", &[]);
    let deployment = the(&docs, "Deployment", "east");
    assert!(args_of(deployment).contains(&"--leader-lease-name=east-leader".to_owned()));
    the(&docs, "ClusterRole", "east-peer");
    the(&docs, "ServiceAccount", "east");

    // Two releases in one namespace elect their leaders on two Leases.
    let other = render("west", &[]);
    assert!(
        args_of(the(&other, "Deployment", "west"))
            .contains(&"--leader-lease-name=west-leader".to_owned())
    );

    let docs = render(
        "east",
        &[
            ("fullnameOverride", json!("ops-ferry")),
            ("nameOverride", json!("mover")),
            ("peers", json!(["west"])),
        ],
    );
    for doc in &docs {
        let name = doc["metadata"]["name"].as_str().unwrap();
        let kind = doc["kind"].as_str().unwrap();
        if kind != "Namespace" {
            assert!(name.starts_with("ops-ferry"), "{kind}/{name}");
        }
        assert_eq!(doc["metadata"]["labels"]["app.kubernetes.io/name"], "mover");
    }
    let binding = the(&docs, "RoleBinding", "ops-ferry-peer-west");
    assert_eq!(binding["roleRef"]["name"], "ops-ferry-peer");
    let deployment = the(&docs, "Deployment", "ops-ferry");
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "mover", "app.kubernetes.io/instance": "east"})
    );
}

#[test]
fn every_object_carries_the_standard_labels() {
    for file in values_files() {
        for doc in render_file("ferry", &file) {
            let labels = &doc["metadata"]["labels"];
            for key in [
                "helm.sh/chart",
                "app.kubernetes.io/name",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/version",
                "app.kubernetes.io/managed-by",
            ] {
                assert!(
                    labels[key].is_string(),
                    "{} {} lacks {key} with {}",
                    doc["kind"],
                    doc["metadata"]["name"],
                    file.display()
                );
            }
            assert_eq!(labels["helm.sh/chart"], "ferry-0.1.0");
            assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm");
        }
    }
}

#[test]
fn a_disruption_budget_only_when_a_standby_exists() {
    let single = render("ferry", &[("replicas", json!(1))]);
    assert!(single.iter().all(|d| d["kind"] != "PodDisruptionBudget"));

    let docs = render("ferry", &[("replicas", json!(2))]);
    let budget = the(&docs, "PodDisruptionBudget", "ferry");
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
    let pod_labels = &the(&docs, "Deployment", "ferry")["spec"]["template"]["metadata"]["labels"];
    for (key, value) in budget["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(
            &pod_labels[key], value,
            "the budget selects {key} the pods lack"
        );
    }

    let docs = render("ferry", &[("podDisruptionBudget.minAvailable", json!(1))]);
    let budget = the(&docs, "PodDisruptionBudget", "ferry");
    assert_eq!(budget["spec"]["minAvailable"], 1);
    assert!(budget["spec"]["maxUnavailable"].is_null());
}

#[test]
fn an_existing_service_account_replaces_the_charts_own() {
    let docs = render(
        "ferry",
        &[
            ("serviceAccount.create", json!(false)),
            ("serviceAccount.name", json!("platform-operator")),
        ],
    );
    assert!(find(&docs, "ServiceAccount", "ferry").is_none());
    let pod = &the(&docs, "Deployment", "ferry")["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "platform-operator");
    for (kind, name) in [
        ("ClusterRoleBinding", "ferry"),
        ("RoleBinding", "ferry-leader-election"),
    ] {
        assert_eq!(
            the(&docs, kind, name)["subjects"][0]["name"],
            "platform-operator"
        );
    }
    // Without a name there is no account to bind: helm says so.
    let err = template("ferry", &["--set", "serviceAccount.create=false"]).unwrap_err();
    assert!(err.contains("serviceAccount.name is required"), "{err}");

    let docs = render(
        "ferry",
        &[(
            "serviceAccount.annotations",
            json!({"iam.example.com/role": "ferry"}),
        )],
    );
    assert_eq!(
        the(&docs, "ServiceAccount", "ferry")["metadata"]["annotations"]["iam.example.com/role"],
        "ferry"
    );
}

#[test]
fn pod_values_reach_the_deployment() {
    let docs = render(
        "ferry",
        &[
            ("prometheus.tokenSecret.name", json!("prom-token")),
            ("imagePullSecrets", json!([{"name": "registry"}])),
            ("priorityClassName", json!("system-cluster-critical")),
            ("extraArgs", json!(["--queries=/etc/ferry/q.yaml"])),
            (
                "extraVolumes",
                json!([{"name": "q", "configMap": {"name": "q"}}]),
            ),
            (
                "extraVolumeMounts",
                json!([{"name": "q", "mountPath": "/etc/ferry"}]),
            ),
            (
                "topologySpreadConstraints",
                json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
            ),
            ("securityContext.runAsUser", json!(1000)),
        ],
    );
    let deployment = the(&docs, "Deployment", "ferry");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let env = container["env"].as_array().unwrap();
    let token = env
        .iter()
        .find(|e| e["name"] == "FERRY_PROMETHEUS_TOKEN")
        .expect("the token's variable");
    assert_eq!(
        token["valueFrom"]["secretKeyRef"],
        json!({"name": "prom-token", "key": "token"})
    );
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "registry"}]));
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(
        args_of(deployment).last().unwrap(),
        "--queries=/etc/ferry/q.yaml"
    );
    assert_eq!(pod["volumes"][1]["name"], "q");
    assert_eq!(container["volumeMounts"][1]["mountPath"], "/etc/ferry");
    // A constraint without a selector gets the operator pods' labels.
    assert_eq!(
        pod["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    // An override replaces a field of the block; the rest stays hardened.
    assert_eq!(container["securityContext"]["runAsUser"], 1000);
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );

    // No token variable unless a Secret is named.
    let docs = render("ferry", &[]);
    let env =
        &the(&docs, "Deployment", "ferry")["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        !env.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "FERRY_PROMETHEUS_TOKEN")
    );
}

#[test]
fn the_network_policy_opens_only_the_metrics_port() {
    let docs = render("ferry", &[]);
    assert!(docs.iter().all(|d| d["kind"] != "NetworkPolicy"));

    let docs = render("ferry", &[("networkPolicy.enabled", json!(true))]);
    let policy = the(&docs, "NetworkPolicy", "ferry");
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(
        policy["spec"]["ingress"],
        json!([{"ports": [{"port": "metrics", "protocol": "TCP"}]}])
    );
    let pod_labels = &the(&docs, "Deployment", "ferry")["spec"]["template"]["metadata"]["labels"];
    for (key, value) in policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&pod_labels[key], value);
    }
}

#[test]
fn user_roles_aggregate_into_view_and_edit_and_never_write_peers() {
    let docs = render("ferry", &[]);
    let view = the(&docs, "ClusterRole", "ferry-view");
    let edit = the(&docs, "ClusterRole", "ferry-edit");
    let label = |role: &Value, to: &str| {
        role["metadata"]["labels"][format!("rbac.authorization.k8s.io/aggregate-to-{to}")].clone()
    };
    for to in ["view", "edit", "admin"] {
        assert_eq!(label(view, to), "true", "view aggregates to {to}");
    }
    assert_eq!(label(edit, "view"), Value::Null, "edit must not reach view");
    for role in [view, edit] {
        for rule in role["rules"].as_array().unwrap() {
            assert_eq!(rule["apiGroups"], json!(["ferry.dev"]));
            let resources = rule["resources"].as_array().unwrap();
            let verbs = rule["verbs"].as_array().unwrap();
            let writes = verbs
                .iter()
                .any(|v| !["get", "list", "watch"].contains(&v.as_str().unwrap()));
            if writes {
                assert!(
                    !resources
                        .iter()
                        .any(|r| r.as_str().unwrap().starts_with("clusterpeers")),
                    "users may write ClusterPeers: {rule}"
                );
                assert!(
                    !verbs
                        .iter()
                        .any(|v| v == "create" || v == "update" || v == "patch")
                        || resources == &[json!("migrationpolicies")],
                    "users may write what only Ferry writes: {rule}"
                );
            }
        }
    }
    let docs = render("ferry", &[("userRoles.aggregate", json!(false))]);
    assert!(find(&docs, "ClusterRole", "ferry-view").is_none());
}

#[test]
fn the_install_notes_name_the_lease_and_the_next_steps() {
    let chart = chart_dir().display().to_string();
    let notes = |sets: &[&str]| {
        let mut args = vec![
            "install",
            "east",
            &chart,
            "--namespace",
            NAMESPACE,
            "--dry-run=client",
        ];
        args.extend_from_slice(sets);
        let out = run_helm(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        text.split("NOTES:")
            .nth(1)
            .expect("helm prints NOTES")
            .to_owned()
    };
    let default = notes(&[]);
    assert!(default.contains("get lease east-leader"), "{default}");
    assert!(
        default.contains("ferry peer join --release east"),
        "{default}"
    );
    assert!(
        default.contains("clusterName is still \"local\""),
        "{default}"
    );
    let named = notes(&["--set", "clusterName=eu-west"]);
    assert!(!named.contains("still"), "{named}");
}

// ---------------------------------------------------------------------------
// Every ci values file, applied to a sandbox.

fn run_kubectl(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    Command::new(kubectl())
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap())
        .args(args)
        .output()
        .expect("kubectl runs")
}

fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let out = run_kubectl(kubeconfig, args);
    assert!(
        out.status.success(),
        "kubectl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn can_i(kubeconfig: &Path, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = run_kubectl(kubeconfig, &all);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Applies one values file's render, CRDs included, with `kubectl apply
/// --server-side`, as `helm install` would create it; only the ServiceMonitor is left out,
/// since the sandbox has no Prometheus Operator CRDs.
fn apply_values_file(kubeconfig: &Path, dir: &Path, file: &Path) -> Vec<Value> {
    let values = file.display().to_string();
    let docs = template("ferry", &["-f", &values, "--include-crds"])
        .unwrap_or_else(|err| panic!("helm template -f {values}: {err}"));
    let applied: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] != "ServiceMonitor")
        .cloned()
        .collect();
    // One JSON document per object, as a YAML stream.
    let path = dir.join("render.yaml");
    let stream: Vec<String> = applied.iter().map(Value::to_string).collect();
    std::fs::write(&path, stream.join("\n---\n")).unwrap();
    // Namespaces the values name must exist first, as the chart documents.
    kubectl_ok(kubeconfig, &["create", "namespace", "shop"]);
    let path = path.display().to_string();
    kubectl_ok(kubeconfig, &["apply", "--server-side", "-f", &path]);
    applied
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ci_render_applies_to_a_sandbox_and_its_roles_hold() {
    for file in values_files() {
        let sandbox = ferry_sandbox::Sandbox::start(ferry_sandbox::SandboxConfig::new("chart"))
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        sandbox.write_kubeconfig(&kubeconfig).unwrap();
        let result = tokio::task::spawn_blocking(move || {
            let applied = apply_values_file(&kubeconfig, dir.path(), &file);
            check_applied(&kubeconfig, &applied, &file);
        })
        .await;
        sandbox.shutdown().await;
        if let Err(err) = result {
            std::panic::resume_unwind(err.into_panic());
        }
    }
}

fn check_applied(kubeconfig: &Path, applied: &[Value], file: &Path) {
    let context = file.display();
    let deployment = applied
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    let name = deployment["metadata"]["name"].as_str().unwrap();
    kubectl_ok(
        kubeconfig,
        &[
            "wait",
            "--for=condition=Available",
            &format!("deployment/{name}"),
            "-n",
            NAMESPACE,
            "--timeout=120s",
        ],
    );
    // Every object is there as rendered.
    for doc in applied {
        let kind = doc["kind"].as_str().unwrap();
        let object = doc["metadata"]["name"].as_str().unwrap();
        let mut args = vec!["get", kind, object];
        let namespace;
        if let Some(ns) = doc["metadata"]["namespace"].as_str() {
            namespace = ns.to_owned();
            args.extend(["-n", &namespace]);
        }
        kubectl_ok(kubeconfig, &args);
    }
    if applied.iter().any(|d| d["kind"] == "PodDisruptionBudget") {
        kubectl_ok(kubeconfig, &["get", "pdb", "-n", NAMESPACE]);
    }

    // Ferry's account may keep its own Lease, whatever its name.
    let account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap();
    let as_ferry = format!("--as=system:serviceaccount:{NAMESPACE}:{account}");
    let in_namespace = format!("--namespace={NAMESPACE}");
    let has_account = applied
        .iter()
        .any(|d| d["kind"] == "ServiceAccount" && d["metadata"]["name"] == account);
    if has_account {
        assert_eq!(
            can_i(
                kubeconfig,
                &[
                    "update",
                    "leases.coordination.k8s.io",
                    &in_namespace,
                    &as_ferry
                ]
            ),
            "yes",
            "{context}"
        );
    }

    // People: `view` reads Ferry's resources, `edit` writes policies, and
    // neither touches ClusterPeers, when the user roles are on.
    let aggregated = applied.iter().any(|d| {
        d["kind"] == "ClusterRole" && d["metadata"]["name"].as_str().unwrap().ends_with("-view")
    });
    for (role, user) in [("view", "viola"), ("edit", "ed")] {
        kubectl_ok(
            kubeconfig,
            &[
                "create",
                "rolebinding",
                &format!("{user}-{role}"),
                "--clusterrole",
                role,
                "--user",
                user,
                "-n",
                "shop",
            ],
        );
    }
    let ask = |user: &str, verb: &str, resource: &str| {
        let as_user = format!("--as={user}");
        can_i(kubeconfig, &[verb, resource, "-n", "shop", &as_user])
    };
    let yes_if = |on: bool| if on { "yes" } else { "no" };
    assert_eq!(
        ask("viola", "list", "migrationpolicies.ferry.dev"),
        yes_if(aggregated),
        "{context}"
    );
    assert_eq!(
        ask("viola", "create", "migrationpolicies.ferry.dev"),
        "no",
        "{context}"
    );
    assert_eq!(
        ask("ed", "create", "migrationpolicies.ferry.dev"),
        yes_if(aggregated),
        "{context}"
    );
    assert_eq!(
        ask("ed", "delete", "workloadmigrations.ferry.dev"),
        yes_if(aggregated),
        "{context}"
    );
    assert_eq!(
        ask("ed", "create", "workloadmigrations.ferry.dev"),
        "no",
        "{context}"
    );
    assert_eq!(
        ask("ed", "patch", "workloadmigrations.ferry.dev/status"),
        "no",
        "{context}"
    );
    let as_ed = "--as=ed".to_owned();
    assert_eq!(
        can_i(kubeconfig, &["create", "clusterpeers.ferry.dev", &as_ed]),
        "no",
        "{context}"
    );
}
