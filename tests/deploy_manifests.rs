//! The Helm chart in `deploy/chart/ferry` and the plain manifests in
//! `deploy/manifests`, which `scripts/render-manifests` generates from it with
//! `helm template` (default values plus `namespace.create=true`).
//!
//! Everything is rendered by the pinned Helm (`scripts/install-tools`), so the
//! objects checked here are the ones `helm install` creates; the drift test
//! makes sure the plain manifests are those objects too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

mod support;
use support::chart::*;
use support::tools::{helm, kubectl};

// ---------------------------------------------------------------------------
// The chart, and the manifests generated from it.

#[test]
fn the_chart_passes_helm_lint() {
    let chart = chart_dir().display().to_string();
    // The defaults, and the optional objects switched on.
    let defaults: &[&str] = &[];
    let flipped: &[&str] = &[
        "--set",
        "namespace.create=true",
        "--set",
        "serviceMonitor.enabled=true",
    ];
    for values in [defaults, flipped] {
        let mut args = vec!["lint", "--strict", &chart];
        args.extend(values);
        let out = run_helm(&args);
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "helm {}:\n{report}", args.join(" "));
        assert!(
            report.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{report}"
        );
    }
}

#[test]
fn plain_manifests_are_the_chart_rendered_with_default_values() {
    let chart_crds = chart_dir().join("crds");
    let generated_crds = yaml_files(&root().join("crds"));
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

    // The same script, the same Helm, into a scratch directory.
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(root().join(RENDER_COMMAND))
        .arg("--out")
        .arg(scratch.path())
        .env("FERRY_HELM", helm())
        .output()
        .unwrap_or_else(|err| panic!("{RENDER_COMMAND} does not run: {err}"));
    assert!(
        out.status.success(),
        "{RENDER_COMMAND} --out failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = yaml_files(scratch.path());
    assert_eq!(
        yaml_files(&manifests_dir()),
        fresh,
        "deploy/manifests/ holds other files than the chart renders; run `{RENDER_COMMAND}`"
    );
    for name in &fresh {
        assert!(
            read(&manifests_dir().join(name)) == read(&scratch.path().join(name)),
            "deploy/manifests/{name} is out of date with the chart; run `{RENDER_COMMAND}`"
        );
    }

    // Splitting Helm's output into numbered files loses and changes nothing.
    assert_eq!(
        plain_manifest_objects(),
        rendered_with_defaults(),
        "deploy/manifests/ does not hold exactly the objects `helm template` prints"
    );
}

#[test]
fn the_service_monitor_is_rendered_only_when_enabled() {
    assert!(
        !rendered_with_defaults()
            .keys()
            .any(|key| key.starts_with("ServiceMonitor/"))
    );

    let objects = render(&[
        ("serviceMonitor.enabled", json!(true)),
        (
            "serviceMonitor.labels",
            json!({ "release": "kube-prometheus" }),
        ),
    ]);
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
    let objects = render(&[
        ("image.tag", json!("9.9.9")),
        ("clusterName", json!("eu-west")),
        ("replicas", json!(3)),
        ("env", json!([{ "name": "EXTRA", "value": "1" }])),
        ("nodeSelector", json!({ "pool": "system" })),
        ("podAnnotations", json!({ "a": "b" })),
    ]);
    let deployment = &objects["Deployment/ferry"];
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
fn nats_values_reach_the_operator_and_mount_only_the_credential() {
    let objects = render(&[
        ("nats.url", json!("tls://nats.nats.svc:4222")),
        ("nats.credentials.secretName", json!("ferry-nats")),
        ("nats.credentials.kind", json!("nkey")),
        ("nats.credentials.key", json!("seed")),
        ("nats.ca.secretName", json!("nats-ca")),
        ("nats.peers", json!(["east"])),
    ]);
    let pod = &objects["Deployment/ferry"]["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for wanted in [
        "--nats-url=tls://nats.nats.svc:4222",
        "--nats-nkey-seed-file=/etc/ferry/nats/credentials/seed",
        "--nats-ca-file=/etc/ferry/nats/ca/ca.crt",
        "--nats-duplicate-window=1h",
    ] {
        assert!(args.contains(&wanted), "{wanted} in {args:?}");
    }
    assert!(!args.iter().any(|a| a.contains("plaintext")), "{args:?}");
    let mounts = container["volumeMounts"].as_array().unwrap();
    assert!(mounts.contains(&json!({"name": "nats-credentials", "mountPath": "/etc/ferry/nats/credentials", "readOnly": true})));
    let volumes = pod["volumes"].as_array().unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "ferry-nats")
    );
    // A NATS peer gets an inbox namespace, and no ServiceAccount: it holds
    // no credential for this cluster.
    assert!(objects.contains_key("Namespace/ferry-inbox-east"));
    assert!(!objects.contains_key("ServiceAccount/ferry-peer-east"));
    // Without a URL nothing of NATS is rendered.
    let plain = rendered_with_defaults();
    let args =
        plain["Deployment/ferry"]["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(!args.contains("nats"), "{args}");
}

// ---------------------------------------------------------------------------
// What the manifests say.

fn deployment() -> Value {
    rendered_with_defaults()["Deployment/ferry"].clone()
}

#[test]
fn the_operator_pod_passes_the_receivers_restricted_profile() {
    // The same admission code that judges a peer's workloads judges Ferry's
    // own pod, at Pod Security `restricted`. Ferry's own ServiceAccount is
    // the one thing a peer's workload could not bring, so it is listed.
    let spec = ferry::crd::AdmissionSpec {
        service_accounts: vec![RELEASE_NAME.to_owned()],
        ..Default::default()
    };
    let incoming = ferry::admission::Incoming {
        workload: &deployment(),
        config_maps: &[],
        secrets: &[],
        service_accounts: &[],
        claims: &[],
        hook_image: None,
    };
    let usage = ferry::admission::Usage::default();
    if let Err(violation) = ferry::admission::review(&incoming, &spec, &usage) {
        panic!("the chart's Deployment breaks the restricted profile: {violation}");
    }

    // And the check has teeth: one privileged setting is refused by field.
    let mut escalating = deployment();
    escalating["spec"]["template"]["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] =
        json!(true);
    let incoming = ferry::admission::Incoming {
        workload: &escalating,
        ..incoming
    };
    let violation = ferry::admission::review(&incoming, &spec, &usage).unwrap_err();
    assert_eq!(
        violation.field,
        "spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation"
    );
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
    // What Ferry keeps in the cache stays under the volume's limit, or the
    // kubelet would evict the pod.
    let max_mib: u64 = args
        .iter()
        .find_map(|a| a.strip_prefix("--cache-max-mib="))
        .expect("--cache-max-mib is set")
        .parse()
        .unwrap();
    let limit = volume["emptyDir"]["sizeLimit"].as_str().expect("sizeLimit");
    let limit_mib: u64 = limit.strip_suffix("Mi").expect("in Mi").parse().unwrap();
    assert!(max_mib < limit_mib, "{max_mib} MiB against {limit}");
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
    let objects = rendered_with_defaults();
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
        plain_manifest_objects().len(),
        "not every object was validated:\n{report}"
    );
}

fn run_kubectl(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    let kubectl = kubectl();
    Command::new(&kubectl)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap())
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("{} does not run: {err}", kubectl.display()))
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

/// `kubectl apply --server-side`, as the README tells users to install the
/// manifests, with kubectl's validation on (the sandbox serves OpenAPI and
/// judges fields as kube-apiserver does).
const APPLY: &[&str] = &["apply", "--server-side"];

/// The resourceVersion of each object, by `kind/name` as kubectl names them.
fn resource_versions(kubeconfig: &Path, files: &[PathBuf]) -> Vec<(String, String)> {
    let mut args = vec!["get", "-o", "json"];
    let paths: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    for path in &paths {
        args.extend(["-f", path]);
    }
    let list: Value = serde_json::from_str(&kubectl_ok(kubeconfig, &args)).unwrap();
    let items = match list["kind"].as_str() {
        Some("List") => list["items"].as_array().unwrap().clone(),
        _ => vec![list],
    };
    items
        .iter()
        .map(|item| {
            (
                format!(
                    "{}/{}",
                    item["kind"].as_str().unwrap(),
                    item["metadata"]["name"].as_str().unwrap()
                ),
                item["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
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
        // Every manifest applies: the sandbox serves each kind the chart
        // renders, the ServiceAccount and the RBAC kinds included.
        let served: Vec<PathBuf> = yaml_files(&manifests_dir())
            .into_iter()
            .map(|name| manifests_dir().join(name))
            .collect();
        let kinds: Vec<String> = served
            .iter()
            .flat_map(|path| documents(&read(path)))
            .map(|doc| doc["kind"].as_str().unwrap().to_string())
            .collect();
        for kind in [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ] {
            assert!(kinds.iter().any(|k| k == kind), "no {kind} in {kinds:?}");
        }

        let mut apply: Vec<String> = APPLY.iter().map(|a| a.to_string()).collect();
        for path in &served {
            apply.push("-f".into());
            apply.push(path.display().to_string());
        }
        let apply: Vec<&str> = apply.iter().map(String::as_str).collect();
        kubectl_ok(&kubeconfig, &apply);

        kubectl_ok(&kubeconfig, &["get", "namespace", RELEASE_NAMESPACE]);
        for plural in ["clusterpeers", "migrationpolicies", "workloadmigrations"] {
            kubectl_ok(
                &kubeconfig,
                &[
                    "wait",
                    "--for=condition=Established",
                    &format!("crd/{plural}.ferry.dev"),
                    "--timeout=120s",
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
                "--timeout=120s",
            ],
        );
        kubectl_ok(
            &kubeconfig,
            &["get", "service", "ferry-metrics", "-n", RELEASE_NAMESPACE],
        );

        // Applying again changes nothing: server-side apply reports every
        // object as applied, so the proof is that no resourceVersion moves.
        // The Deployment is Available, so the kubelet stand-in is done with it.
        let before = resource_versions(&kubeconfig, &served);
        let served_objects: usize = served.iter().map(|p| documents(&read(p)).len()).sum();
        assert_eq!(before.len(), served_objects, "{before:?}");
        let again = kubectl_ok(&kubeconfig, &apply);
        assert_eq!(again.lines().count(), served_objects, "{again}");
        for line in again.lines() {
            assert!(line.ends_with(" serverside-applied"), "{line}");
        }
        assert_eq!(
            resource_versions(&kubeconfig, &served),
            before,
            "a second apply changed an object"
        );

        // The applied roles and bindings are in force: the chart's
        // ServiceAccount may do what its ClusterRole and Role grant, and
        // nothing beyond them.
        let account = format!("--as=system:serviceaccount:{RELEASE_NAMESPACE}:ferry");
        let can_i = |args: &[&str]| {
            let mut all = vec!["auth", "can-i"];
            all.extend_from_slice(args);
            all.push(&account);
            let out = run_kubectl(&kubeconfig, &all);
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        let namespace = format!("--namespace={RELEASE_NAMESPACE}");
        for (args, answer) in [
            (vec!["patch", "workloadmigrations.ferry.dev/status"], "yes"),
            (vec!["patch", "deployments.apps"], "yes"),
            (vec!["update", "deployments.apps/scale"], "no"),
            (vec!["list", "secrets", &namespace], "no"),
            (vec!["update", "leases.coordination.k8s.io", &namespace], "yes"),
            (vec!["update", "leases.coordination.k8s.io"], "no"),
            (vec!["delete", "clusterpeers.ferry.dev"], "no"),
            // Ferry creates and deletes its own copies; no update.
            (vec!["delete", "secrets", &namespace], "yes"),
            (vec!["update", "secrets", &namespace], "no"),
        ] {
            assert_eq!(can_i(&args), answer, "kubectl auth can-i {args:?}");
        }
    })
    .await;
    sandbox.shutdown().await;
    if let Err(err) = result {
        std::panic::resume_unwind(err.into_panic());
    }
}
