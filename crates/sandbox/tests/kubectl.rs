//! kubectl (an independent client) driving the sandbox: get, apply, get -o
//! json, get -w, delete. The kubectl is the pinned v1.35 ([`common::kubectl`]).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let kubectl = common::kubectl();
    let output = Command::new(&kubectl)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .output()
        .unwrap_or_else(|e| panic!("{} does not run: {e}", kubectl.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {stdout}{stderr}"
    );
    stdout
}

const MANIFEST: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: from-kubectl
  labels:
    app: demo
data:
  greeting: hello
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx
"#;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.test.ferry.dev
spec:
  group: test.ferry.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: test.ferry.dev/v1
kind: Gadget
metadata:
  name: g1
spec:
  size: 42
"#;

#[tokio::test]
async fn kubectl_shows_crd_printer_columns() {
    let cluster = common::start("kubectl-crd").await;
    let kubeconfig = cluster.kubeconfig_path();
    let manifest = cluster.dir.path().join("crd.yaml");
    std::fs::write(&manifest, CRD).unwrap();
    let table = tokio::task::spawn_blocking(move || {
        // The CRD and its object in one file: kubectl may need a retry for discovery.
        let path = manifest.to_string_lossy().into_owned();
        let _ = Command::new(common::kubectl())
            .args(["apply", "-f", &path])
            .env("KUBECONFIG", &kubeconfig)
            .output();
        kubectl(&kubeconfig, &["apply", "-f", &path]);
        kubectl(&kubeconfig, &["get", "gd"])
    })
    .await
    .unwrap();
    assert!(table.contains("SIZE") && table.contains("AGE"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("g1") && l.contains("42")),
        "{table}"
    );
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_applies_watches_and_deletes() {
    let cluster = common::start("kubectl").await;
    let kubeconfig = cluster.kubeconfig_path();
    let cfg = kubeconfig.clone();
    let run = move |args: &'static [&'static str]| {
        let cfg = cfg.clone();
        tokio::task::spawn_blocking(move || kubectl(&cfg, args))
    };

    let namespaces = run(&["get", "namespaces"]).await.unwrap();
    assert!(
        namespaces.contains("NAME") && namespaces.contains("AGE"),
        "{namespaces}"
    );
    assert!(namespaces.contains("kube-system"), "{namespaces}");

    let manifest = cluster.dir.path().join("manifest.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();
    let path = manifest.to_string_lossy().into_owned();
    let cfg = kubeconfig.clone();
    let applied = tokio::task::spawn_blocking({
        let path = path.clone();
        move || kubectl(&cfg, &["apply", "-f", &path])
    })
    .await
    .unwrap();
    assert!(
        applied.contains("configmap/from-kubectl created"),
        "{applied}"
    );
    assert!(applied.contains("deployment.apps/web created"), "{applied}");

    let json = run(&["get", "configmap", "from-kubectl", "-o", "json"])
        .await
        .unwrap();
    let object: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(object["data"]["greeting"], "hello");

    std::fs::write(
        &manifest,
        MANIFEST.replace("greeting: hello", "greeting: bonjour"),
    )
    .unwrap();
    let cfg = kubeconfig.clone();
    let reapplied = tokio::task::spawn_blocking(move || kubectl(&cfg, &["apply", "-f", &path]))
        .await
        .unwrap();
    assert!(
        reapplied.contains("configmap/from-kubectl configured"),
        "{reapplied}"
    );
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    assert_eq!(
        api.get("from-kubectl").await.unwrap().data.unwrap()["greeting"],
        "bonjour"
    );

    let listed = run(&["get", "cm", "-l", "app=demo"]).await.unwrap();
    assert!(listed.contains("from-kubectl"), "{listed}");

    // get -w prints a change made by another client.
    let mut child = Command::new(common::kubectl())
        .args(["get", "configmaps", "-w"])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let new = ConfigMap {
        metadata: ObjectMeta {
            name: Some("seen-by-watch".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    api.create(&PostParams::default(), &new).await.unwrap();
    let seen = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + common::WAIT;
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(line) if line.contains("seen-by-watch") => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    })
    .await
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen, "kubectl get -w printed the new object");

    let deleted = run(&["delete", "configmap", "from-kubectl"]).await.unwrap();
    assert!(
        deleted.contains("configmap \"from-kubectl\" deleted"),
        "{deleted}"
    );
    assert_eq!(common::status(api.get("from-kubectl").await).code, 404);
    cluster.stop().await;
}
