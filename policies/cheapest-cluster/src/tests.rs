use ferry_policy_sdk::Maybe;
use ferry_policy_sdk::testing::{GIB, cluster, snapshot, workload};

use super::decide;

#[test]
fn moves_to_the_cheapest_ready_cluster() {
    let s = snapshot(
        vec![
            cluster("a", 0.05, 0.006),
            cluster("b", 0.03, 0.004),
            cluster("c", 0.02, 0.003),
        ],
        vec![workload("web", "a", 4000, 8)],
    );
    let decisions = decide(&s).unwrap();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].to_cluster, "c");
    // 4 cores and 8 GiB: 0.2 + 0.048 at a, 0.08 + 0.024 at c.
    assert!((decisions[0].hourly_savings - (0.248 - 0.104)).abs() < 1e-9);
}

#[test]
fn skips_unready_and_unpriced_clusters() {
    let mut down = cluster("c", 0.01, 0.001);
    down.ready = false;
    let mut unpriced = cluster("d", 0.01, 0.001);
    unpriced.memory_gib_hour_price = Maybe::None;
    let s = snapshot(
        vec![
            cluster("a", 0.05, 0.006),
            cluster("b", 0.03, 0.004),
            down,
            unpriced,
        ],
        vec![workload("web", "a", 4000, 8)],
    );
    assert_eq!(decide(&s).unwrap()[0].to_cluster, "b");
}

#[test]
fn no_move_below_either_savings_threshold() {
    let mut s = snapshot(
        vec![cluster("a", 0.05, 0.006), cluster("b", 0.045, 0.006)],
        vec![workload("web", "a", 1000, 1)],
    );
    s.thresholds.min_savings_ratio = 0.2;
    assert!(decide(&s).unwrap().is_empty());
    s.thresholds.min_savings_ratio = 0.0;
    s.thresholds.min_hourly_savings = 1.0;
    assert!(decide(&s).unwrap().is_empty());
    s.thresholds.min_hourly_savings = 0.0;
    assert_eq!(decide(&s).unwrap().len(), 1);
}

#[test]
fn respects_target_capacity_across_moves() {
    let mut small = cluster("b", 0.01, 0.001);
    small.allocatable.cpu_millis = 10_000;
    small.allocatable.memory_bytes = 100 * GIB;
    // Each workload takes 40 % of b's CPU; the limit of 80 % admits two.
    let s = snapshot(
        vec![cluster("a", 0.05, 0.006), small],
        vec![
            workload("w1", "a", 4000, 1),
            workload("w2", "a", 4000, 1),
            workload("w3", "a", 4000, 1),
        ],
    );
    let decisions = decide(&s).unwrap();
    assert_eq!(decisions.len(), 2);
}

#[test]
fn cooldown_and_cycle_cap_hold() {
    let mut cooling = workload("w1", "a", 4000, 8);
    cooling.seconds_since_migration = Maybe::Some(60);
    let mut s = snapshot(
        vec![cluster("a", 0.05, 0.006), cluster("b", 0.01, 0.001)],
        vec![
            cooling,
            workload("w2", "a", 1000, 1),
            workload("w3", "a", 2000, 1),
        ],
    );
    s.thresholds.cooldown_seconds = 3600;
    s.thresholds.max_migrations_per_cycle = 1;
    let decisions = decide(&s).unwrap();
    assert_eq!(decisions.len(), 1);
    // The biggest saving that is not cooling down goes first.
    assert_eq!(decisions[0].name, "w3");
}

#[test]
fn states_its_reasons_and_the_payback_of_the_disruption() {
    let mut web = workload("web", "a", 4000, 8);
    web.disruption_cost = Maybe::Some(0.288);
    let s = snapshot(
        vec![cluster("a", 0.05, 0.006), cluster("c", 0.02, 0.003)],
        vec![web],
    );
    let decisions = decide(&s).unwrap();
    let Maybe::Some(reasons) = &decisions[0].reasons else {
        panic!("no reasons: {decisions:?}");
    };
    assert!((reasons.source_hourly_cost - 0.248).abs() < 1e-9);
    assert!((reasons.target_hourly_cost - 0.104).abs() < 1e-9);
    assert!((reasons.hourly_savings - 0.144).abs() < 1e-9);
    // 0.288 to move, 0.144 an hour saved.
    assert!((reasons.payback_hours.get().unwrap() - 2.0).abs() < 1e-9);
}

/// Two moves in a day are a round trip: the workload stays, though its
/// cooldown has passed and the saving is there.
#[test]
fn a_workload_that_moved_back_and_forth_today_stays() {
    let mut bounced = workload("bounced", "a", 4000, 8);
    bounced.moves_last_day = 2;
    let mut moved_once = workload("moved-once", "a", 4000, 8);
    moved_once.moves_last_day = 1;
    let s = snapshot(
        vec![cluster("a", 0.05, 0.006), cluster("c", 0.02, 0.003)],
        vec![bounced, moved_once],
    );
    let names: Vec<String> = decide(&s)
        .unwrap()
        .iter()
        .map(|d| d.name.to_string())
        .collect();
    assert_eq!(names, ["moved-once"]);
}
