//! `ferry demo` end to end: three sandbox clusters, three operators, the
//! embedded policy, scripted prices. The binary runs exactly as a user runs
//! it, at the shortest duration it accepts and at its default.

use std::process::Command;

fn amount(lines: &[&str], label: &str) -> f64 {
    let line = lines
        .iter()
        .find(|l| l.contains(label))
        .unwrap_or_else(|| panic!("no line with {label:?}"));
    line.rsplit(' ').next().unwrap().trim().parse().unwrap()
}

/// Runs `ferry demo` with `args`; its standard output.
fn demo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("demo")
        .args(args)
        .env_remove("FERRY_LOG")
        .env_remove("RUST_LOG")
        .output()
        .expect("ferry demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// An event line: `[ 12.3s] TAG  text`.
fn event(line: &str) -> Option<(f64, &str, &str)> {
    let rest = line.strip_prefix('[')?;
    let (at, rest) = rest.split_once("s]")?;
    let rest = rest.trim_start();
    let (tag, text) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((at.trim().parse().ok()?, tag, text.trim()))
}

/// `shop/web on-demand → spot` of an event's text.
fn move_of(text: &str) -> &str {
    text.split(':')
        .next()
        .unwrap_or(text)
        .split(" (")
        .next()
        .unwrap_or(text)
        .trim()
}

/// The event lines come in time order, and every phase of a move comes
/// after the decision that started it.
fn assert_narration_in_event_order(stdout: &str) {
    let events: Vec<(f64, &str, &str)> = stdout.lines().filter_map(event).collect();
    assert!(!events.is_empty(), "{stdout}");
    for pair in events.windows(2) {
        assert!(
            pair[0].0 <= pair[1].0,
            "{:?} printed before {:?}\n{stdout}",
            pair[0],
            pair[1]
        );
    }
    for (i, (_, tag, text)) in events.iter().enumerate() {
        if ["ACCEPTED", "PROGRESSING", "READY", "COMPLETED"].contains(tag) {
            let decided = events[..i]
                .iter()
                .any(|(_, t, d)| *t == "DECIDED" && move_of(d) == move_of(text));
            assert!(decided, "{tag} {text} before its DECIDED\n{stdout}");
        }
    }
}

/// The headline is a saving once the clusters settled, or says why the
/// figure is not an outcome.
fn assert_headline_honest(stdout: &str) {
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.contains("saving against staying put"), "{stdout}");
    if last.contains("once settled") {
        let lines: Vec<&str> = stdout.lines().collect();
        let unmoved = amount(&lines, "had none moved:");
        let after = amount(&lines, "after Ferry:");
        assert!(
            after <= unmoved,
            "settled at {after}/h, above staying put at {unmoved}/h\n{stdout}"
        );
        assert!(stdout.contains("settled at"), "{stdout}");
    } else {
        assert!(last.contains("not an outcome"), "{stdout}");
    }
}

#[test]
fn the_demo_moves_workloads_to_cheaper_clusters_and_away_from_the_spike() {
    let stdout = demo(&[]);
    let lines: Vec<&str> = stdout.lines().collect();

    // Decisions, migration phases, the pinned workload's refusal and the spike are all shown.
    let shown = |tag: &str, with: &str| {
        lines
            .iter()
            .filter_map(|l| event(l))
            .any(|(_, t, text)| t == tag && text.contains(with))
    };
    assert!(shown("DECIDED", "on-demand →"), "{stdout}");
    assert!(shown("PROGRESSING", ""), "{stdout}");
    assert!(shown("COMPLETED", ""), "{stdout}");
    assert!(shown("REFUSED", "shop/payments"), "{stdout}");
    assert!(shown("PRICE", "spike"), "{stdout}");
    // Once spot got dear, the operator in the spot cluster moved work off it.
    assert!(shown("DECIDED", " spot →"), "{stdout}");

    // The pinned workload never moved.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("on-demand runs") && l.contains("shop/payments")),
        "{stdout}"
    );
    assert_narration_in_event_order(&stdout);
    assert_headline_honest(&stdout);
    // At the default length the clusters settle, below the cost of staying put.
    let last = lines.last().unwrap_or(&"");
    assert!(last.contains("once settled"), "{stdout}");
}

#[test]
fn the_shortest_demo_still_ends_with_an_honest_headline() {
    let stdout = demo(&["--seconds", "10"]);
    assert!(
        stdout
            .lines()
            .filter_map(event)
            .any(|(_, tag, _)| tag == "PRICE"),
        "{stdout}"
    );
    assert_narration_in_event_order(&stdout);
    assert_headline_honest(&stdout);
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
