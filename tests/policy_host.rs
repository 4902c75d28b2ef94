//! The policy host against real compiled components: the example policies,
//! and the `testbed` module that breaks in every way the host must survive.
//!
//! The modules are built by the README's test command
//! (`cargo build --release --target wasm32-wasip2 --manifest-path policies/Cargo.toml`).

mod support;
use support::modules::module;

use std::sync::Arc;
use std::time::Duration;

use ferry::contract::{Cluster, Decision, Label, Resources, Snapshot, Thresholds, Workload};
use ferry::modules::DiskCache;
use ferry::policy::{
    Engine, EngineConfig, Evaluation, KEEPS_INPUT_SECTION, Keeps, Limits, LoadError, Policy,
    PolicyError, Rejection,
};

const GIB: u64 = 1 << 30;

/// Limits whose deadline no evaluation here comes near, however busy the
/// machine: only the tests of the deadline itself may end by it.
fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(300),
        ..Limits::default()
    }
}

fn engine() -> Engine {
    Engine::new(EngineConfig::default()).expect("engine starts")
}

fn load(engine: &Engine, name: &str) -> Policy {
    engine
        .load(name, &module(name), None)
        .expect("module loads")
}

fn cluster(name: &str, core_hour: f64, gib_hour: f64) -> Cluster {
    Cluster {
        name: name.to_owned(),
        region: "eu-west-1".to_owned(),
        labels: Vec::new(),
        ready: true,
        allocatable: Resources {
            cpu_millis: 64_000,
            memory_bytes: 256 * GIB,
        },
        requested: Resources {
            cpu_millis: 8_000,
            memory_bytes: 32 * GIB,
        },
        cpu_utilization: Some(0.2),
        memory_utilization: Some(0.2),
        cpu_core_hour_price: Some(core_hour),
        memory_gib_hour_price: Some(gib_hour),
        carbon_intensity: None,
    }
}

fn workload(name: &str, cluster: &str) -> Workload {
    Workload {
        namespace: "shop".to_owned(),
        name: name.to_owned(),
        kind: "Deployment".to_owned(),
        cluster: cluster.to_owned(),
        replicas: 2,
        requests: Resources {
            cpu_millis: 2_000,
            memory_bytes: 4 * GIB,
        },
        ..Workload::default()
    }
}

/// Three clusters (`dear`, `cheap`, and `down`, which is not ready) and two
/// workloads on `dear`.
fn snapshot(parameters: &str) -> Snapshot {
    let mut down = cluster("down", 0.01, 0.001);
    down.ready = false;
    Snapshot {
        timestamp_ms: 1_767_225_600_000,
        clusters: vec![
            cluster("dear", 0.05, 0.006),
            cluster("cheap", 0.02, 0.003),
            down,
        ],
        workloads: vec![workload("web", "dear"), workload("api", "dear")],
        thresholds: Thresholds {
            min_hourly_savings: 0.0,
            min_savings_ratio: 0.1,
            max_target_cpu_utilization: 0.8,
            max_target_memory_utilization: 0.8,
            cooldown_seconds: 3600,
            max_migrations_per_cycle: 5,
        },
        parameters: parameters.to_owned(),
    }
}

fn testbed(engine: &Engine, parameters: &str, limits: &Limits) -> Result<Evaluation, PolicyError> {
    let policy = load(engine, "testbed");
    engine.evaluate_blocking(&policy, &snapshot(parameters), limits)
}

/// After any failure, the same engine still evaluates normally.
fn assert_still_serving(engine: &Engine) {
    let policy = load(engine, "cheapest_cluster");
    let evaluation = engine
        .evaluate_blocking(&policy, &snapshot("{}"), &limits())
        .expect("a normal evaluation after a failure succeeds");
    assert_eq!(evaluation.decisions.len(), 2);
}

#[test]
fn cheapest_cluster_moves_each_workload_to_the_cheapest_ready_cluster() {
    let engine = engine();
    let evaluation = engine
        .evaluate_blocking(
            &load(&engine, "cheapest_cluster"),
            &snapshot("{}"),
            &limits(),
        )
        .unwrap();
    assert!(evaluation.rejected.is_empty(), "{:?}", evaluation.rejected);
    assert_eq!(evaluation.decisions.len(), 2);
    for decision in &evaluation.decisions {
        assert_eq!(
            (decision.from_cluster.as_str(), decision.to_cluster.as_str()),
            ("dear", "cheap")
        );
        // 2 cores and 4 GiB: 0.1 + 0.024 at dear, 0.04 + 0.012 at cheap.
        assert!(
            (decision.hourly_savings - 0.072).abs() < 1e-9,
            "{decision:?}"
        );
    }
}

#[test]
fn noop_answers_nothing() {
    let engine = engine();
    let evaluation = engine
        .evaluate_blocking(&load(&engine, "noop"), &snapshot("{}"), &limits())
        .unwrap();
    assert!(evaluation.decisions.is_empty() && evaluation.rejected.is_empty());
}

#[test]
fn an_endless_loop_is_stopped_at_the_deadline() {
    let engine = engine();
    // With fuel to spare the loop runs the metered build, on a second
    // wasmtime engine made on first use. Its epochs must advance too, or the
    // loop would run until the fuel ran out: seconds with this much, and
    // then as `OutOfFuel`.
    for fuel in [None, Some(20_000_000_000)] {
        let limits = Limits {
            timeout: Duration::from_millis(200),
            fuel,
            ..limits()
        };
        let err = testbed(&engine, r#"{"mode": "loop"}"#, &limits).unwrap_err();
        assert!(
            matches!(err, PolicyError::Timeout { limit } if limit == Duration::from_millis(200)),
            "fuel {fuel:?}: {err}"
        );
        assert_eq!(err.class(), "Timeout");
        assert_still_serving(&engine);
    }
}

#[test]
fn fuel_stops_an_endless_loop_deterministically() {
    let engine = engine();
    let limits = Limits {
        fuel: Some(5_000_000),
        timeout: Duration::from_secs(30),
        ..limits()
    };
    let err = testbed(&engine, r#"{"mode": "loop"}"#, &limits).unwrap_err();
    assert!(
        matches!(err, PolicyError::OutOfFuel { fuel: 5_000_000 }),
        "{err}"
    );
    assert_eq!(err.class(), "Timeout");
    assert_still_serving(&engine);
}

#[test]
fn unbounded_memory_growth_is_out_of_memory() {
    let engine = engine();
    let limits = Limits {
        memory_bytes: 16 << 20,
        ..limits()
    };
    let err = testbed(&engine, r#"{"mode": "grow"}"#, &limits).unwrap_err();
    assert!(
        matches!(err, PolicyError::OutOfMemory { limit } if limit == 16 << 20),
        "{err}"
    );
    assert_still_serving(&engine);
}

#[test]
fn an_evaluation_reports_the_memory_its_module_held() {
    let engine = engine();
    // The example modules start with 4 MiB of linear memory
    // (.cargo/config.toml), room for a snapshot of 1,000 workloads and the
    // planner's work without a `memory.grow`.
    let mut input = snapshot("{}");
    input.workloads = (0..1_000)
        .map(|i| workload(&format!("service-{i}"), "dear"))
        .collect();
    let evaluation = engine
        .evaluate_blocking(&load(&engine, "cheapest_cluster"), &input, &limits())
        .unwrap();
    assert_eq!(evaluation.decisions.len(), 5);
    assert_eq!(
        evaluation.memory_bytes,
        4 << 20,
        "cheapest-cluster should start with the 4 MiB that .cargo/config.toml \
         asks for and need no more; RUSTFLAGS set at its build replaces that setting"
    );

    // A module that allocates 8 MiB holds them beside its 1 MiB stack: the
    // memory past its initial 4 MiB was grown and is counted.
    let grown = testbed(&engine, r#"{"mode": "grow", "mebibytes": 8}"#, &limits()).unwrap();
    assert!(
        grown.memory_bytes > 9 << 20 && grown.memory_bytes < 16 << 20,
        "{}",
        grown.memory_bytes
    );
}

#[test]
fn a_panic_is_a_trap_that_carries_the_guest_message() {
    let engine = engine();
    let err = testbed(&engine, r#"{"mode": "panic"}"#, &limits()).unwrap_err();
    let PolicyError::Trap { message } = &err else {
        panic!("expected a trap, got {err}")
    };
    assert!(message.contains("testbed panicked on purpose"), "{message}");
    assert!(
        message.contains("unreachable"),
        "the trap code is named: {message}"
    );
    assert_still_serving(&engine);
}

#[test]
fn a_stack_overflow_is_a_trap() {
    let engine = engine();
    let err = testbed(&engine, r#"{"mode": "recurse"}"#, &limits()).unwrap_err();
    let PolicyError::Trap { message } = &err else {
        panic!("expected a trap, got {err}")
    };
    assert!(message.contains("call stack exhausted"), "{message}");
    assert!(
        message.contains("testbed::recurse"),
        "the guest backtrace names the function: {message}"
    );
    assert_still_serving(&engine);
}

#[test]
fn the_modules_own_error_is_a_policy_error() {
    let engine = engine();
    let err = testbed(&engine, r#"{"mode": "error"}"#, &limits()).unwrap_err();
    assert!(
        matches!(&err, PolicyError::PolicyError(m) if m == "testbed refuses to decide"),
        "{err}"
    );
    assert_still_serving(&engine);
}

#[test]
fn more_decisions_than_workloads_is_invalid_output() {
    let engine = engine();
    let err = testbed(&engine, r#"{"mode": "flood-decisions"}"#, &limits()).unwrap_err();
    assert!(
        matches!(&err, PolicyError::InvalidOutput(m) if m.contains("120 decisions for 2 workloads")),
        "{err}"
    );
    assert_still_serving(&engine);
}

#[test]
fn a_flood_of_output_is_capped_and_the_evaluation_still_succeeds() {
    let engine = engine();
    let limits = Limits {
        max_log_lines: 50,
        max_log_bytes: 4096,
        ..limits()
    };
    let evaluation = testbed(
        &engine,
        r#"{"mode": "flood-logs", "lines": 20000}"#,
        &limits,
    )
    .unwrap();
    assert_eq!(evaluation.logs.len(), 50);
    assert!(evaluation.logs_dropped > 0);
    assert!(evaluation.logs[0].message.starts_with("host log line 0"));
    assert_still_serving(&engine);
}

#[test]
fn the_guest_sees_no_environment_arguments_or_files() {
    let engine = engine();
    let err = testbed(&engine, r#"{"mode": "probe"}"#, &limits()).unwrap_err();
    let PolicyError::PolicyError(report) = err else {
        panic!("probe reports through its error")
    };
    assert!(report.starts_with("env=0 "), "{report}");
    assert!(report.contains("root_readable=false"), "{report}");
}

#[test]
fn no_state_survives_between_evaluations() {
    let engine = engine();
    for _ in 0..3 {
        let err = testbed(&engine, r#"{"mode": "count"}"#, &limits()).unwrap_err();
        assert!(
            matches!(&err, PolicyError::PolicyError(m) if m == "call 1"),
            "{err}"
        );
    }
}

/// A name of the same length as the keeps-input section's that means
/// nothing to Ferry.
const UNMARKED: &[u8] = b"ferry-policy-other-input";

/// The testbed module with each promise about its input: as built (`policy!`
/// promises everything), with the section's content rewritten to the older
/// promise of strings only, or with the section renamed away. The same code,
/// lowered into by each path.
fn testbed_keeping(engine: &Engine, keeps: Keeps) -> Policy {
    let mut bytes = module("testbed");
    let mark = KEEPS_INPUT_SECTION.as_bytes();
    let at = bytes
        .windows(mark.len())
        .position(|w| w == mark)
        .expect("the testbed is exported with policy!, which marks it");
    // The section's content follows its name.
    let content = at + mark.len()..at + mark.len() + 5;
    assert_eq!(&bytes[content.clone()], b"0.2.0");
    let name = match keeps {
        Keeps::Everything => "testbed",
        Keeps::Strings => {
            bytes[content].copy_from_slice(b"0.1.0");
            "testbed-keeps-strings"
        }
        Keeps::Nothing => {
            bytes[at..at + UNMARKED.len()].copy_from_slice(UNMARKED);
            "testbed-unmarked"
        }
    };
    let policy = engine.load(name, &bytes, None).expect("module loads");
    assert_eq!(policy.keeps_input(), keeps);
    policy
}

/// Every field of a snapshot, lowered by the host and read back by the
/// guest, arrives as sent: strings with multi-byte characters and empty
/// ones, `none` and `some` of every option, extremes of every integer, and
/// more workloads than the host lowers in one batch. Each way of placing the
/// input is checked: one allocation per string and list, strings in one
/// block, and strings and label arrays in one block.
#[test]
fn the_guest_receives_every_field_as_sent() {
    let engine = engine();
    for keeps in [Keeps::Everything, Keeps::Strings, Keeps::Nothing] {
        let policy = testbed_keeping(&engine, keeps);
        let input = echo_snapshot("echo");
        let err = engine
            .evaluate_blocking(&policy, &input, &limits())
            .unwrap_err();
        let PolicyError::PolicyError(echo) = err else {
            panic!("echo reports through its error, got {err}")
        };
        let received: Snapshot = serde_json::from_str(&echo).expect("the echo is a snapshot");
        assert_eq!(received.workloads.len(), 600);
        for (sent, got) in input.workloads.iter().zip(&received.workloads) {
            assert_eq!(sent, got, "keeps: {keeps:?}");
        }
        assert_eq!(received, input, "keeps: {keeps:?}");
    }
}

/// Each promise saves the guest allocations: packing the strings saves one
/// `realloc` per string, and packing the label arrays as well one per list.
/// Fuel counts the guest's instructions exactly, so the least fuel an
/// evaluation needs shows whether the calls were made.
#[test]
fn a_module_that_keeps_its_input_gets_it_in_one_block() {
    let engine = engine();
    let input = echo_snapshot("ok");
    let strings = 2 * input.clusters.len()
        + input
            .clusters
            .iter()
            .map(|c| 2 * c.labels.len())
            .sum::<usize>()
        + input
            .workloads
            .iter()
            .map(|w| 4 + 2 * w.labels.len())
            .sum::<usize>();
    let lists = input.clusters.len() + input.workloads.len();
    let least_fuel = |keeps: Keeps| {
        let policy = testbed_keeping(&engine, keeps);
        let (mut enough, mut short) = (1u64 << 32, 0u64);
        while enough - short > 1 {
            let fuel = short + (enough - short) / 2;
            let limits = Limits {
                fuel: Some(fuel),
                ..limits()
            };
            match engine.evaluate_blocking(&policy, &input, &limits) {
                Ok(_) => enough = fuel,
                Err(PolicyError::OutOfFuel { .. }) => short = fuel,
                Err(err) => panic!("the evaluation fails only for want of fuel: {err}"),
            }
        }
        enough
    };
    let everything = least_fuel(Keeps::Everything);
    let strings_only = least_fuel(Keeps::Strings);
    let one_by_one = least_fuel(Keeps::Nothing);
    // An allocation takes the guest's allocator far more than ten
    // instructions; the one block costs one call in place of thousands.
    assert!(
        strings_only + 10 * strings as u64 <= one_by_one,
        "{strings} strings: {strings_only} fuel packed, {one_by_one} one by one"
    );
    // With the arena even an allocation of its own is cheap, about 70
    // instructions (the SDK reads the arrays in place and frees none); so
    // the bar is 40. (600 workloads: 434,195 instructions one by one,
    // 47,611 with the strings packed, 4,581 with everything packed.)
    assert!(
        everything + 40 * lists as u64 <= strings_only,
        "{lists} lists: {everything} fuel with the arrays packed, {strings_only} without"
    );
}

/// A snapshot for the testbed in `mode` with awkward strings and numbers in
/// every field, and 600 workloads: more than one batch.
fn echo_snapshot(mode: &str) -> Snapshot {
    let mut input = snapshot(&format!(r#"{{"mode": "{mode}", "note": "ünïcode ✓"}}"#));
    input.clusters[1].labels = vec![
        Label {
            key: "topology.kubernetes.io/zone".to_owned(),
            value: "eu-west-1b".to_owned(),
        },
        Label {
            key: String::new(),
            value: "ß→∞".to_owned(),
        },
    ];
    input.clusters[2].cpu_utilization = None;
    input.clusters[1].carbon_intensity = Some(123.456);
    input.clusters[0].carbon_intensity = Some(f64::MAX);
    input.clusters[2].memory_gib_hour_price = None;
    input.clusters[0].allocatable.memory_bytes = u64::MAX;
    input.thresholds.cooldown_seconds = u64::MAX;
    input.thresholds.max_migrations_per_cycle = u32::MAX;
    input.workloads = (0..600u64)
        .map(|i| Workload {
            namespace: format!("team-{}", i % 7),
            name: if i == 5 {
                String::new()
            } else {
                format!("wørkload-{i}")
            },
            kind: if i % 2 == 0 {
                "Deployment"
            } else {
                "StatefulSet"
            }
            .to_owned(),
            cluster: ["dear", "cheap", "down"][i as usize % 3].to_owned(),
            replicas: if i == 9 { u32::MAX } else { i as u32 },
            requests: Resources {
                cpu_millis: i * 250,
                memory_bytes: u64::MAX - i,
            },
            cpu_usage_millis: (i % 2 == 0).then_some(i * 3),
            memory_usage_bytes: (i % 3 == 0).then_some(u64::MAX),
            hourly_cost: (i % 5 != 0).then_some(i as f64 * 0.001 + 1e-12),
            labels: (0..i % 4)
                .map(|j| Label {
                    key: format!("k{j}"),
                    value: format!("v{i}-{j}"),
                })
                .collect(),
            seconds_since_migration: (i % 4 == 1).then_some(i),
            last_move_ms: (i % 3 == 2).then_some(u64::MAX - i),
            moves_last_day: if i == 7 { u32::MAX } else { i as u32 % 3 },
            moves_last_week: i as u32 % 11,
            disruption_cost: (i % 6 == 1).then_some(i as f64 * 0.25 + 1e-9),
        })
        .collect();
    input
}

/// Which rejection (or load error) a case must produce.
type RuleCheck = fn(&Rejection) -> bool;
type LoadCheck = fn(&LoadError) -> bool;

fn decision(name: &str, from: &str, to: &str, savings: f64) -> serde_json::Value {
    serde_json::json!({"namespace": "shop", "name": name, "fromCluster": from, "toCluster": to, "hourlySavings": savings})
}

#[test]
fn each_invalid_decision_is_rejected_with_its_reason() {
    let cases: Vec<(serde_json::Value, RuleCheck)> = vec![
        (decision("ghost", "dear", "cheap", 1.0), |r| {
            matches!(r, Rejection::UnknownWorkload)
        }),
        (
            decision("web", "cheap", "dear", 1.0),
            |r| matches!(r, Rejection::NotOnSourceCluster { actual } if actual == "dear"),
        ),
        (decision("web", "dear", "nowhere", 1.0), |r| {
            matches!(r, Rejection::UnknownTarget)
        }),
        (decision("web", "dear", "down", 1.0), |r| {
            matches!(r, Rejection::TargetNotReady)
        }),
        (decision("web", "dear", "dear", 1.0), |r| {
            matches!(r, Rejection::SameSourceAndTarget)
        }),
        (decision("web", "dear", "cheap", -0.5), |r| {
            matches!(r, Rejection::InvalidSavings { .. })
        }),
    ];
    let engine = engine();
    for (bad, is_expected) in cases {
        let parameters = serde_json::json!({"mode": "return", "decisions": [bad]}).to_string();
        let evaluation = testbed(&engine, &parameters, &limits()).unwrap();
        assert!(
            evaluation.decisions.is_empty(),
            "{bad} must not be accepted"
        );
        assert_eq!(evaluation.rejected.len(), 1);
        let rejected = &evaluation.rejected[0];
        assert!(is_expected(&rejected.rule), "{bad}: {:?}", rejected.rule);
        assert_eq!(rejected.reason, rejected.rule.to_string());
    }
}

#[test]
fn duplicates_and_decisions_over_the_cycle_limit_are_rejected() {
    let engine = engine();
    let policy = load(&engine, "testbed");
    let mut input = snapshot("");
    input.thresholds.max_migrations_per_cycle = 1;
    input.parameters = serde_json::json!({"mode": "return", "decisions": [
        decision("web", "dear", "cheap", 1.0),
        decision("web", "dear", "cheap", 1.0),
    ]})
    .to_string();
    let evaluation = engine
        .evaluate_blocking(&policy, &input, &limits())
        .unwrap();
    assert_eq!(evaluation.decisions.len(), 1);
    assert!(matches!(
        evaluation.rejected[0].rule,
        Rejection::DuplicateWorkload
    ));

    input.parameters = serde_json::json!({"mode": "return", "decisions": [
        decision("web", "dear", "cheap", 1.0),
        decision("api", "dear", "cheap", 1.0),
    ]})
    .to_string();
    let evaluation = engine
        .evaluate_blocking(&policy, &input, &limits())
        .unwrap();
    assert_eq!(evaluation.decisions[0].name, "web");
    assert!(matches!(
        evaluation.rejected[0].rule,
        Rejection::OverCycleLimit { limit: 1 }
    ));
}

#[test]
fn long_reasons_are_cut_to_the_cap() {
    let engine = engine();
    let mut long = decision("web", "dear", "cheap", 1.0);
    long["reason"] = serde_json::Value::String("é".repeat(5000));
    let parameters = serde_json::json!({"mode": "return", "decisions": [long]}).to_string();
    let limits = Limits {
        max_reason_bytes: 101,
        ..limits()
    };
    let evaluation = testbed(&engine, &parameters, &limits).unwrap();
    let Decision { reason, .. } = &evaluation.decisions[0];
    assert!(reason.len() <= 101 + '…'.len_utf8(), "{}", reason.len());
    assert!(reason.ends_with('…'));
}

#[test]
fn an_oversized_snapshot_is_refused_before_the_guest_runs() {
    let engine = engine();
    let limits = Limits {
        max_input_bytes: 256,
        ..limits()
    };
    let err = testbed(&engine, r#"{"mode": "ok"}"#, &limits).unwrap_err();
    assert!(
        matches!(err, PolicyError::InputTooLarge { limit: 256, .. }),
        "{err}"
    );
}

#[test]
fn loading_refuses_what_is_not_a_policy() {
    let engine = engine();
    let cases: Vec<(Vec<u8>, LoadCheck)> = vec![
        (
            b"not wasm at all".to_vec(),
            |e| matches!(e, LoadError::NotAComponent(m) if m.contains("not WebAssembly")),
        ),
        (
            wat::parse_str("(module)").unwrap(),
            |e| matches!(e, LoadError::NotAComponent(m) if m.contains("core")),
        ),
        (
            wat::parse_str("(component)").unwrap(),
            |e| matches!(e, LoadError::WrongWorld(m) if m.contains("decide")),
        ),
    ];
    for (bytes, is_expected) in cases {
        let err = engine.load("bad", &bytes, None).unwrap_err();
        assert!(is_expected(&err), "{err}");
    }
    let bytes = module("noop");
    let err = engine
        .load("noop", &bytes, Some(&"0".repeat(64)))
        .unwrap_err();
    assert!(matches!(err, LoadError::DigestMismatch { .. }), "{err}");

    let small = Engine::new(EngineConfig {
        max_module_bytes: 1024,
        ..EngineConfig::default()
    })
    .unwrap();
    let err = small.load("noop", &bytes, None).unwrap_err();
    assert!(
        matches!(err, LoadError::TooLarge { limit: 1024, .. }),
        "{err}"
    );
    assert_still_serving(&engine);
}

#[test]
fn the_engine_keeps_at_most_max_compiled_modules_forgetting_the_least_recently_loaded() {
    let engine = Engine::new(EngineConfig {
        max_compiled: 2,
        ..EngineConfig::default()
    })
    .unwrap();
    let digest = |name: &str| ferry::policy::sha256_hex(&module(name));
    let noop = engine.load("noop", &module("noop"), None).unwrap();
    engine
        .load("cheap", &module("cheapest_cluster"), None)
        .unwrap();
    // Loading noop again makes cheapest_cluster the least recently loaded.
    engine.load("noop", &module("noop"), None).unwrap();
    engine.load("spot", &module("spot_aware"), None).unwrap();
    let mut expected = vec![digest("noop"), digest("spot_aware")];
    expected.sort();
    assert_eq!(engine.compiled_digests(), expected);
    // A module forgotten by the engine still runs for whoever holds it.
    engine.retain(&[]);
    assert!(engine.compiled_digests().is_empty());
    engine
        .evaluate_blocking(&noop, &snapshot("{}"), &limits())
        .expect("a held module keeps running");
}

#[test]
fn the_same_bytes_compile_once() {
    let engine = engine();
    let bytes = module("cheapest_cluster");
    let first = engine.load("a", &bytes, None).unwrap();
    let digest = ferry::policy::sha256_hex(&bytes);
    let second = engine.load("b", &bytes, Some(&digest)).unwrap();
    assert_eq!(first.digest(), digest);
    // The second load is served from the cache: it keeps the first name.
    assert_eq!(second.name(), "a");
}

#[test]
fn the_disk_cache_is_reused_and_a_damaged_entry_is_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig {
        cache: Some(Arc::new(DiskCache::open(dir.path()).unwrap())),
        ..EngineConfig::default()
    };
    let bytes = module("noop");
    let digest = ferry::policy::sha256_hex(&bytes);
    Engine::new(config.clone())
        .unwrap()
        .load("noop", &bytes, None)
        .unwrap();
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1);
    assert!(
        entries[0]
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&digest)
    );

    // A second engine (a restart) loads the compiled file and evaluates with it.
    {
        let engine = Engine::new(config.clone()).unwrap();
        let policy = engine.load("noop", &bytes, None).unwrap();
        engine
            .evaluate_blocking(&policy, &snapshot("{}"), &limits())
            .unwrap();
    }

    // A damaged entry is dropped and the module compiled again.
    std::fs::write(&entries[0], b"garbage").unwrap();
    let engine = Engine::new(config).unwrap();
    let policy = engine.load("noop", &bytes, None).unwrap();
    engine
        .evaluate_blocking(&policy, &snapshot("{}"), &limits())
        .unwrap();
    assert_ne!(std::fs::read(&entries[0]).unwrap(), b"garbage");

    // The first evaluation with a fuel budget compiles the metered build,
    // which is cached under a name of its own.
    let metered = Limits {
        fuel: Some(1_000_000_000),
        ..limits()
    };
    engine
        .evaluate_blocking(&policy, &snapshot("{}"), &metered)
        .unwrap();
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with(&digest)), "{names:?}");
}

#[test]
fn a_fuel_budget_changes_nothing_but_the_budget() {
    // With and without a budget the module runs from two different builds;
    // both must answer alike, and only the metered one may run out of fuel.
    let engine = engine();
    let policy = load(&engine, "cheapest_cluster");
    let input = snapshot("{}");
    let plain = engine
        .evaluate_blocking(&policy, &input, &limits())
        .unwrap();
    let metered = engine
        .evaluate_blocking(
            &policy,
            &input,
            &Limits {
                fuel: Some(1_000_000_000),
                ..limits()
            },
        )
        .unwrap();
    assert!(!plain.decisions.is_empty());
    assert_eq!(plain.decisions, metered.decisions);

    let starved = Limits {
        fuel: Some(1_000),
        ..limits()
    };
    let err = engine
        .evaluate_blocking(&policy, &input, &starved)
        .unwrap_err();
    assert!(
        matches!(err, PolicyError::OutOfFuel { fuel: 1_000 }),
        "{err}"
    );
    // The plain build is still the one that serves evaluations without fuel.
    let again = engine
        .evaluate_blocking(&policy, &input, &limits())
        .unwrap();
    assert_eq!(plain.decisions, again.decisions);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_evaluations_all_complete_on_the_blocking_pool() {
    let engine = Engine::new(EngineConfig {
        max_concurrent: 2,
        ..EngineConfig::default()
    })
    .unwrap();
    let policy = load(&engine, "cheapest_cluster");
    let input = Arc::new(snapshot("{}"));
    let runs = (0..16).map(|_| engine.evaluate(&policy, input.clone(), limits()));
    let results = futures::future::join_all(runs).await;
    for result in results {
        assert_eq!(result.unwrap().decisions.len(), 2);
    }
}
