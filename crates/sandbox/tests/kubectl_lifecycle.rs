//! kubectl meeting namespace lifecycle and deletion: the refusals it prints,
//! a terminating namespace, `--cascade=foreground` and `--dry-run=server`.
//! Drives `$FERRY_KUBECTL`, else `kubectl` on PATH.

mod common;

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use serde_json::json;

/// Run kubectl; its success, stdout and stderr.
fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let binary = std::env::var_os("FERRY_KUBECTL").unwrap_or_else(|| "kubectl".into());
    let output = Command::new(&binary)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {binary:?} ({e}): set FERRY_KUBECTL or put kubectl on PATH")
        });
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn run(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let kubeconfig = kubeconfig.to_owned();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl(&kubeconfig, &args)
    })
    .await
    .unwrap()
}

async fn create(client: &kube::Client, namespace: &str, object: serde_json::Value) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn kubectl_sees_the_lifecycle_refusals_and_deletion_modes() {
    let cluster = common::start("kubectl-lifecycle").await;
    let config = cluster.kubeconfig_path();

    let (ok, _, stderr) = run(&config, &["delete", "namespace", "kube-system"]).await;
    assert!(!ok);
    assert!(
        stderr.contains("Error from server (Forbidden): namespaces \"kube-system\" is forbidden: this namespace may not be deleted"),
        "{stderr}"
    );

    // A namespace held open by its content's finalizer is Terminating, and
    // kubectl's create (through apply) is refused there.
    let mut ns = Namespace::default();
    ns.metadata.name = Some("doomed".into());
    Api::<Namespace>::all(cluster.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    create(
        &cluster.client,
        "doomed",
        json!({"metadata": {"name": "held", "finalizers": ["ferry.dev/hold"]}}),
    )
    .await;
    let (ok, stdout, stderr) =
        run(&config, &["delete", "namespace", "doomed", "--wait=false"]).await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("namespace \"doomed\" deleted"), "{stdout}");
    let (_, phase, _) = run(
        &config,
        &[
            "get",
            "namespace",
            "doomed",
            "-o",
            "jsonpath={.status.phase}",
        ],
    )
    .await;
    assert_eq!(phase, "Terminating");
    let manifest = cluster.dir.path().join("late.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: late\n  namespace: doomed\n",
    )
    .unwrap();
    let path = manifest.to_str().unwrap();
    let (ok, _, stderr) = run(&config, &["apply", "-f", path]).await;
    assert!(!ok);
    assert!(
        stderr.contains("configmaps \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated"),
        "{stderr}"
    );

    // --cascade=foreground leaves the owner waiting on its blocking dependent.
    let owner = create(
        &cluster.client,
        "default",
        json!({"metadata": {"name": "owner"}}),
    )
    .await;
    create(
        &cluster.client,
        "default",
        json!({"metadata": {
            "name": "dependent", "finalizers": ["ferry.dev/hold"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid, "blockOwnerDeletion": true}],
        }}),
    )
    .await;
    let (ok, _, stderr) = run(
        &config,
        &[
            "delete",
            "configmap",
            "owner",
            "--cascade=foreground",
            "--wait=false",
        ],
    )
    .await;
    assert!(ok, "{stderr}");
    let (_, finalizers, _) = run(
        &config,
        &[
            "get",
            "configmap",
            "owner",
            "-o",
            "jsonpath={.metadata.finalizers}",
        ],
    )
    .await;
    assert_eq!(finalizers, "[\"foregroundDeletion\"]");

    // --dry-run=server answers as if deleted and deletes nothing.
    create(
        &cluster.client,
        "default",
        json!({"metadata": {"name": "rehearsed"}}),
    )
    .await;
    let (ok, stdout, stderr) = run(
        &config,
        &["delete", "configmap", "rehearsed", "--dry-run=server"],
    )
    .await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("(server dry run)"), "{stdout}");
    let (ok, _, _) = run(&config, &["get", "configmap", "rehearsed"]).await;
    assert!(ok, "still there");
    cluster.stop().await;
}
