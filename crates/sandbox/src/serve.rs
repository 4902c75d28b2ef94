//! `ferry sandbox serve`: one sandbox in the foreground until a signal.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::kubelet::KubeletRules;
use crate::sandbox::{Identity, Sandbox, SandboxConfig};

/// Options of `ferry sandbox serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Name of the cluster (and kubeconfig context).
    pub name: String,
    /// Port on 127.0.0.1; 0 picks one.
    pub port: u16,
    /// Where to write the administrator's kubeconfig; none prints nothing
    /// but the log line.
    pub kubeconfig_out: Option<PathBuf>,
    /// Users and ServiceAccounts to write kubeconfigs for, each beside the
    /// administrator's (see [`Identity::kubeconfig_path`]). ServiceAccounts
    /// (and their namespaces) are created first. Needs `kubeconfig_out`.
    pub identities: Vec<Identity>,
    /// How long the ServiceAccount tokens in those kubeconfigs last.
    pub token_ttl: Duration,
    /// `Some` runs the kubelet stand-in in its realistic mode with these
    /// rules (Pods, EndpointSlices, Jobs, bound claims); `None` keeps the
    /// instant mode.
    pub kubelet_rules: Option<KubeletRules>,
}

/// Run one sandbox until SIGTERM or SIGINT, then shut it down. `on_ready`
/// runs once it serves and its kubeconfigs are written, with the path of
/// each identity's, to tell a person where to connect.
pub async fn serve_until_signal(
    options: ServeOptions,
    on_ready: impl FnOnce(&Sandbox, &[(Identity, PathBuf)]),
) -> Result<()> {
    if !options.identities.is_empty() && options.kubeconfig_out.is_none() {
        return Err(Error::NoKubeconfigPath);
    }
    let config = SandboxConfig {
        port: options.port,
        ..SandboxConfig::new(options.name)
    };
    let sandbox = Sandbox::start(config).await?;
    if let Some(rules) = options.kubelet_rules {
        sandbox.kubelet().set_realistic(rules);
    }
    let mut written = Vec::new();
    if let Some(path) = &options.kubeconfig_out {
        sandbox.write_kubeconfig(path)?;
        for identity in options.identities {
            if let Identity::ServiceAccount { namespace, name } = &identity {
                sandbox.create_service_account(namespace, name)?;
            }
            let identity_path = identity.kubeconfig_path(path);
            sandbox.write_kubeconfig_for(&identity_path, &identity, options.token_ttl)?;
            written.push((identity, identity_path));
        }
    }
    tracing::info!(
        name = sandbox.name(),
        url = %sandbox.url(),
        kubeconfig = ?options.kubeconfig_out,
        "sandbox serving; stop with SIGTERM or Ctrl-C"
    );
    on_ready(&sandbox, &written);
    wait_for_signal().await?;
    sandbox.shutdown().await;
    Ok(())
}

#[cfg(unix)]
async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(Error::Signal)?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result.map_err(Error::Signal),
        _ = term.recv() => Ok(()),
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() -> Result<()> {
    tokio::signal::ctrl_c().await.map_err(Error::Signal)
}
