//! The HTML report of `ferry simulate`, opened in headless Chromium: the page
//! loads without network, its script runs, and its charts are in the DOM;
//! where the scenario gives carbon intensity, emissions stand beside cost.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64};

use ferry::policy::{Engine, EngineConfig, Limits};
use ferry::simulate::{self, Control, NamedPolicy, Report, Scenario};

const CHROMIUM: &str = "/usr/bin/chromium";

/// The scenario `tests/data/simulate/{file}`.
fn scenario(file: &str) -> Scenario {
    let root = env!("CARGO_MANIFEST_DIR");
    simulate::load(
        &Path::new(root).join("tests/data/simulate").join(file),
        None,
    )
    .unwrap()
}

/// Simulates `scenario` with the Rust example `module` (e.g. `cheapest_cluster`).
fn simulate_with(scenario: &Scenario, name: &str, module: &str) -> Report {
    let bytes = support::modules::module(module);
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let policy = engine.load(name, &bytes, None).unwrap();
    let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
    simulate::simulate(
        scenario,
        &engine,
        &[NamedPolicy {
            name: name.into(),
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
    )
}

/// The DOM of the report's page after Chromium has run its script.
fn rendered_dom(report: &Report) -> String {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install it with `apt-get install -y --no-install-recommends chromium`"
    );
    let html = simulate::html::render(report);
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
    let dom = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() && !dom.is_empty(),
        "chromium failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    dom
}

/// The opening tag of the chart of `kind`, as the page's script left it.
fn chart_tag<'a>(dom: &'a str, kind: &str) -> Option<&'a str> {
    dom.split("<svg ")
        .skip(1)
        .find(|tag| tag.contains(&format!("data-kind=\"{kind}\"")))
        .map(|svg| &svg[..svg.find('>').unwrap_or(svg.len())])
}

#[test]
fn the_html_report_renders_its_charts_in_chromium() {
    let scenario = scenario("generated.yaml");
    let report = simulate_with(&scenario, "cheapest-cluster", "cheapest_cluster");
    let dom = rendered_dom(&report);
    // Cost, migrations, and one utilisation chart per run (baseline + policy).
    assert!(
        dom.contains("data-rendered=\"4\""),
        "the page's script did not run or found no charts:\n{}",
        &dom[..dom.len().min(2000)]
    );
    assert_eq!(dom.matches("<svg class=\"chart\"").count(), 4);
    // The script counted the lines of each chart: baseline + policy on the cost chart.
    let cost = chart_tag(&dom, "cost").expect("no cost chart");
    assert!(
        cost.contains("data-series=\"2\""),
        "cost chart lines missing: {cost}"
    );
    assert!(dom.matches("<polyline").count() >= 2 + 1 + 2 * scenario.clusters.len());
    // No carbon intensity in the scenario, so no emissions to show.
    assert!(report.baseline.emissions_kg.is_none());
    assert!(chart_tag(&dom, "emissions").is_none());
    assert!(!dom.contains("Cost and emissions"));
}

/// A scenario with carbon intensity: the page shows each run's emissions
/// beside its cost, the same figures as the JSON report's `emissionsKg`,
/// and a chart of emissions over time with a line per run.
#[test]
fn the_html_report_shows_emissions_beside_cost_in_chromium() {
    let scenario = scenario("carbon_step.yaml");
    let report = simulate_with(&scenario, "carbon-aware", "carbon_aware");
    let baseline_kg = report.baseline.emissions_kg.expect("baseline emissions");
    let policy_kg = report.policies[0]
        .emissions_kg
        .expect("the policy's emissions");
    // The move to the cleaner grid at 24h is what the page must show.
    assert!(policy_kg < baseline_kg, "{policy_kg} against {baseline_kg}");

    let dom = rendered_dom(&report);
    assert!(
        dom.contains("data-rendered=\"5\""),
        "{}",
        &dom[..dom.len().min(2000)]
    );
    let table = dom
        .split("<table class=\"emissions\">")
        .nth(1)
        .and_then(|rest| rest.split("</table>").next())
        .unwrap_or_else(|| panic!("no emissions table:\n{}", &dom[..dom.len().min(4000)]));
    for run in std::iter::once(&report.baseline).chain(&report.policies) {
        let row = table
            .split(&format!("<tr data-run=\"{}\">", run.name))
            .nth(1)
            .and_then(|rest| rest.split("</tr>").next())
            .unwrap_or_else(|| panic!("no row for {}: {table}", run.name));
        let cost = format!("<td>{:.2}</td>", run.total_cost());
        let kg = format!("<td class=\"co2\">{:.1}</td>", run.emissions_kg.unwrap());
        assert!(
            row.contains(&cost) && row.contains(&kg),
            "{}: {row}",
            run.name
        );
    }
    let change = (policy_kg - baseline_kg) / baseline_kg * 100.0;
    assert!(
        table.contains(&format!("<td>{change:+.1}%</td>")),
        "{table}"
    );

    let chart = chart_tag(&dom, "emissions").expect("no emissions chart");
    assert!(
        chart.contains("data-series=\"2\""),
        "emissions lines missing: {chart}"
    );
    let series = report.baseline.emissions_per_hour.as_ref().unwrap();
    assert_eq!(series.len(), report.baseline.cost_per_hour.len());
    // 2 cores and 2 GiB on a grid of 600 gCO2/kWh, every hour alike.
    assert!(
        series
            .iter()
            .all(|kg| (kg - series[0]).abs() < 1e-12 && *kg > 0.0)
    );
}
