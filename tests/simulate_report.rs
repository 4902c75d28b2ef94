//! The HTML report of `ferry simulate`, opened in headless Chromium: the page
//! loads without network, its script runs, and its charts are in the DOM.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64};

use ferry::policy::{Engine, EngineConfig, Limits};
use ferry::simulate::{self, Control, NamedPolicy};

const CHROMIUM: &str = "/usr/bin/chromium";

#[test]
fn the_html_report_renders_its_charts_in_chromium() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install it with `apt-get install -y --no-install-recommends chromium`"
    );
    let root = env!("CARGO_MANIFEST_DIR");
    let scenario = simulate::load(
        &Path::new(root).join("tests/data/simulate/generated.yaml"),
        None,
    )
    .unwrap();
    let bytes = support::modules::module("cheapest_cluster");
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let policy = engine.load("cheapest-cluster", &bytes, None).unwrap();
    let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
    let report = simulate::simulate(
        &scenario,
        &engine,
        &[NamedPolicy {
            name: "cheapest-cluster".into(),
            policy,
        }],
        // A deadline no evaluation comes near, however busy the machine.
        &Limits {
            timeout: std::time::Duration::from_secs(300),
            ..Limits::default()
        },
        &Control {
            stop: &stop,
            progress: &progress,
        },
    );
    let html = simulate::html::render(&report);
    // Self-contained: nothing to fetch.
    assert!(!html.contains("src=") && !html.contains("href=") && !html.contains("@import"));

    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let profile = dir.path().join("profile");
    let output = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("cannot run chromium");
    let dom = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && !dom.is_empty(),
        "chromium failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    // Cost, migrations, and one utilisation chart per run (baseline + policy).
    assert!(
        dom.contains("data-rendered=\"4\""),
        "the page's script did not run or found no charts:\n{}",
        &dom[..dom.len().min(2000)]
    );
    assert_eq!(dom.matches("<svg class=\"chart\"").count(), 4);
    // The script counted the lines of each chart: baseline + policy on the cost chart.
    assert!(dom.contains("data-kind=\"cost\""));
    assert!(
        dom.contains("data-series=\"2\""),
        "cost chart lines missing"
    );
    assert!(dom.matches("<polyline").count() >= 2 + 1 + 2 * scenario.clusters.len());
}
