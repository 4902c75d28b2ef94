//! The hindsight optimum in `ferry simulate`'s report, against the real
//! compiled example policies (build them first:
//! `cargo build --release --target wasm32-wasip2 --manifest-path policies/Cargo.toml --target-dir policies/target`).

mod support;
use support::modules::module;

use std::path::{Path, PathBuf};

use ferry::simulate::{self, Report, Scenario};

/// Every example policy built in `policies/target`.
const EXAMPLES: [&str; 4] = [
    "cheapest_cluster",
    "spot_aware",
    "utilization_balancer",
    "noop",
];

fn run(scenario: &Scenario, modules: &[&str]) -> Report {
    let modules: Vec<(&str, Vec<u8>)> = modules.iter().map(|m| (*m, module(m))).collect();
    support::simulate::run_modules(scenario, &modules)
}

/// The scenario files of the test corpus and the examples that load (the
/// others are there to be refused).
fn corpus() -> Vec<(PathBuf, Scenario)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for dir in ["tests/data/simulate", "examples/simulate"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        paths.sort();
        for path in paths {
            if let Ok(scenario) = simulate::load(&path, None) {
                found.push((path, scenario));
            }
        }
    }
    found
}

#[test]
fn no_example_policy_beats_the_hindsight_optimum_on_any_scenario() {
    let corpus = corpus();
    let names: Vec<String> = corpus
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in [
        "price_step.yaml",
        "spike.yaml",
        "generated.yaml",
        "scenario.yaml",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not in {names:?}"
        );
    }
    let mut moved = 0;
    for (path, scenario) in &corpus {
        let report = run(scenario, &EXAMPLES);
        let best = report.optimal.saving;
        // Sums of many floats in another order: a relative tolerance.
        let slack = 1e-9 * report.baseline.total_cost().abs().max(1.0);
        for p in &report.policies {
            assert!(
                p.saving <= best + slack,
                "{}: {} saved {} > the optimum's {} ({:?})",
                path.display(),
                p.name,
                p.saving,
                best,
                report.optimal
            );
            if let Some(share) = p.share_of_optimal {
                assert!(
                    share <= 1.0 + 1e-9,
                    "{}: {} share {share}",
                    path.display(),
                    p.name
                );
            }
            moved += p.migrations;
        }
        assert!(
            best >= -slack,
            "{}: staying put is a schedule",
            path.display()
        );
    }
    // The check means something only if policies moved workloads.
    assert!(moved > 0);
}

#[test]
fn the_report_judges_each_policy_against_the_optimum() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/simulate/price_step.yaml");
    let report = run(&simulate::load(&path, None).unwrap(), &["cheapest_cluster"]);
    // By hand (tests/data/simulate/price_step.yaml): the best move starts at
    // 23h and lands as b's price halves at 24h: 48 h × 0.10 baseline = 4.8,
    // against 24 h × 0.10 + 24 h × 0.05 + 0.5 = 4.1: a saving of 0.7. The
    // policy decides at 24h and lands at 25h: 0.65, 0.65 / 0.7 of it.
    let o = &report.optimal;
    assert!((o.saving - 0.7).abs() < 1e-9, "{o:?}");
    assert_eq!(o.migrations, 1);
    assert!(o.exact);
    let share = report.policies[0].share_of_optimal.unwrap();
    assert!((share - 0.65 / 0.7).abs() < 1e-9, "{share}");

    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["optimal"]["migrations"], 1);
    assert_eq!(json["optimal"]["exact"], true);
    assert!((json["optimal"]["saving"].as_f64().unwrap() - 0.7).abs() < 1e-9);
    let share = json["policies"][0]["shareOfOptimal"].as_f64().unwrap();
    assert!((share - 0.65 / 0.7).abs() < 1e-9);

    let table = report.summary_table();
    let header = table.lines().next().unwrap();
    assert!(header.trim_end().ends_with("optimal"), "{table}");
    let row = |label: &str| {
        table
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row in\n{table}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // baseline, the policy, the optimum.
    assert_eq!(row("saving")[1..], ["0.00", "0.65", "0.70"]);
    assert_eq!(row("share of optimal")[3..], ["0.0%", "92.9%", "100.0%"]);

    let html = simulate::html::render(&report);
    assert!(html.contains("Hindsight optimum"), "{html}");
    assert!(html.contains("could have saved 0.70, in 1 migration(s)"));
    assert!(html.contains("<td>cheapest_cluster</td><td>0.65</td><td>92.9%</td>"));
}
