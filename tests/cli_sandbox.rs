//! `ferry sandbox serve` as its own process, driven by the pinned kubectl.

use std::io::{BufRead, BufReader};
use std::path::Path;
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

/// The pinned kubectl, run with `kubeconfig`.
fn kubectl_as(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    let binary = kubectl();
    Command::new(&binary)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .output()
        .unwrap_or_else(|e| panic!("{} does not run ({e})", binary.display()))
}

#[test]
fn serve_writes_kubeconfigs_for_named_users_and_service_accounts() {
    let dir = tempfile::tempdir().unwrap();
    let admin = dir.path().join("trial.kubeconfig");
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["sandbox", "serve", "--name", "trial", "--kubeconfig-out"])
            .arg(&admin)
            .args(["--user", "alice:dev,ops", "--service-account", "team/bot"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("ferry starts"),
    );
    let mut lines = BufReader::new(server.0.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    while printed.len() < 2 {
        let line = lines.next().expect("a line").unwrap();
        if let Some(rest) = line.strip_prefix("kubeconfig for ") {
            printed.push(rest.to_string());
        }
    }
    let alice = dir.path().join("trial-user-alice.kubeconfig");
    let bot = dir.path().join("trial-sa-team-bot.kubeconfig");
    assert_eq!(
        printed,
        vec![
            format!("alice: {}", alice.display()),
            format!("system:serviceaccount:team:bot: {}", bot.display()),
        ]
    );
    let whoami = ["auth", "whoami", "-o", "jsonpath={.status.userInfo}"];
    for (kubeconfig, user, groups) in [
        (&alice, "alice", r#"["dev","ops","system:authenticated"]"#),
        (
            &bot,
            "system:serviceaccount:team:bot",
            r#"["system:serviceaccounts","system:serviceaccounts:team","system:authenticated"]"#,
        ),
    ] {
        let out = kubectl_as(kubeconfig, &whoami);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let info = String::from_utf8_lossy(&out.stdout);
        assert!(info.contains(&format!(r#""username":"{user}""#)), "{info}");
        assert!(info.contains(&format!(r#""groups":{groups}"#)), "{info}");
    }
    // An unknown token is refused with 401, as kube-apiserver refuses it.
    let out = kubectl_as(&admin, &["--token", "not-a-token", "get", "namespaces"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("You must be logged in to the server"),
        "{stderr}"
    );
    let pid = server.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert!(server.0.wait().unwrap().success());
}

#[test]
fn identities_need_a_kubeconfig_path_and_well_formed_names() {
    for args in [
        &["--user", "alice"][..],
        &["--service-account", "team/bot"],
        &["--kubeconfig-out", "/tmp/x", "--service-account", "bot"],
        &["--kubeconfig-out", "/tmp/x", "--user", ":dev"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["sandbox", "serve"])
            .args(args)
            .output()
            .expect("ferry runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}: a usage error");
    }
}

#[test]
fn serve_with_kubelet_rules_runs_pods_kubectl_sees() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, "rules:\n- image: '*:unready'\n  readiness: never\n").unwrap();
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["sandbox", "serve", "--name", "pods", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .env("FERRY_KUBELET_RULES", &rules)
            .stdout(Stdio::piped())
            .spawn()
            .expect("ferry starts"),
    );
    let mut lines = BufReader::new(server.0.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").unwrap();
    assert!(first.starts_with("sandbox pods serving at"), "{first}");
    let out = kubectl_as(
        &kubeconfig,
        &[
            "create",
            "deployment",
            "web",
            "--image=example/web:unready",
            "--replicas=2",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Running but never ready: kubectl's own wait sees the Ready condition
    // False on both pods.
    let jsonpath = "jsonpath={range .items[*]}{.status.phase}/{.status.conditions[?(@.type==\"Ready\")].status} {end}";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let out = kubectl_as(
            &kubeconfig,
            &["get", "pods", "-l", "app=web", "-o", jsonpath],
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.trim() == "Running/False Running/False" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "pods: {text:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let pid = server.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert!(server.0.wait().unwrap().success());
}

#[test]
fn bad_kubelet_rules_are_a_usage_error_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, "rules:\n- image: 'x'\n  startDelay: 5 minutes\n").unwrap();
    let missing = dir.path().join("missing.yaml");
    for (args, expected) in [
        (
            vec!["--kubelet-rules", rules.to_str().unwrap()],
            "rules[0].startDelay",
        ),
        (
            vec!["--kubelet-rules", missing.to_str().unwrap()],
            "missing.yaml",
        ),
        (
            vec![
                "--kubelet",
                "instant",
                "--kubelet-rules",
                rules.to_str().unwrap(),
            ],
            "--kubelet realistic",
        ),
        (vec!["--kubelet", "sometimes"], "sometimes"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["sandbox", "serve"])
            .args(&args)
            .output()
            .expect("ferry runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
