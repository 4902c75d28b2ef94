//! One host serves both policy contracts: a contract v1 module
//! (`ferry:policy@0.1.0`: the cheapest-cluster example as the v1 SDK built
//! it, kept in `tests/data/policies`) and contract v2 modules
//! (`ferry:policy@2.0.0`: the examples as `scripts/build-policies` builds
//! them), loaded into the same engine and evaluated side by side.

mod support;
use support::modules::module;

use std::time::Duration;

use ferry::contract::{Cluster, Resources, Snapshot, Strategy, Thresholds, Workload};
use ferry::policy::{Contract, Engine, EngineConfig, Limits, Rejection};

const GIB: u64 = 1 << 30;

/// The cheapest-cluster example built for contract v1.
fn cheapest_v1() -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/policies/cheapest-cluster-contract-v1.wasm");
    std::fs::read(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}
const NOW_MS: u64 = 1_767_225_600_000;

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(300),
        ..Limits::default()
    }
}

fn cluster(name: &str, core_hour: f64, carbon: Option<f64>) -> Cluster {
    Cluster {
        name: name.to_owned(),
        region: "eu-west-1".to_owned(),
        ready: true,
        allocatable: Resources {
            cpu_millis: 64_000,
            memory_bytes: 256 * GIB,
        },
        requested: Resources {
            cpu_millis: 8_000,
            memory_bytes: 32 * GIB,
        },
        cpu_utilization: Some(0.125),
        memory_utilization: Some(0.125),
        cpu_core_hour_price: Some(core_hour),
        memory_gib_hour_price: Some(0.005),
        carbon_intensity: carbon,
        ..Cluster::default()
    }
}

fn workload(name: &str, replicas: u32) -> Workload {
    Workload {
        namespace: "shop".to_owned(),
        name: name.to_owned(),
        kind: "Deployment".to_owned(),
        cluster: "coal".to_owned(),
        replicas,
        requests: Resources {
            cpu_millis: 1_000 * u64::from(replicas),
            memory_bytes: 2 * GIB * u64::from(replicas),
        },
        ..Workload::default()
    }
}

/// `coal` is dear and dirty, `wind` cheaper and clean, `hydro` cheapest
/// but with no carbon data.
fn snapshot(workloads: Vec<Workload>) -> Snapshot {
    Snapshot {
        timestamp_ms: NOW_MS,
        clusters: vec![
            cluster("coal", 0.05, Some(800.0)),
            cluster("wind", 0.04, Some(40.0)),
            cluster("hydro", 0.02, None),
        ],
        workloads,
        thresholds: Thresholds {
            max_migrations_per_cycle: 10,
            ..Thresholds::default()
        },
        parameters: "{}".to_owned(),
    }
}

#[test]
fn one_host_serves_a_v1_and_a_v2_module_side_by_side() {
    let engine = Engine::new(EngineConfig::default()).expect("engine starts");
    let v1 = engine
        .load("cheapest-v1", &cheapest_v1(), None)
        .expect("the v1 module loads");
    let cheapest_v2 = engine
        .load("cheapest-v2", &module("cheapest_cluster"), None)
        .expect("the v2 build of the same example loads");
    assert_eq!(cheapest_v2.contract(), Contract::V2);
    let v2 = engine
        .load("carbon", &module("carbon_aware"), None)
        .expect("the v2 module loads");
    assert_eq!(v1.contract(), Contract::V1);
    assert_eq!(v2.contract(), Contract::V2);
    assert_eq!(
        engine.inspect(&module("carbon_aware")).unwrap().contract,
        Contract::V2
    );

    let mut fresh = workload("web", 3);
    fresh.disruption_cost = Some(0.5);
    let input = snapshot(vec![fresh, workload("api", 1)]);

    // In turn, twice, on the same engine: neither contract disturbs the other.
    for _ in 0..2 {
        let cheapest = engine.evaluate_blocking(&v1, &input, &limits()).unwrap();
        assert!(cheapest.rejected.is_empty(), "{:?}", cheapest.rejected);
        assert_eq!(cheapest.decisions.len(), 2);
        for d in &cheapest.decisions {
            // The v1 module sees prices, not carbon: the cheapest cluster.
            assert_eq!(
                (d.from_cluster.as_str(), d.to_cluster.as_str()),
                ("coal", "hydro")
            );
            // A v1 decision maps to v2 with none of v2's additions.
            assert_eq!((d.replicas, d.strategy, &d.reasons), (None, None, &None));
        }
        // The same logic built for v2 decides the same, and says why.
        let again = engine
            .evaluate_blocking(&cheapest_v2, &input, &limits())
            .unwrap();
        assert_eq!(again.decisions.len(), 2);
        for (v1, v2) in cheapest.decisions.iter().zip(&again.decisions) {
            assert_eq!((&v1.name, &v1.to_cluster), (&v2.name, &v2.to_cluster));
            assert_eq!(v1.hourly_savings, v2.hourly_savings);
            let reasons = v2.reasons.as_ref().expect("v2 states its reasons");
            assert_eq!(reasons.hourly_savings, v2.hourly_savings);
        }

        let carbon = engine.evaluate_blocking(&v2, &input, &limits()).unwrap();
        assert!(carbon.rejected.is_empty(), "{:?}", carbon.rejected);
        let by_name = |name: &str| {
            carbon
                .decisions
                .iter()
                .find(|d| d.name == name)
                .unwrap_or_else(|| panic!("no decision for {name}: {:?}", carbon.decisions))
        };
        let web = by_name("web");
        assert_eq!(web.to_cluster, "wind", "{web:?}");
        assert_eq!(web.strategy, Some(Strategy::Progressive));
        let reasons = web.reasons.as_ref().expect("structured reasons");
        // 3 cores and 6 GiB: 0.15 + 0.03 at coal, 0.12 + 0.03 at wind.
        assert!(
            (reasons.source_hourly_cost - 0.18).abs() < 1e-9,
            "{reasons:?}"
        );
        assert!(
            (reasons.target_hourly_cost - 0.15).abs() < 1e-9,
            "{reasons:?}"
        );
        assert!((reasons.hourly_savings - 0.03).abs() < 1e-9, "{reasons:?}");
        // The disruption cost reached the guest: 0.5 / 0.03 per hour.
        let payback = reasons.payback_hours.expect("a payback");
        assert!((payback - 0.5 / 0.03).abs() < 1e-6, "{reasons:?}");
        // So did both clusters' carbon intensity.
        assert!(reasons.detail.contains("800 -> 40 gCO2/kWh"), "{reasons:?}");
        let api = by_name("api");
        assert_eq!(api.strategy, Some(Strategy::AllAtOnce));
        assert_eq!(api.reasons.as_ref().unwrap().payback_hours, None);
    }
}

#[test]
fn a_v2_module_sees_the_move_history() {
    let engine = Engine::new(EngineConfig::default()).expect("engine starts");
    let v2 = engine
        .load("carbon", &module("carbon_aware"), None)
        .unwrap();
    let mut moved_today = workload("moved-today", 1);
    moved_today.moves_last_day = 1;
    moved_today.moves_last_week = 1;
    let mut just_arrived = workload("just-arrived", 1);
    // Within the default cooldown of an hour.
    just_arrived.last_move_ms = Some(NOW_MS - 60_000);
    let mut long_settled = workload("long-settled", 1);
    long_settled.last_move_ms = Some(NOW_MS - 7 * 24 * 3_600_000);
    long_settled.moves_last_week = 1;
    let input = snapshot(vec![moved_today, just_arrived, long_settled]);

    let answer = engine.evaluate_blocking(&v2, &input, &limits()).unwrap();
    let names: Vec<&str> = answer.decisions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["long-settled"]);
}

#[test]
fn a_partial_move_beyond_the_workloads_replicas_is_refused() {
    let engine = Engine::new(EngineConfig::default()).expect("engine starts");
    let v2 = engine
        .load("carbon", &module("carbon_aware"), None)
        .unwrap();
    // The example moves whole workloads; a partial move beyond the
    // workload's replicas is what a module could still answer, and the
    // host's validation is what stops it. Ask through the parameters the
    // example rejects, to prove the module's own errors still surface...
    let mut input = snapshot(vec![workload("web", 2)]);
    input.parameters = r#"{"noSuchKnob": 1}"#.to_owned();
    let err = engine
        .evaluate_blocking(&v2, &input, &limits())
        .expect_err("unknown parameters are the module's error");
    assert!(err.to_string().contains("noSuchKnob"), "{err}");
    // ...and check the validation the host applies to every v2 answer.
    let mut decision = engine
        .evaluate_blocking(&v2, &snapshot(vec![workload("web", 2)]), &limits())
        .unwrap()
        .decisions
        .first()
        .cloned()
        .expect("a move");
    decision.replicas = Some(3);
    let (accepted, rejected) = ferry::policy::validate(&input, vec![decision]);
    assert!(accepted.is_empty());
    assert_eq!(
        rejected[0].rule,
        Rejection::InvalidReplicas {
            asked: 3,
            replicas: 2
        }
    );
}
