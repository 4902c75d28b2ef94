//! The chart's `secretAccess` values, rendered by the pinned `helm template`
//! and applied to a sandbox API server with real RBAC: `cluster` (the
//! default) grants Ferry's ServiceAccount Secrets everywhere through the
//! ClusterRole; `namespaces` grants the same verbs only in the release
//! namespace and the listed ones, and Ferry's Secret requests anywhere else
//! are refused with 403.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::chart::{chart_dir, documents, run_helm};
use support::cluster::{client_for_kubeconfig, ensure_namespace};

const RELEASE_NAMESPACE: &str = "ferry-system";
const SECRET_VERBS: [&str; 4] = ["get", "create", "patch", "delete"];

/// `helm template` with `sets` (`--set-json`), every document in order;
/// the exit status and stderr when helm refuses.
fn render(sets: &[(&str, Value)]) -> Result<Vec<Value>, String> {
    let chart = chart_dir().display().to_string();
    let mut args: Vec<String> = [
        "template",
        "ferry",
        &chart,
        "--namespace",
        RELEASE_NAMESPACE,
    ]
    .map(String::from)
    .into();
    for (path, value) in sets {
        args.push("--set-json".into());
        args.push(format!("{path}={value}"));
    }
    let out = run_helm(&args.iter().map(String::as_str).collect::<Vec<_>>());
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(documents(&String::from_utf8(out.stdout).expect("UTF-8")))
}

fn by_namespace() -> Vec<(&'static str, Value)> {
    vec![
        ("secretAccess.scope", json!("namespaces")),
        // The release namespace listed again is not a second Role.
        (
            "secretAccess.namespaces",
            json!(["shop", "batch", RELEASE_NAMESPACE]),
        ),
    ]
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// The verbs a rule list grants on core `resource`.
fn verbs(rules: &Value, resource: &str) -> BTreeSet<String> {
    let mut verbs = BTreeSet::new();
    for rule in rules.as_array().expect("rules") {
        let core = rule["apiGroups"].as_array().unwrap().contains(&json!(""));
        let names = rule["resources"].as_array().unwrap();
        if core && names.contains(&json!(resource)) {
            for verb in rule["verbs"].as_array().unwrap() {
                verbs.insert(verb.as_str().unwrap().to_owned());
            }
        }
    }
    verbs
}

fn secret_verbs() -> BTreeSet<String> {
    SECRET_VERBS.iter().map(|v| v.to_string()).collect()
}

#[test]
fn by_default_the_cluster_role_grants_secrets_and_no_secret_role_exists() {
    let docs = render(&[]).expect("renders");
    let cluster_role = of_kind(&docs, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "ferry")
        .expect("ClusterRole ferry");
    assert_eq!(verbs(&cluster_role["rules"], "secrets"), secret_verbs());
    assert!(
        of_kind(&docs, "Role")
            .iter()
            .all(|r| r["metadata"]["name"] != "ferry-secrets")
    );
}

#[test]
fn by_namespace_secrets_move_from_the_cluster_role_to_one_role_per_namespace() {
    let docs = render(&by_namespace()).expect("renders");
    let cluster_role = of_kind(&docs, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "ferry")
        .expect("ClusterRole ferry");
    assert!(verbs(&cluster_role["rules"], "secrets").is_empty());
    // ConfigMaps keep their cluster-wide grant.
    assert_eq!(
        verbs(&cluster_role["rules"], "configmaps"),
        ["get", "create", "delete"].map(String::from).into()
    );

    let roles: Vec<&Value> = of_kind(&docs, "Role")
        .into_iter()
        .filter(|r| r["metadata"]["name"] == "ferry-secrets")
        .collect();
    let namespaces: Vec<&str> = roles
        .iter()
        .map(|r| r["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, [RELEASE_NAMESPACE, "shop", "batch"]);
    for role in &roles {
        assert_eq!(verbs(&role["rules"], "secrets"), secret_verbs());
        assert_eq!(role["rules"].as_array().unwrap().len(), 1, "{role}");
    }
    let bindings: Vec<&Value> = of_kind(&docs, "RoleBinding")
        .into_iter()
        .filter(|b| b["metadata"]["name"] == "ferry-secrets")
        .collect();
    assert_eq!(bindings.len(), 3);
    for binding in bindings {
        assert_eq!(binding["roleRef"]["name"], "ferry-secrets");
        assert_eq!(
            binding["subjects"][0],
            json!({"kind": "ServiceAccount", "name": "ferry", "namespace": RELEASE_NAMESPACE})
        );
    }
}

#[test]
fn an_unknown_scope_is_refused_by_name() {
    let refused = render(&[("secretAccess.scope", json!("everywhere"))])
        .expect_err("helm refuses an unknown scope");
    // The values schema refuses it before any template runs, naming the
    // field and the values it takes.
    assert!(
        refused.contains("/secretAccess/scope") && refused.contains("'cluster', 'namespaces'"),
        "{refused}"
    );
}

/// Applies the rendered ServiceAccount and RBAC objects as the admin.
async fn apply_rbac(admin: &Client, docs: &[Value]) {
    let params = PatchParams::apply("ferry-test").force();
    for doc in docs {
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = doc["metadata"]["namespace"]
            .as_str()
            .unwrap_or(RELEASE_NAMESPACE);
        let patch = Patch::Apply(doc);
        let result = match doc["kind"].as_str().unwrap_or_default() {
            "ServiceAccount" => Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
                .patch(name, &params, &patch)
                .await
                .map(drop),
            "ClusterRole" => Api::<ClusterRole>::all(admin.clone())
                .patch(name, &params, &patch)
                .await
                .map(drop),
            "ClusterRoleBinding" => Api::<ClusterRoleBinding>::all(admin.clone())
                .patch(name, &params, &patch)
                .await
                .map(drop),
            "Role" => Api::<Role>::namespaced(admin.clone(), namespace)
                .patch(name, &params, &patch)
                .await
                .map(drop),
            "RoleBinding" => Api::<RoleBinding>::namespaced(admin.clone(), namespace)
                .patch(name, &params, &patch)
                .await
                .map(drop),
            _ => continue,
        };
        result.unwrap_or_else(|e| panic!("applying {} {name}: {e}", doc["kind"]));
    }
}

/// Whether Ferry's client may read a Secret and a ConfigMap in `namespace`
/// (both exist): `Ok` or the HTTP status of the refusal.
async fn reads(ferry: &Client, namespace: &str) -> (Result<(), u16>, Result<(), u16>) {
    let status = |e: kube::Error| match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API refusal: {other}"),
    };
    let secret = Api::<Secret>::namespaced(ferry.clone(), namespace)
        .get("s")
        .await
        .map(drop)
        .map_err(status);
    let config_map = Api::<ConfigMap>::namespaced(ferry.clone(), namespace)
        .get("c")
        .await
        .map(drop)
        .map_err(status);
    (secret, config_map)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applied_to_a_sandbox_each_scope_grants_what_it_says() {
    for (sets, outside) in [(vec![], Ok(())), (by_namespace(), Err(403))] {
        let sandbox = ferry::sandbox::Sandbox::start(ferry::sandbox::SandboxConfig::new("secrets"))
            .await
            .expect("sandbox");
        let admin = client_for_kubeconfig(&sandbox.kubeconfig_yaml()).await;
        for namespace in [RELEASE_NAMESPACE, "shop", "batch", "elsewhere"] {
            ensure_namespace(&admin, namespace).await;
            let object = |kind: &str| {
                json!({"apiVersion": "v1", "kind": kind,
                       "metadata": {"name": if kind == "Secret" { "s" } else { "c" }, "namespace": namespace}})
            };
            let params = PatchParams::apply("ferry-test");
            Api::<Secret>::namespaced(admin.clone(), namespace)
                .patch("s", &params, &Patch::Apply(object("Secret")))
                .await
                .expect("Secret");
            Api::<ConfigMap>::namespaced(admin.clone(), namespace)
                .patch("c", &params, &Patch::Apply(object("ConfigMap")))
                .await
                .expect("ConfigMap");
        }
        apply_rbac(&admin, &render(&sets).expect("renders")).await;
        let ferry = sandbox
            .kubeconfig_for_service_account(RELEASE_NAMESPACE, "ferry", Duration::from_secs(3600))
            .expect("a token for ferry");
        let ferry = client_for_kubeconfig(&ferry).await;
        for namespace in [RELEASE_NAMESPACE, "shop", "batch"] {
            assert_eq!(
                reads(&ferry, namespace).await,
                (Ok(()), Ok(())),
                "{namespace} with {sets:?}"
            );
        }
        assert_eq!(
            reads(&ferry, "elsewhere").await,
            (outside, Ok(())),
            "elsewhere with {sets:?}"
        );
        sandbox.shutdown().await;
    }
}
