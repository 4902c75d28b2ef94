//! The public handle of one sandbox cluster: start, kubeconfig, outages,
//! fault injection and shutdown.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::cluster::{Cluster, Faults, Kubelet};
use crate::error::{Error, Result};
use crate::object::meta_mut;
use crate::{auth, http, kubelet, namespaces, tls};

mod credentials;

pub use credentials::Identity;

/// How to start a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The cluster's name: the kubeconfig's cluster, user and context name.
    pub name: String,
    /// The port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// How long the kubelet stand-in takes to settle a Deployment's status.
    pub kubelet_delay: Duration,
    /// Whether rollouts become ready at all.
    pub rollouts_ready: bool,
    /// How many change events are kept for watches to resume from; a watch
    /// from an older version gets `410 Gone`.
    pub history_limit: usize,
    /// How often an idle watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Seed of the fault-injection draws and generated ids.
    pub seed: u64,
    /// Whether requests are authorized by RBAC (default). Off, every
    /// authenticated request is allowed, as kube-apiserver's `AlwaysAllow`.
    pub rbac: bool,
}

impl SandboxConfig {
    /// Defaults for a sandbox named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            name: "sandbox".into(),
            port: 0,
            kubelet_delay: Duration::from_millis(200),
            rollouts_ready: true,
            history_limit: 100_000,
            bookmark_interval: Duration::from_secs(1),
            seed: 0x5eed,
            rbac: true,
        }
    }
}

/// One in-memory Kubernetes API server on 127.0.0.1 over HTTPS.
///
/// Dropping it stops its tasks; the data lives as long as the handle, across
/// [`stop`](Self::stop) and [`restart`](Self::restart).
pub struct Sandbox {
    cluster: Arc<Cluster>,
    acceptor: TlsAcceptor,
    ca_pem: String,
    port: u16,
    server: Option<JoinHandle<()>>,
    kubelet: JoinHandle<()>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("name", &self.cluster.name)
            .field("port", &self.port)
            .field("running", &self.is_running())
            .finish()
    }
}

impl Sandbox {
    /// Generate certificates and a token, bind the port and start serving.
    /// Must be called inside a Tokio runtime.
    pub async fn start(config: SandboxConfig) -> Result<Self> {
        let tls = tls::generate(&config.name)?;
        let token: String = tls::random_bytes::<24>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let seed = config.seed ^ u64::from_le_bytes(tls::random_bytes::<8>());
        let kubelet_settings = Kubelet::new(config.kubelet_delay, config.rollouts_ready);
        let keys = auth::Keys {
            client_ca: tls.client_ca,
            tokens: auth::token::Signer::generate()?,
        };
        let cluster = Arc::new(Cluster::new(
            config.name.clone(),
            token,
            keys,
            seed,
            config.history_limit,
            kubelet_settings,
            config.bookmark_interval,
        ));
        cluster.faults.set_seed(config.seed);
        cluster.authorizer.set_enabled(config.rbac);
        namespaces::seed(&cluster);
        crate::auth::bootstrap::seed(&cluster);
        let listener = bind(config.port).await?;
        let port = listener
            .local_addr()
            .map_err(|source| Error::Bind {
                port: config.port,
                source,
            })?
            .port();
        let server = tokio::spawn(http::serve(listener, tls.acceptor.clone(), cluster.clone()));
        let kubelet = tokio::spawn(kubelet::run(cluster.clone()));
        tracing::info!(name = %config.name, port, "sandbox started");
        Ok(Self {
            cluster,
            acceptor: tls.acceptor,
            ca_pem: tls.ca_pem,
            port,
            server: Some(server),
            kubelet,
        })
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.cluster.name
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The port it listens on (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The bearer token clients must send.
    pub fn token(&self) -> &str {
        &self.cluster.token
    }

    /// The CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Whether the server accepts connections (false between stop and restart).
    pub fn is_running(&self) -> bool {
        self.server.is_some()
    }

    /// Fault injection: latency and failed writes.
    pub fn faults(&self) -> &Faults {
        &self.cluster.faults
    }

    /// The kubelet stand-in's settings.
    pub fn kubelet(&self) -> &Kubelet {
        &self.cluster.kubelet
    }

    /// A kubeconfig with one cluster, user and context (all named after the
    /// sandbox), current-context set: usable without flags. Its user is
    /// the administrator (the bearer token of [`token`](Self::token)).
    pub fn kubeconfig_yaml(&self) -> String {
        // Hex, so plain YAML (and tests edit this line by its text).
        let token = &self.cluster.token;
        self.kubeconfig_with_user(&self.cluster.name, &format!("token: {token}"))
    }

    /// A kubeconfig for this sandbox whose user entry is named `user` and
    /// holds `credential` (YAML fields of a kubeconfig `user`, one a line).
    pub(crate) fn kubeconfig_with_user(&self, user: &str, credential: &str) -> String {
        let quote = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
        let name = quote(&self.cluster.name);
        let user = quote(user);
        let ca = STANDARD.encode(&self.ca_pem);
        let credential = credential.replace('\n', "\n    ");
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {user}\n  user:\n    {credential}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {user}\n    namespace: default\ncurrent-context: {name}\npreferences: {{}}\n",
            url = self.url(),
        )
    }

    /// Write [`kubeconfig_yaml`](Self::kubeconfig_yaml) to `path` (mode 0600).
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<()> {
        write_private(path.as_ref(), &self.kubeconfig_yaml())
    }

    /// An outage: stop listening and cut every open connection and watch.
    /// The data stays. Does nothing when already stopped.
    pub async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
            let _ = server.await;
            tracing::info!(name = %self.cluster.name, "sandbox stopped");
        }
    }

    /// Listen again on the same port, with the same data, certificates and token.
    pub async fn restart(&mut self) -> Result<()> {
        if self.server.is_some() {
            return Err(Error::State {
                name: self.cluster.name.clone(),
                state: "running",
            });
        }
        let listener = bind(self.port).await?;
        self.server = Some(tokio::spawn(http::serve(
            listener,
            self.acceptor.clone(),
            self.cluster.clone(),
        )));
        tracing::info!(name = %self.cluster.name, port = self.port, "sandbox restarted");
        Ok(())
    }

    /// Stop everything this sandbox runs and wait for it.
    pub async fn shutdown(mut self) {
        self.stop().await;
        self.kubelet.abort();
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
        self.kubelet.abort();
    }
}

/// Write a file only its owner may read: kubeconfigs hold credentials.
pub(crate) fn write_private(path: &Path, contents: &str) -> Result<()> {
    let error = |source| Error::WriteKubeconfig {
        path: PathBuf::from(path),
        source,
    };
    std::fs::write(path, contents).map_err(error)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(error)?;
    }
    Ok(())
}

async fn bind(port: u16) -> Result<TcpListener> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    // Right after a stop the port may linger briefly; retry a little.
    let mut attempt = 0;
    loop {
        match TcpListener::bind(address).await {
            Ok(listener) => return Ok(listener),
            Err(source) if attempt >= 20 || port == 0 => return Err(Error::Bind { port, source }),
            Err(_) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// An active Namespace object, as the API server would have created it.
pub(crate) fn new_namespace(cluster: &Cluster, name: &str) -> serde_json::Value {
    let mut namespace = stamped(
        cluster,
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
            "spec": {},
        }),
    );
    namespaces::prepare_for_create(&mut namespace);
    namespace
}

/// `object` with the metadata the API server sets on create.
pub(crate) fn stamped(cluster: &Cluster, mut object: serde_json::Value) -> serde_json::Value {
    if let Some(meta) = meta_mut(&mut object) {
        meta.insert("uid".into(), cluster.ids.uid().into());
        meta.insert("creationTimestamp".into(), crate::object::now().into());
        meta.insert("generation".into(), 1.into());
    }
    object
}
