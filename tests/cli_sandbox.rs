//! `ferry sandbox serve` as its own process, driven by the pinned kubectl.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

mod support;
use support::tools::kubectl;

/// Kills the server if the test fails before it stops it.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_writes_a_kubeconfig_kubectl_uses_and_stops_on_sigterm() {
    let kubectl = kubectl();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args([
                "sandbox",
                "serve",
                "--name",
                "trial",
                "--port",
                "0",
                "--kubeconfig-out",
            ])
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .spawn()
            .expect("ferry starts"),
    );
    let mut lines = BufReader::new(server.0.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").unwrap();
    assert!(
        first.starts_with("sandbox trial serving at https://127.0.0.1:"),
        "{first}"
    );

    let out = Command::new(&kubectl)
        .args(["get", "namespaces", "-o", "name"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = String::from_utf8_lossy(&out.stdout);
    assert!(names.contains("namespace/default"), "{names}");

    let pid = server.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = server.0.wait().unwrap();
    assert!(status.success(), "exit after SIGTERM: {status}");
}
