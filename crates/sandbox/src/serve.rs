//! `ferry sandbox serve`: one sandbox in the foreground until a signal.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::sandbox::{Sandbox, SandboxConfig};

/// Options of `ferry sandbox serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Name of the cluster (and kubeconfig context).
    pub name: String,
    /// Port on 127.0.0.1; 0 picks one.
    pub port: u16,
    /// Where to write the kubeconfig; none prints nothing but the log line.
    pub kubeconfig_out: Option<PathBuf>,
}

/// Run one sandbox until SIGTERM or SIGINT, then shut it down. `on_ready`
/// runs once it serves and its kubeconfig is written, to tell a person where
/// to connect.
pub async fn serve_until_signal(
    options: ServeOptions,
    on_ready: impl FnOnce(&Sandbox),
) -> Result<()> {
    let config = SandboxConfig {
        port: options.port,
        ..SandboxConfig::new(options.name)
    };
    let sandbox = Sandbox::start(config).await?;
    if let Some(path) = &options.kubeconfig_out {
        sandbox.write_kubeconfig(path)?;
    }
    tracing::info!(
        name = sandbox.name(),
        url = %sandbox.url(),
        kubeconfig = ?options.kubeconfig_out,
        "sandbox serving; stop with SIGTERM or Ctrl-C"
    );
    on_ready(&sandbox);
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
