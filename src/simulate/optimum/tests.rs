//! The optimum on scenarios small enough to work out by hand.

use std::path::Path;

use super::*;
use crate::simulate::scenario::parse;

fn solve(yaml: &str) -> Optimum {
    let s = parse(yaml, "test.yaml", Path::new("."), None).unwrap();
    optimum(&s, &Grid::new(&s), s.steps)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// One workload (2 cores, 4 GiB) at 0.10/h on `a`; `b` costs the same
/// until 24h and half from then. A move costs 0.5 and takes `duration`.
fn price_step(duration: &str, extra: &str) -> String {
    format!(
        "duration: 48h\nstep: 1h\n{extra}\nmigration: {{duration: {duration}, cost: 0.5}}\n\
         clusters:\n\
         - {{name: a, allocatable: {{cpu: 100, memory: 400}}, prices: {{cpuCoreHour: 0.04, memoryGibHour: 0.005}}}}\n\
         - name: b\n  allocatable: {{cpu: 100, memory: 400}}\n  prices:\n\
         \x20   cpuCoreHour: {{steps: [{{at: 0h, value: 0.04}}, {{at: 24h, value: 0.02}}]}}\n\
         \x20   memoryGibHour: {{steps: [{{at: 0h, value: 0.005}}, {{at: 24h, value: 0.0025}}]}}\n\
         workloads:\n\
         - {{name: web, cluster: a, replicas: 2, requests: {{cpu: '1', memory: 2Gi}}}}\n"
    )
}

#[test]
fn a_price_step_is_met_by_one_move_that_lands_as_the_price_drops() {
    let o = solve(&price_step("1h", ""));
    // Baseline 48 h × 0.10 = 4.8. Best: move at 23h, on b from 24h: 24 h ×
    // 0.10 + 24 h × 0.05 + 0.5 = 4.1. Saving 0.7.
    assert_eq!(o.migrations, 1);
    assert!(close(o.run_cost, 3.6), "{}", o.run_cost);
    assert!(close(o.migration_cost, 0.5));
    assert!(close(o.saving, 0.7), "{}", o.saving);
    assert!(o.exact);
    assert_eq!(o.capacity_conflicts, 0);
}

#[test]
fn a_longer_move_keeps_paying_the_source_until_it_lands() {
    // Four hours in transit: the move must start at 20h to land at 24h; the
    // cost is the same as above. From 24h on b, saving 0.7 still.
    let o = solve(&price_step("4h", ""));
    assert_eq!(o.migrations, 1);
    assert!(close(o.saving, 0.7), "{}", o.saving);
    // A 30 h move lands at 30h at the earliest (started at 0h): on b for
    // 18 h at 0.05 instead of 0.10 saves 0.9, minus 0.5: 0.4.
    let o = solve(&price_step("30h", ""));
    assert!(close(o.saving, 0.4), "{}", o.saving);
    // A 46 h move lands at 46h: 2 h × 0.05 saved = 0.1 < 0.5, so no move.
    let o = solve(&price_step("46h", ""));
    assert_eq!(o.migrations, 0);
    assert!(close(o.saving, 0.0));
}

#[test]
fn a_pinned_workload_or_a_forbidden_target_saves_nothing() {
    let pinned =
        price_step("1h", "").replace("cluster: a, replicas", "cluster: a, pinned: true, replicas");
    let o = solve(&pinned);
    assert_eq!((o.migrations, o.saving), (0, 0.0));
    let o = solve(&price_step("1h", "targetClusters: [a]"));
    assert_eq!((o.migrations, o.saving), (0, 0.0));
}

/// One core of `web` costs 0.10/h at `a`, and at `b` 0 from 2h to 5h and
/// `outside` otherwise; six hours.
fn dip(duration: &str, cost: f64, outside: f64, interval: &str) -> String {
    format!(
        "duration: 6h\nstep: 1h\ninterval: {interval}\nmigration: {{duration: {duration}, cost: {cost}}}\n\
         clusters:\n\
         - {{name: a, allocatable: {{cpu: 10, memory: 10}}, prices: {{cpuCoreHour: 0.1, memoryGibHour: 0}}}}\n\
         - name: b\n  allocatable: {{cpu: 10, memory: 10}}\n  prices:\n\
         \x20   cpuCoreHour: {{steps: [{{at: 0h, value: {outside}}}, {{at: 2h, value: 0}}, {{at: 5h, value: {outside}}}]}}\n\
         \x20   memoryGibHour: 0\n\
         workloads:\n\
         - {{name: web, cluster: a, requests: {{cpu: '1', memory: 1Gi}}}}\n"
    )
}

#[test]
fn a_dip_is_worth_a_move_only_when_the_move_lands_in_time() {
    // Baseline 0.6. A 2 h move started at 0h lands at 2h: 0.2 at a, 0 for
    // three hours, 0.1 at 5h, plus 0.1: 0.4. Moving back cannot pay: it
    // would cost 0.1 to save nothing.
    let o = solve(&dip("2h", 0.1, 0.1, "1h"));
    assert_eq!(o.migrations, 1);
    assert!(close(o.saving, 0.2), "{}", o.saving);
    // A 4 h move lands at 4h: one free hour saves 0.1, the move costs 0.1:
    // not better than staying, so it stays.
    let o = solve(&dip("4h", 0.1, 0.1, "1h"));
    assert_eq!(o.migrations, 0);
    assert!(close(o.saving, 0.0));
}

#[test]
fn moves_start_only_at_policy_steps() {
    // b costs 0.2 outside the dip, a move 0.05. Every hour: move at 1h,
    // land at 2h, back at 4h to land at 5h: 0.2 + 0 + 0.1 + 0.1 = 0.4 of a
    // baseline 0.6.
    let o = solve(&dip("1h", 0.05, 0.2, "1h"));
    assert_eq!(o.migrations, 2);
    assert!(close(o.saving, 0.2), "{}", o.saving);
    // Every two hours (0h, 2h, 4h) one of the dip's hours is lost: at best
    // 0.3 at a, two free hours, back at 4h: 0.3 + 0.1 + 0.1 = 0.5.
    let o = solve(&dip("1h", 0.05, 0.2, "2h"));
    assert!(close(o.saving, 0.1), "{}", o.saving);
}

/// Two one-core workloads on `a` at 0.10/h; `b` costs 0.02/h and has
/// `room` cores. Twelve hours, free one-hour moves.
fn crowded(room: u32, on_a: u32) -> String {
    format!(
        "duration: 12h\nstep: 1h\nmigration: {{duration: 1h, cost: 0}}\n\
         clusters:\n\
         - {{name: a, allocatable: {{cpu: {on_a}, memory: 10}}, prices: {{cpuCoreHour: 0.1, memoryGibHour: 0}}}}\n\
         - {{name: b, allocatable: {{cpu: {room}, memory: 10}}, prices: {{cpuCoreHour: 0.02, memoryGibHour: 0}}}}\n\
         workloads:\n\
         - {{name: web, count: 2, cluster: a, requests: {{cpu: '1', memory: 1Gi}}}}\n"
    )
}

#[test]
fn capacity_that_binds_makes_the_value_an_upper_bound() {
    // Each moves at 0h and saves 0.08/h for 11 h: 0.88 each, 1.76 in all.
    let o = solve(&crowded(10, 10));
    assert_eq!(o.migrations, 2);
    assert!(close(o.saving, 1.76), "{}", o.saving);
    assert!(o.exact);
    // b holds one: both there is over capacity from 1h to 11h (11 steps).
    // The value is the same relaxation, and says so.
    let o = solve(&crowded(1, 10));
    assert!(close(o.saving, 1.76), "{}", o.saving);
    assert!(!o.exact);
    assert_eq!(o.capacity_conflicts, 11);
}

#[test]
fn an_overload_the_baseline_already_has_is_not_the_optimum_binding() {
    // a holds one core but runs two; b is no cheaper, so nothing moves and
    // a's overload is the scenario's own.
    let yaml = crowded(10, 1).replace("cpuCoreHour: 0.02", "cpuCoreHour: 0.1");
    let o = solve(&yaml);
    assert_eq!(o.migrations, 0);
    assert!(o.exact);
}

#[test]
fn five_hundred_workloads_over_a_month_of_ten_clusters_is_quick_to_solve() {
    let mut y = String::from(
        "duration: 30d\nstep: 5m\nmigration: {duration: 15m, cost: 0.01}\nclusters:\n",
    );
    for c in 0..10 {
        y.push_str(&format!(
            "- {{name: c{c}, allocatable: {{cpu: 400, memory: 1600}}, prices: {{cpuCoreHour: {{daily: {{base: {}, amplitude: 0.008, peakHour: {}}}}}, memoryGibHour: 0.004}}}}\n",
            0.03 + 0.002 * c as f64,
            (c * 5) % 24
        ));
    }
    y.push_str("workloads:\n");
    for c in 0..10 {
        y.push_str(&format!(
            "- {{name: app{c}, count: 50, cluster: c{c}, replicas: 2, requests: {{cpu: 500m, memory: 1Gi}}}}\n"
        ));
    }
    let o = solve(&y);
    // Not a timing assertion: the size is what the benchmark runs, and the
    // answer must move workloads to follow the daily cycle.
    assert!(o.migrations > 0 && o.saving > 0.0, "{o:?}");
}
