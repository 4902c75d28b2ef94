//! `ferry demo` end to end: three sandbox clusters, three operators, the
//! embedded policy, scripted prices. The binary runs exactly as a user runs it.

use std::process::Command;

fn amount(lines: &[&str], label: &str) -> f64 {
    let line = lines
        .iter()
        .find(|l| l.contains(label))
        .unwrap_or_else(|| panic!("no line with {label:?}"));
    line.rsplit(' ').next().unwrap().trim().parse().unwrap()
}

#[test]
fn the_demo_moves_workloads_to_cheaper_clusters_and_away_from_the_spike() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["demo", "--seconds", "36"])
        .env_remove("FERRY_LOG")
        .output()
        .expect("ferry demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();

    // Decisions, migration phases, the pinned workload's refusal and the spike are all shown.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("DECIDED") && l.contains("on-demand →")),
        "{stdout}"
    );
    assert!(lines.iter().any(|l| l.contains("PROGRESSING")), "{stdout}");
    assert!(lines.iter().any(|l| l.contains("COMPLETED")), "{stdout}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("REFUSED") && l.contains("shop/payments") && l.contains("pinned")),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("PRICE") && l.contains("spike")),
        "{stdout}"
    );
    // Once spot got dear, the operator in the spot cluster moved work off it.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("DECIDED") && l.contains(" spot →")),
        "{stdout}"
    );

    // The pinned workload never moved; the bill went down.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("on-demand runs") && l.contains("shop/payments")),
        "{stdout}"
    );
    let unmoved = amount(&lines, "had none moved:");
    let after = amount(&lines, "after Ferry:");
    assert!(
        after < unmoved,
        "after {after} is not below {unmoved}\n{stdout}"
    );
}

/// PATH with Debian's /usr/sbin, where its nats-server lives.
fn path_with_sbin() -> String {
    format!("{}:/usr/sbin", std::env::var("PATH").unwrap_or_default())
}

#[test]
fn the_demo_runs_its_moves_through_a_local_nats_broker() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["demo", "--seconds", "36", "--transport", "nats"])
        .env_remove("FERRY_LOG")
        .env("PATH", path_with_sbin())
        .output()
        .expect("ferry demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("NATS JetStream broker at nats://127.0.0.1:")),
        "{stdout}"
    );
    assert!(lines.iter().any(|l| l.contains("COMPLETED")), "{stdout}");
    let unmoved = amount(&lines, "had none moved:");
    let after = amount(&lines, "after Ferry:");
    assert!(
        after < unmoved,
        "after {after} is not below {unmoved}\n{stdout}"
    );
}

#[test]
fn without_nats_server_the_nats_demo_says_how_to_get_one() {
    let empty = std::env::temp_dir();
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["demo", "--seconds", "10", "--transport", "nats"])
        .env_remove("FERRY_LOG")
        .env("PATH", &empty)
        .output()
        .expect("ferry demo runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("apt-get install nats-server"), "{stderr}");
}
