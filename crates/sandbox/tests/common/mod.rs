//! Shared test helpers: a sandbox plus a `kube::Client` built from the
//! kubeconfig file it writes, exactly as a user would.
#![allow(dead_code)]

pub mod kubelet;
pub mod pb;

use std::time::Duration;

use ferry_sandbox::{Sandbox, SandboxConfig};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tempfile::TempDir;

/// A running sandbox, a client for it, and the directory holding its kubeconfig.
pub struct Cluster {
    pub sandbox: Sandbox,
    pub client: Client,
    pub dir: TempDir,
}

impl Cluster {
    pub fn kubeconfig_path(&self) -> std::path::PathBuf {
        self.dir.path().join("kubeconfig")
    }

    pub async fn stop(self) {
        self.sandbox.shutdown().await;
    }
}

pub async fn start(name: &str) -> Cluster {
    start_with(SandboxConfig {
        kubelet_delay: Duration::from_millis(20),
        ..SandboxConfig::new(name)
    })
    .await
}

pub async fn start_with(config: SandboxConfig) -> Cluster {
    let sandbox = Sandbox::start(config).await.expect("sandbox starts");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubeconfig");
    sandbox.write_kubeconfig(&path).expect("kubeconfig written");
    let client = client_from(&path).await;
    Cluster {
        sandbox,
        client,
        dir,
    }
}

/// A fresh client from a kubeconfig file, with no flags or overrides.
pub async fn client_from(path: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("kubeconfig parses");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable");
    Client::try_from(config).expect("client builds")
}

/// The `Status` of an API error, or a panic naming what came instead.
pub fn status<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The kubectl the tests drive: `$FERRY_KUBECTL`, else the pinned v1.35 that
/// `scripts/install-tools` puts in the repository's `.tools/bin`. Never the
/// one on PATH, whose version would decide what the test proves.
pub fn kubectl() -> std::path::PathBuf {
    let path = match std::env::var_os("FERRY_KUBECTL") {
        Some(path) => std::path::PathBuf::from(path),
        // The repository root, two levels above this crate.
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .nth(2)
            .expect("the crate sits at crates/sandbox")
            .join(".tools/bin/kubectl"),
    };
    assert!(
        path.is_file(),
        "kubectl is missing at {} (from FERRY_KUBECTL or .tools/bin); run scripts/install-tools",
        path.display()
    );
    path
}

/// One raw HTTP request through the client (its TLS and credential), for
/// what `kube::Api` cannot send; the status code and the body as JSON
/// (`Null` when it is not JSON).
pub async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(bytes))
        .expect("request builds");
    let response = client.send(request).await.expect("request answered");
    let code = response.status().as_u16();
    let body = response
        .into_body()
        .collect_bytes()
        .await
        .expect("body read");
    (
        code,
        serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    )
}

/// How long a test waits for something that must happen. It bounds only a
/// test that has already failed, so it is generous enough for a busy machine.
pub const WAIT: Duration = Duration::from_secs(120);

/// Poll `check` until it returns Some, for at most [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
