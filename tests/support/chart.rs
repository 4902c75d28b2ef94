//! Ferry's Helm chart (`deploy/chart/ferry`) rendered by the pinned `helm`,
//! and the plain manifests (`deploy/manifests`) that `scripts/render-manifests`
//! generates from it. Rendering is Helm's alone: nothing here interprets a
//! template, so what the tests check is what `helm install` would create.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use super::tools::helm;

pub const RENDER_COMMAND: &str = "scripts/render-manifests";
pub const RELEASE_NAME: &str = "ferry";
pub const RELEASE_NAMESPACE: &str = "ferry-system";
pub const KUBERNETES_VALIDATE_INSTALL: &str = "python3 -m pip install kubernetes-validate==1.37.0";

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

/// Runs the pinned helm with `args`; a failure to start is a panic, its exit
/// status is the caller's to judge.
pub fn run_helm(args: &[&str]) -> Output {
    let helm = helm();
    Command::new(&helm)
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("{} does not run: {err}", helm.display()))
}

/// `helm template` of the chart with CRDs, as the plain manifests are
/// rendered (release `ferry` in `ferry-system`, `namespace.create=true`),
/// with each `(path, value)` override given to `--set-json`. Every object,
/// keyed by `Kind/name`.
pub fn render(overrides: &[(&str, Value)]) -> BTreeMap<String, Value> {
    render_in(RELEASE_NAMESPACE, overrides)
}

/// [`render`] with the release in `namespace`.
pub fn render_in(namespace: &str, overrides: &[(&str, Value)]) -> BTreeMap<String, Value> {
    let chart = chart_dir().display().to_string();
    let mut args: Vec<String> = [
        "template",
        RELEASE_NAME,
        &chart,
        "--namespace",
        namespace,
        "--include-crds",
        "--set",
        "namespace.create=true",
    ]
    .map(String::from)
    .into();
    for (path, value) in overrides {
        args.push("--set-json".into());
        args.push(format!("{path}={value}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_helm(&args);
    assert!(
        out.status.success(),
        "helm {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    objects(&String::from_utf8(out.stdout).expect("helm prints UTF-8"))
}

/// The chart with the plain manifests' values.
pub fn rendered_with_defaults() -> BTreeMap<String, Value> {
    render(&[])
}

pub fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap_or_else(|err| panic!("not YAML: {err}\n{yaml}"))
        .into_iter()
        .filter(|doc| !doc.is_null())
        .collect()
}

/// Every object of a YAML stream, keyed by `Kind/name`; a key seen twice is
/// a panic, since one would hide the other.
pub fn objects(yaml: &str) -> BTreeMap<String, Value> {
    let mut objects = BTreeMap::new();
    for doc in documents(yaml) {
        let key = format!(
            "{}/{}",
            doc["kind"].as_str().unwrap_or("?"),
            doc["metadata"]["name"].as_str().unwrap_or("?")
        );
        assert!(
            objects.insert(key.clone(), doc).is_none(),
            "two objects are {key}"
        );
    }
    objects
}

/// Every object in `deploy/manifests`, keyed by `Kind/name`.
pub fn plain_manifest_objects() -> BTreeMap<String, Value> {
    let dir = manifests_dir();
    let stream: Vec<String> = yaml_files(&dir)
        .into_iter()
        .map(|name| read(&dir.join(name)))
        .collect();
    objects(&stream.join("\n---\n"))
}
