//! `ferry demo --transport nats`: a local `nats-server` with JetStream,
//! started from the PATH for the demo's clusters and stopped with it.
//!
//! It listens on 127.0.0.1 only and without TLS or users (the operators
//! are started with `--nats-allow-plaintext`'s setting): a demo broker,
//! never one to point a real cluster at.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{Error, Result};

/// How to get a broker when none is installed.
pub(crate) const INSTALL_HINT: &str = "none is on PATH. Install it (Debian and Ubuntu: `sudo apt-get install nats-server`, which puts it in /usr/sbin; elsewhere a release binary from https://github.com/nats-io/nats-server/releases) and make sure PATH includes its directory";

/// A running local broker; killed and its store removed on drop.
pub(crate) struct LocalBroker {
    child: Child,
    store: PathBuf,
    /// `nats://127.0.0.1:<port>`.
    pub url: String,
}

/// `nats-server` on PATH.
fn find_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file())
}

impl LocalBroker {
    /// Starts a broker on a free loopback port and waits until it listens.
    pub(crate) async fn start() -> Result<Self> {
        let binary = find_server().ok_or(Error::NatsServerMissing)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(Error::NatsServerStart)?
            .port();
        let store =
            std::env::temp_dir().join(format!("ferry-demo-nats-{}-{port}", std::process::id()));
        let child = Command::new(binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(&store)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(Error::NatsServerStart)?;
        let broker = LocalBroker {
            child,
            store,
            url: format!("nats://127.0.0.1:{port}"),
        };
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(broker);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(Error::NatsServerStart(std::io::Error::other(format!(
            "nats-server did not listen on 127.0.0.1:{port} within ten seconds"
        ))))
    }
}

impl Drop for LocalBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}
