//! `ferry simulate` on scenarios with a known right answer, with the real
//! compiled policy modules (build them first:
//! `cargo build --release --target wasm32-wasip2 --manifest-path policies/Cargo.toml --target-dir policies/target`).

mod support;
use support::modules::module;

use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicBool, AtomicU64};

use ferry::policy::{Engine, EngineConfig, Limits};
use ferry::simulate::{self, Control, NamedPolicy, Outcome, Report, Scenario};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/simulate")
        .join(name)
}

fn run(scenario: &Scenario, modules: &[&str]) -> Report {
    let modules: Vec<(&str, Vec<u8>)> =
        modules.iter().map(|m| (*m, module_or_fixture(m))).collect();
    support::simulate::run_modules(scenario, &modules)
}

/// An example policy by name, or a `.wasm` file of `tests/data/policies`.
fn module_or_fixture(name: &str) -> Vec<u8> {
    if name.ends_with(".wasm") {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/policies")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    } else {
        module(name)
    }
}

fn load(name: &str) -> Scenario {
    simulate::load(&data(name), None).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn a_price_step_causes_exactly_one_migration_at_the_step_saving_what_it_should() {
    let report = run(&load("price_step.yaml"), &["cheapest_cluster"]);
    let p = &report.policies[0];
    assert_eq!(p.migrations, 1, "{:#?}", p.events);
    let e = &p.events[0];
    assert_eq!((e.step, e.from.as_str(), e.to.as_str()), (24, "a", "b"));
    assert_eq!(e.outcome, Outcome::Completed);
    // By hand: 2 cores + 4 GiB = 0.10/h at a, 0.05/h at b from 24h.
    // Baseline: 48 h × 0.10 = 4.8. Policy: on a for steps 0–24 (the move
    // takes 1 h and counts on its source) = 2.5, on b for 25–47 = 23 × 0.05
    // = 1.15, plus the migration's 0.5: 4.15. Saving 0.65.
    assert!(
        close(report.baseline.total_cost(), 4.8),
        "{}",
        report.baseline.total_cost()
    );
    assert!(close(p.run_cost, 3.65), "{}", p.run_cost);
    assert!(close(p.migration_cost, 0.5));
    assert!(close(p.saving, 0.65), "{}", p.saving);
    assert!(close(p.migrating_hours, 1.0));
    assert_eq!(p.back_and_forth, 0);
    assert_eq!(p.capacity_breaches, 0);
    assert!(p.errors.is_empty(), "{:?}", p.errors);
}

#[test]
fn a_spike_does_not_cause_back_and_forth_under_the_cooldown() {
    let report = run(&load("spike.yaml"), &["cheapest_cluster"]);
    let p = &report.policies[0];
    assert_eq!(p.migrations, 1, "{:#?}", p.events);
    assert_eq!((p.events[0].step, p.events[0].to.as_str()), (10, "b"));
    assert_eq!(p.back_and_forth, 0);

    // The same scenario with a short cooldown does flap: the check above
    // would see it.
    let text = std::fs::read_to_string(data("spike.yaml"))
        .unwrap()
        .replace("cooldown: 24h", "cooldown: 1h");
    let short = simulate::parse(&text, "spike.yaml", &data(""), None).unwrap();
    let p = &run(&short, &["cheapest_cluster"]).policies[0];
    assert_eq!(p.migrations, 2, "{:#?}", p.events);
    assert_eq!(p.back_and_forth, 1);
}

#[test]
fn a_full_target_receives_no_move() {
    let report = run(&load("full_target.yaml"), &["cheapest_cluster"]);
    let p = &report.policies[0];
    assert_eq!(p.migrations, 1, "{:#?}", p.events);
    assert_eq!(
        (p.events[0].name.as_str(), p.events[0].to.as_str()),
        ("web", "c")
    );
    assert!(p.events.iter().all(|e| e.to != "b"));
    assert_eq!(p.capacity_breaches, 0);
}

#[test]
fn the_guardrails_refuse_a_policy_that_insists_on_the_full_target() {
    // testbed in `return` mode proposes web a→b at every step.
    let text = std::fs::read_to_string(data("full_target.yaml")).unwrap()
        + "parameters:\n  mode: return\n  decisions:\n    - {namespace: default, name: web, fromCluster: a, toCluster: b, hourlySavings: 0.12}\n";
    let scenario = simulate::parse(&text, "full_target.yaml", &data(""), None).unwrap();
    let report = run(&scenario, &["testbed"]);
    let p = &report.policies[0];
    assert_eq!(p.migrations, 0, "{:#?}", p.events);
    assert_eq!(
        p.refusals.get("targetOverCapacity"),
        Some(&12),
        "{:?}",
        p.refusals
    );
    assert!(close(p.saving, 0.0));
}

#[test]
fn policy_errors_are_counted_by_class_and_the_run_goes_on() {
    let text =
        std::fs::read_to_string(data("price_step.yaml")).unwrap() + "parameters: {mode: error}\n";
    let scenario = simulate::parse(&text, "price_step.yaml", &data(""), None).unwrap();
    let report = run(&scenario, &["testbed", "cheapest_cluster"]);
    assert_eq!(report.policies[0].errors.get("PolicyError"), Some(&48));
    assert_eq!(report.policies[0].migrations, 0);
    assert_eq!(report.policies[0].steps_simulated, 48);
    assert_eq!(report.policies[1].migrations, 1);
}

#[test]
fn the_same_scenario_and_seed_give_byte_identical_json() {
    let a = run(&load("generated.yaml"), &["cheapest_cluster", "spot_aware"]).to_json();
    let b = run(&load("generated.yaml"), &["cheapest_cluster", "spot_aware"]).to_json();
    assert_eq!(a, b);
    let report: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert!(
        report["policies"][0]["migrations"].as_u64().unwrap() > 0,
        "{a}"
    );
    // Another seed draws other spikes and failures.
    let other = simulate::load(&data("generated.yaml"), Some(8)).unwrap();
    assert_ne!(
        run(&other, &["cheapest_cluster", "spot_aware"]).to_json(),
        a
    );
}

#[test]
fn a_stopped_run_reports_what_was_simulated() {
    let scenario = load("price_step.yaml");
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let policy = engine.load("c", &module("cheapest_cluster"), None).unwrap();
    let (stop, progress) = (AtomicBool::new(true), AtomicU64::new(0));
    let report = simulate::simulate(
        &scenario,
        &engine,
        &[NamedPolicy {
            name: "c".into(),
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
    assert!(!report.complete);
    assert_eq!(report.steps_simulated, 0);
    assert!(
        report
            .summary_table()
            .contains("stopped after 0 of 48 steps")
    );
}

/// (file, line, field) of the value at fault.
#[test]
fn malformed_scenarios_name_the_line_and_field_at_fault() {
    let cases = [
        (
            "negative_price.yaml",
            11,
            Some("clusters[1].prices.cpuCoreHour"),
        ),
        (
            "negative_step.yaml",
            11,
            Some("clusters[0].prices.cpuCoreHour.steps[1].value"),
        ),
        (
            "negative_carbon.yaml",
            11,
            Some("clusters[0].carbonIntensity.steps[1].value"),
        ),
        (
            "bad_threshold.yaml",
            5,
            Some("thresholds.minSavingsPercent"),
        ),
        (
            "bad_disruption.yaml",
            6,
            Some("thresholds.savingsPerDisruption"),
        ),
        // The unknown key's own line, not the first key of its map.
        ("unknown_field.yaml", 8, None),
    ];
    for (file, line, field) in cases {
        let err = simulate::load(&data(file), None).expect_err(file);
        let text = err.to_string();
        assert_eq!(err.field(), field, "{file}: {text}");
        if let Some(field) = field {
            assert_eq!(err.line(), Some(line), "{file}: {text}");
            assert!(text.contains(&format!(":{line}:")), "{file}: {text}");
            assert!(text.contains(field), "{file}: {text}");
        } else {
            assert!(text.contains("price"), "{file}: {text}");
            assert_eq!(err.line(), Some(line), "{file}: {text}");
            assert!(text.contains(&format!("{file}:{line}:")), "{file}: {text}");
        }
    }
}

/// The most moves any workload started within a span of `window` steps.
fn most_moves_within(report: &Report, window: usize) -> usize {
    let mut starts: std::collections::BTreeMap<(&str, &str), Vec<usize>> = Default::default();
    for e in &report.policies[0].events {
        starts
            .entry((e.namespace.as_str(), e.name.as_str()))
            .or_default()
            .push(e.step);
    }
    starts
        .values()
        .map(|steps| {
            (0..steps.len())
                .map(|i| {
                    steps[i..]
                        .iter()
                        .take_while(|&&s| s - steps[i] < window)
                        .count()
                })
                .max()
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn the_daily_budget_holds_each_workload_to_its_moves_per_day() {
    // Without the cooldown, the daily price cycle moves workloads back and
    // forth within a day.
    let mut scenario = load("generated.yaml");
    scenario.thresholds.cooldown_seconds = 0;
    let day = (86_400_000 / scenario.step_ms) as usize;
    let free = run(&scenario, &["cheapest_cluster"]);
    assert!(most_moves_within(&free, day) > 1);

    scenario.guardrails.max_moves_per_workload_per_day = 1;
    let report = run(&scenario, &["cheapest_cluster"]);
    let p = &report.policies[0];
    assert!(p.migrations > 0);
    assert_eq!(most_moves_within(&report, day), 1, "{:#?}", p.events);
    assert!(
        p.refusals.get("overDailyMoveLimit").is_some_and(|&n| n > 0),
        "{:?}",
        p.refusals
    );
}

#[test]
fn savings_per_disruption_thins_out_repeated_moves() {
    // The contract v1 build of cheapest-cluster sees no move history, so
    // it follows every price swing: the guardrail alone must thin it out.
    const RESTLESS: &str = "cheapest-cluster-contract-v1.wasm";
    let mut scenario = load("generated.yaml");
    scenario.thresholds.cooldown_seconds = 0;
    let free = run(&scenario, &[RESTLESS]);
    scenario.guardrails.savings_per_disruption = 1.0;
    let report = run(&scenario, &[RESTLESS]);
    let p = &report.policies[0];
    assert!(
        p.refusals
            .get("belowSavingsPerDisruption")
            .is_some_and(|&n| n > 0),
        "{:?}",
        p.refusals
    );
    assert!(p.migrations < free.policies[0].migrations);
}

#[test]
fn moves_in_flight_stay_within_the_limit_across_the_whole_fleet() {
    let mut scenario = load("generated.yaml");
    scenario.thresholds.cooldown_seconds = 0;
    scenario.migration.duration_steps = 8;
    scenario.guardrails.max_in_flight = 2;
    let report = run(&scenario, &["cheapest_cluster"]);
    let p = &report.policies[0];
    // Every move, to and from any cluster, is in flight from its start until
    // `duration` later.
    let d = scenario.migration.duration_steps;
    let busiest = (0..scenario.steps)
        .map(|t| {
            p.events
                .iter()
                .filter(|e| e.step <= t && t < e.step + d)
                .count()
        })
        .max()
        .unwrap_or(0);
    assert_eq!(busiest, 2, "{:#?}", p.events);
    assert!(
        p.refusals.get("overInFlightLimit").is_some_and(|&n| n > 0),
        "{:?}",
        p.refusals
    );
}

/// A scenario with carbon series: the report states each run's emissions,
/// the carbon-aware policy (contract v2) cuts them, and its migration event
/// carries the policy's structured reasons.
#[test]
fn carbon_series_give_emissions_and_a_carbon_aware_move_cuts_them() {
    let report = run(&load("carbon_step.yaml"), &["carbon_aware", "noop"]);
    // 2 cores and 4 GiB draw 2 × 4 W + 4 × 0.4 W = 9.6 W; at 600 g/kWh
    // for 48 h that is 276.48 g.
    let baseline = report.baseline.emissions_kg.expect("baseline emissions");
    assert!(close(baseline, 0.27648), "{baseline}");
    let noop = &report.policies[1];
    assert!(close(noop.emissions_kg.unwrap(), baseline));
    let carbon = &report.policies[0];
    assert_eq!(carbon.migrations, 1, "{:#?}", carbon.events);
    let kg = carbon.emissions_kg.unwrap();
    assert!(kg < baseline * 0.7, "{kg} kg against {baseline} kg");
    let event = &carbon.events[0];
    assert_eq!((event.from.as_str(), event.to.as_str()), ("a", "b"));
    let reasons = event.reasons.as_ref().expect("structured reasons");
    assert!(
        reasons.detail.contains("600 -> 100 gCO2/kWh"),
        "{reasons:?}"
    );
    // The JSON report carries both.
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["policies"][0]["emissionsKg"].is_number(), "{json}");
    assert!(json["policies"][0]["events"][0]["reasons"]["detail"].is_string());
}

/// Without carbon series the report has no emissions at all, not zero.
#[test]
fn a_scenario_without_carbon_series_reports_no_emissions() {
    let report = run(&load("price_step.yaml"), &["cheapest_cluster"]);
    assert_eq!(report.baseline.emissions_kg, None);
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["baseline"].get("emissionsKg").is_none(), "{json}");
}
