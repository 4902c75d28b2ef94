use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::*;
use crate::contract::{Cluster, Label, Snapshot, Workload};
use crate::policy::{Rejected, Rejection, validate};

const GIB: u64 = 1 << 30;

fn cluster(name: &str, cpu_price: f64, mem_price: f64, alloc_cores: u64) -> Cluster {
    Cluster {
        name: name.into(),
        region: "eu".into(),
        ready: true,
        allocatable: Resources {
            cpu_millis: alloc_cores * 1000,
            memory_bytes: alloc_cores * 4 * GIB,
        },
        requested: Resources::default(),
        cpu_core_hour_price: Some(cpu_price),
        memory_gib_hour_price: Some(mem_price),
        ..Cluster::default()
    }
}

fn workload(name: &str, cluster: &str) -> Workload {
    Workload {
        namespace: "shop".into(),
        name: name.into(),
        kind: "Deployment".into(),
        cluster: cluster.into(),
        replicas: 2,
        // 2 cores, 4 GiB: 0.10/h at a, 0.05/h at b.
        requests: Resources {
            cpu_millis: 2000,
            memory_bytes: 4 * GIB,
        },
        labels: vec![Label {
            key: "tier".into(),
            value: "web".into(),
        }],
        ..Workload::default()
    }
}

fn snapshot() -> Snapshot {
    Snapshot {
        timestamp_ms: 0,
        clusters: vec![
            cluster("a", 0.04, 0.005, 100),
            cluster("b", 0.02, 0.0025, 100),
        ],
        workloads: vec![workload("web", "a"), workload("api", "a")],
        thresholds: Thresholds::default(),
        parameters: "{}".into(),
    }
}

fn context() -> Context {
    Context::new(
        Thresholds::default(),
        Guardrails {
            max_in_flight: 10,
            migration_cost: 0.5,
            max_payback_hours: 24.0,
            savings_per_disruption: 0.0,
            max_moves_per_workload_per_day: 0,
        },
    )
}

fn decision(name: &str) -> Decision {
    Decision {
        namespace: "shop".into(),
        name: name.into(),
        from_cluster: "a".into(),
        to_cluster: "b".into(),
        hourly_savings: 0.05,
        reason: "cheaper".into(),
        ..Decision::default()
    }
}

/// [`check`] on a raw answer, the way the host hands one over: validated
/// first, its rejections after the host's own.
fn check_raw(
    snapshot: &Snapshot,
    decisions: Vec<Decision>,
    mut host_rejected: Vec<Rejected>,
    context: &Context,
) -> Verdict {
    let (valid, mut rejected) = validate(snapshot, decisions);
    host_rejected.append(&mut rejected);
    check(snapshot, valid, host_rejected, context)
}

fn run(snapshot: &Snapshot, decisions: &[&str], context: &Context) -> Verdict {
    check_raw(
        snapshot,
        decisions.iter().map(|n| decision(n)).collect(),
        Vec::new(),
        context,
    )
}

fn rules(verdict: &Verdict) -> Vec<&'static str> {
    verdict.refused.iter().map(|r| r.refusal.rule()).collect()
}

fn accepted(verdict: &Verdict) -> Vec<&str> {
    verdict.accepted.iter().map(|d| d.name.as_str()).collect()
}

#[test]
fn a_good_move_passes_every_rule() {
    let verdict = run(&snapshot(), &["web", "api"], &context());
    assert_eq!(accepted(&verdict), ["web", "api"]);
    assert!(verdict.refused.is_empty(), "{:?}", verdict.refused);
}

#[test]
fn invalid_decisions_are_refused_and_host_rejections_are_kept_first() {
    let host = Rejected {
        decision: decision("gone"),
        reason: Rejection::UnknownWorkload.to_string(),
        rule: Rejection::UnknownWorkload,
    };
    let mut wrong_source = decision("web");
    wrong_source.from_cluster = "b".into();
    let verdict = check_raw(
        &snapshot(),
        vec![wrong_source, decision("api"), decision("ghost")],
        vec![host],
        &context(),
    );
    assert_eq!(accepted(&verdict), ["api"]);
    let names: Vec<_> = verdict
        .refused
        .iter()
        .map(|r| r.decision.name.as_str())
        .collect();
    assert_eq!(names, ["gone", "web", "ghost"]);
    assert_eq!(rules(&verdict), ["invalid", "invalid", "invalid"]);
    assert_eq!(
        verdict.refused[1].refusal,
        Refusal::Invalid {
            check: Rejection::NotOnSourceCluster { actual: "a".into() }
        }
    );
}

fn selector(labels: &[(&str, &str)], expressions: &[(&str, &str, &[&str])]) -> LabelSelector {
    LabelSelector {
        match_labels: (!labels.is_empty()).then(|| {
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        }),
        match_expressions: (!expressions.is_empty()).then(|| {
            expressions
                .iter()
                .map(|(key, op, values)| LabelSelectorRequirement {
                    key: key.to_string(),
                    operator: op.to_string(),
                    values: (!values.is_empty())
                        .then(|| values.iter().map(|v| v.to_string()).collect()),
                })
                .collect()
        }),
    }
}

#[test]
fn the_selector_refuses_unselected_workloads_only() {
    // (selector, does it select a workload labelled tier=web?)
    let cases: Vec<(LabelSelector, bool)> = vec![
        (LabelSelector::default(), true),
        (selector(&[("tier", "web")], &[]), true),
        (selector(&[("tier", "db")], &[]), false),
        (selector(&[], &[("tier", "In", &["web", "api"])]), true),
        (selector(&[], &[("tier", "In", &["db"])]), false),
        (selector(&[], &[("tier", "NotIn", &["db"])]), true),
        (selector(&[], &[("tier", "NotIn", &["web"])]), false),
        (selector(&[], &[("tier", "Exists", &[])]), true),
        (selector(&[], &[("team", "Exists", &[])]), false),
        (selector(&[], &[("team", "DoesNotExist", &[])]), true),
        (selector(&[], &[("tier", "DoesNotExist", &[])]), false),
    ];
    for (sel, selects) in cases {
        let context = context().with_selector(sel.clone()).unwrap();
        let verdict = run(&snapshot(), &["web"], &context);
        if selects {
            assert_eq!(accepted(&verdict), ["web"], "{sel:?}");
        } else {
            assert_eq!(rules(&verdict), ["notSelected"], "{sel:?}");
        }
    }
}

#[test]
fn pinned_workloads_stay() {
    let mut context = context();
    context.pinned.insert(("shop".into(), "web".into()));
    let verdict = run(&snapshot(), &["web", "api"], &context);
    assert_eq!(accepted(&verdict), ["api"]);
    assert_eq!(rules(&verdict), ["pinned"]);

    let annotations = BTreeMap::from([(PINNED_ANNOTATION.to_owned(), "true".to_owned())]);
    assert!(is_pinned(&annotations));
    let annotations = BTreeMap::from([(PINNED_ANNOTATION.to_owned(), "false".to_owned())]);
    assert!(!is_pinned(&annotations));
}

#[test]
fn only_workloads_running_in_the_local_cluster_move() {
    // `web` moved from a to c earlier: a's snapshot shows it running in c.
    let mut snapshot = snapshot();
    snapshot.clusters.push(cluster("c", 0.01, 0.001, 100));
    snapshot.workloads[0].cluster = "c".into();
    let mut context = context();
    context.local_cluster = Some("a".into());
    let away = Decision {
        from_cluster: "c".into(),
        ..decision("web")
    };
    let verdict = check_raw(&snapshot, vec![away, decision("api")], Vec::new(), &context);
    assert_eq!(accepted(&verdict), ["api"]);
    assert_eq!(
        verdict.refused[0].refusal,
        Refusal::NotLocal {
            cluster: "c".into()
        }
    );
    assert_eq!(
        verdict.refused[0].refusal.to_string(),
        "workload runs in c (it moved there); only c can move it again"
    );

    // The simulator sets no local cluster: every cluster's workloads move.
    context.local_cluster = None;
    let away = Decision {
        from_cluster: "c".into(),
        to_cluster: "b".into(),
        ..decision("web")
    };
    let verdict = check_raw(&snapshot, vec![away], Vec::new(), &context);
    assert!(!rules(&verdict).contains(&"notLocal"), "{verdict:?}");
}

#[test]
fn workloads_already_moving_are_refused() {
    let mut context = context();
    context.moving.insert(("shop".into(), "api".into()));
    let verdict = run(&snapshot(), &["web", "api"], &context);
    assert_eq!(accepted(&verdict), ["web"]);
    assert_eq!(rules(&verdict), ["alreadyMoving"]);
}

#[test]
fn targets_outside_the_allowed_list_are_refused() {
    let mut context = context();
    context.allowed_targets = vec!["c".into()];
    assert_eq!(
        rules(&run(&snapshot(), &["web"], &context)),
        ["targetNotAllowed"]
    );
    context.allowed_targets = vec!["c".into(), "b".into()];
    assert_eq!(accepted(&run(&snapshot(), &["web"], &context)), ["web"]);
}

#[test]
fn cooldown_refuses_recent_moves_and_allows_at_the_boundary() {
    let mut snap = snapshot();
    snap.workloads[0].seconds_since_migration = Some(3599);
    snap.workloads[1].seconds_since_migration = Some(3600);
    let verdict = run(&snap, &["web", "api"], &context());
    assert_eq!(accepted(&verdict), ["api"]);
    assert_eq!(
        verdict.refused[0].refusal,
        Refusal::Cooldown {
            seconds_since_migration: 3599,
            cooldown_seconds: 3600
        }
    );
}

#[test]
fn min_hourly_savings_is_checked_against_the_computed_savings() {
    let mut context = context();
    context.thresholds.min_hourly_savings = 0.06;
    assert_eq!(
        rules(&run(&snapshot(), &["web"], &context)),
        ["belowMinHourlySavings"]
    );
    // Overstating the savings does not help: 0.05 is what the prices give.
    let mut inflated = decision("web");
    inflated.hourly_savings = 10.0;
    let verdict = check_raw(&snapshot(), vec![inflated], Vec::new(), &context);
    assert_eq!(rules(&verdict), ["belowMinHourlySavings"]);
    context.thresholds.min_hourly_savings = 0.05;
    assert_eq!(accepted(&run(&snapshot(), &["web"], &context)), ["web"]);
}

#[test]
fn min_savings_ratio_is_relative_to_the_current_cost() {
    let mut context = context();
    context.thresholds.min_savings_ratio = 0.51; // the move saves 50 %
    assert_eq!(
        rules(&run(&snapshot(), &["web"], &context)),
        ["belowMinSavingsRatio"]
    );
    context.thresholds.min_savings_ratio = 0.5;
    assert_eq!(accepted(&run(&snapshot(), &["web"], &context)), ["web"]);
}

#[test]
fn unknown_current_cost_falls_back_to_the_workload_cost_or_refuses() {
    let mut snap = snapshot();
    snap.clusters[0].cpu_core_hour_price = None;
    assert_eq!(
        rules(&run(&snap, &["web"], &context())),
        ["unknownCurrentCost"]
    );
    snap.workloads[0].hourly_cost = Some(0.1);
    assert_eq!(accepted(&run(&snap, &["web"], &context())), ["web"]);
    // Without a ratio threshold the cost is not needed.
    let mut context = context();
    context.thresholds.min_savings_ratio = 0.0;
    snap.workloads[0].hourly_cost = None;
    assert_eq!(accepted(&run(&snap, &["web"], &context)), ["web"]);
}

#[test]
fn payback_longer_than_the_limit_is_refused() {
    let mut context = context();
    context.guardrails.migration_cost = 1.25; // 25 h at 0.05/h
    assert_eq!(
        rules(&run(&snapshot(), &["web"], &context)),
        ["paybackTooLong"]
    );
    context.guardrails.migration_cost = 1.2; // 24 h
    assert_eq!(accepted(&run(&snapshot(), &["web"], &context)), ["web"]);
}

#[test]
fn target_capacity_counts_earlier_accepted_moves_and_incoming_ones() {
    let mut snap = snapshot();
    // b: 10 cores; 5 requested; each move adds 2: 70 % then 90 % > 80 %.
    snap.clusters[1].allocatable.cpu_millis = 10_000;
    snap.clusters[1].requested.cpu_millis = 5_000;
    let verdict = run(&snap, &["web", "api"], &context());
    assert_eq!(accepted(&verdict), ["web"]);
    assert_eq!(rules(&verdict), ["targetOverCapacity"]);
    match &verdict.refused[0].refusal {
        Refusal::TargetOverCapacity {
            cpu_utilization, ..
        } => assert!((cpu_utilization - 0.9).abs() < 1e-9),
        other => panic!("{other:?}"),
    }

    let mut context = context();
    context.incoming.insert(
        "b".into(),
        Resources {
            cpu_millis: 2000,
            memory_bytes: 0,
        },
    );
    assert_eq!(
        rules(&run(&snap, &["web"], &context)),
        ["targetOverCapacity"]
    );
}

#[test]
fn accepted_moves_are_capped_per_cycle() {
    let mut context = context();
    context.thresholds.max_migrations_per_cycle = 1;
    let verdict = run(&snapshot(), &["web", "api"], &context);
    assert_eq!(accepted(&verdict), ["web"]);
    assert_eq!(rules(&verdict), ["overCycleLimit"]);
}

#[test]
fn in_flight_plus_accepted_never_exceeds_max_in_flight() {
    let mut context = context();
    context.in_flight = 9;
    let verdict = run(&snapshot(), &["web", "api"], &context);
    assert_eq!(accepted(&verdict), ["web"]);
    assert_eq!(
        verdict.refused[0].refusal,
        Refusal::OverInFlightLimit {
            in_flight: 10,
            limit: 10
        }
    );
    context.in_flight = 10;
    assert_eq!(
        rules(&run(&snapshot(), &["web"], &context)),
        ["overInFlightLimit"]
    );
}

#[test]
fn refused_decisions_use_up_no_slot() {
    let mut context = context();
    context.in_flight = 9;
    context.thresholds.max_migrations_per_cycle = 1;
    context.pinned.insert(("shop".into(), "web".into()));
    let verdict = run(&snapshot(), &["web", "api"], &context);
    assert_eq!(accepted(&verdict), ["api"]);
    assert_eq!(rules(&verdict), ["pinned"]);
}

#[test]
fn refusals_serialise_with_their_rule_and_a_message() {
    let mut context = context();
    context.guardrails.migration_cost = 10.0;
    let verdict = run(&snapshot(), &["web"], &context);
    let json = serde_json::to_value(&verdict.refused[0]).unwrap();
    assert_eq!(json["refusal"]["rule"], "paybackTooLong");
    assert_eq!(json["refusal"]["maxPaybackHours"], 24.0);
    assert_eq!(
        json["message"],
        "pays back its cost (10) in 200.0h, more than maxPaybackHours (24)"
    );
}

#[test]
fn context_for_a_policy_takes_selector_and_targets() {
    let spec: crate::crd::MigrationPolicySpec = serde_json::from_value(serde_json::json!({
        "module": {"url": "https://p.example/x.wasm", "sha256": "a".repeat(64)},
        "selector": {"matchLabels": {"tier": "db"}},
        "targetClusters": ["b"],
    }))
    .unwrap();
    let policy = crate::crd::validate_policy(&spec).unwrap();
    let context = Context::for_policy(&policy).unwrap();
    assert_eq!(context.allowed_targets, ["b"]);
    assert_eq!(
        rules(&run(&snapshot(), &["web"], &context)),
        ["notSelected"]
    );
}

fn recent(context: &mut Context, name: &str, moves: u32) {
    context
        .recent_moves
        .insert(("shop".to_owned(), name.to_owned()), moves);
}

#[test]
fn savings_per_disruption_weighs_a_day_of_savings_against_the_move_and_recent_moves() {
    // web saves 0.05/h, 1.2 a day; a move costs 0.5.
    let mut context = context();
    context.guardrails.savings_per_disruption = 2.0;
    // No recent move: 1.2 >= 2 × 0.5.
    assert_eq!(accepted(&run(&snapshot(), &["web"], &context)), ["web"]);
    // One move in the last day doubles the disruption: 1.2 < 2 × 1.0.
    recent(&mut context, "web", 1);
    let verdict = run(&snapshot(), &["web", "api"], &context);
    assert_eq!(accepted(&verdict), ["api"]);
    let Refusal::BelowSavingsPerDisruption {
        hourly_savings,
        disruption_cost,
        recent_moves,
        savings_per_disruption,
    } = verdict.refused[0].refusal
    else {
        panic!("{:?}", verdict.refused);
    };
    assert!((hourly_savings - 0.05).abs() < 1e-12);
    assert!((disruption_cost - 1.0).abs() < 1e-12);
    assert_eq!((recent_moves, savings_per_disruption), (1, 2.0));
    assert_eq!(rules(&verdict), ["belowSavingsPerDisruption"]);
    assert!(
        verdict.refused[0]
            .message
            .contains("1 moves in the last 24h"),
        "{}",
        verdict.refused[0].message
    );
    // Overstating the savings does not clear it: the prices say 0.05/h.
    let mut inflated = decision("web");
    inflated.hourly_savings = 10.0;
    let verdict = check_raw(&snapshot(), vec![inflated], Vec::new(), &context);
    assert_eq!(rules(&verdict), ["belowSavingsPerDisruption"]);
    // 0 turns the rule off, whatever the history.
    context.guardrails.savings_per_disruption = 0.0;
    recent(&mut context, "web", 50);
    assert_eq!(accepted(&run(&snapshot(), &["web"], &context)), ["web"]);
}

#[test]
fn a_free_move_has_no_disruption_cost_to_weigh() {
    let mut context = context();
    context.guardrails.migration_cost = 0.0;
    context.guardrails.savings_per_disruption = 100.0;
    recent(&mut context, "web", 3);
    assert_eq!(accepted(&run(&snapshot(), &["web"], &context)), ["web"]);
}

#[test]
fn the_daily_budget_counts_each_workloads_moves_of_the_last_day() {
    let mut context = context();
    context.guardrails.max_moves_per_workload_per_day = 2;
    recent(&mut context, "web", 2);
    recent(&mut context, "api", 1);
    let verdict = run(&snapshot(), &["web", "api"], &context);
    assert_eq!(accepted(&verdict), ["api"]);
    assert_eq!(
        verdict.refused[0].refusal,
        Refusal::OverDailyMoveLimit {
            recent_moves: 2,
            limit: 2
        }
    );
    assert_eq!(rules(&verdict), ["overDailyMoveLimit"]);
    // 0 means no limit.
    context.guardrails.max_moves_per_workload_per_day = 0;
    recent(&mut context, "web", u32::MAX);
    assert_eq!(
        accepted(&run(&snapshot(), &["web", "api"], &context)),
        ["web", "api"]
    );
}

#[test]
fn a_move_refused_by_the_daily_budget_takes_no_in_flight_slot() {
    // One slot left in flight; web is over its budget, api takes the slot.
    let mut context = context();
    context.guardrails.max_in_flight = 1;
    context.guardrails.max_moves_per_workload_per_day = 1;
    recent(&mut context, "web", 1);
    let verdict = run(&snapshot(), &["web", "api"], &context);
    assert_eq!(accepted(&verdict), ["api"]);
    assert_eq!(rules(&verdict), ["overDailyMoveLimit"]);
}
