//! The example policies written in Rust, Python and JavaScript give the same
//! decisions: each pair of implementations runs in the real engine, under
//! its default configuration, on a corpus of snapshots (the edge cases of
//! the Rust examples' unit tests, and generated ones), and must agree on the
//! set of moves, on their contract v2 fields (replicas, strategy, structured
//! reasons), with every amount equal to within a relative 1e-9, or on
//! refusing the snapshot. The free-text `reason` is not compared.
//!
//! The components are built by `scripts/build-policies`.

mod support;
use support::modules::{LANGUAGES, component};

#[path = "policy_languages/corpus.rs"]
mod corpus;
use corpus::{cheapest_cases, generated_cases, spot_cases};

use std::collections::BTreeMap;
use std::time::Duration;

use ferry::contract::{Decision, Reasons, Snapshot, Strategy};
use ferry::policy::{Engine, EngineConfig, Evaluation, Limits, LoadError, Policy, PolicyError};

const RELATIVE: f64 = 1e-9;

/// A deadline no evaluation comes near however busy the machine; the
/// default memory limit, which the interpreters fit.
fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(300),
        ..Limits::default()
    }
}

/// What is compared of an answer: the moves, keyed by (namespace, name,
/// from, to, replicas), each with what else it carries; or a refusal. A
/// decision that names no replicas moves the workload whole, so its key
/// holds the workload's own count.
#[derive(Debug)]
enum Answer {
    Moves(BTreeMap<(String, String, String, String, u32), Move>),
    Refused,
}

/// The parts of a move besides its key.
#[derive(Debug, Clone, PartialEq)]
struct Move {
    savings: f64,
    strategy: Option<Strategy>,
    reasons: Option<Reasons>,
}

impl Move {
    fn of(d: &Decision) -> Move {
        Move {
            savings: d.hourly_savings,
            strategy: d.strategy,
            reasons: d.reasons.clone(),
        }
    }
}

fn answer(snapshot: &Snapshot, result: Result<Evaluation, PolicyError>) -> Answer {
    let evaluation = match result {
        Ok(evaluation) => evaluation,
        Err(PolicyError::PolicyError(_)) => return Answer::Refused,
        Err(other) => panic!("the evaluation failed, not by the policy's choice: {other}"),
    };
    assert!(
        evaluation.rejected.is_empty(),
        "the host rejected decisions: {:?}",
        evaluation.rejected
    );
    let moves = evaluation.decisions.iter().map(|d: &Decision| {
        let replicas = d.replicas.unwrap_or_else(|| {
            snapshot
                .workloads
                .iter()
                .find(|w| w.namespace == d.namespace && w.name == d.name)
                .map_or(0, |w| w.replicas)
        });
        let key = (
            d.namespace.clone(),
            d.name.clone(),
            d.from_cluster.clone(),
            d.to_cluster.clone(),
            replicas,
        );
        (key, Move::of(d))
    });
    let mut map = BTreeMap::new();
    for (key, m) in moves {
        assert!(
            map.insert(key.clone(), m).is_none(),
            "two decisions for {key:?}"
        );
    }
    Answer::Moves(map)
}

/// Whether two amounts are equal to within a relative 1e-9.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= RELATIVE * a.abs().max(b.abs())
}

/// Why two moves with the same key differ, or None when they agree.
fn move_difference(want: &Move, got: &Move) -> Option<String> {
    if !close(want.savings, got.savings) {
        return Some(format!("savings {} against {}", want.savings, got.savings));
    }
    if want.strategy != got.strategy {
        return Some(format!(
            "strategy {:?} against {:?}",
            want.strategy, got.strategy
        ));
    }
    let same_reasons = match (&want.reasons, &got.reasons) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            close(a.source_hourly_cost, b.source_hourly_cost)
                && close(a.target_hourly_cost, b.target_hourly_cost)
                && close(a.hourly_savings, b.hourly_savings)
                && match (a.payback_hours, b.payback_hours) {
                    (None, None) => true,
                    (Some(x), Some(y)) => close(x, y),
                    _ => false,
                }
                && a.detail == b.detail
        }
        _ => false,
    };
    (!same_reasons).then(|| format!("reasons {:?} against {:?}", want.reasons, got.reasons))
}

/// Why two answers differ, or None when they agree.
fn difference(expected: &Answer, actual: &Answer) -> Option<String> {
    match (expected, actual) {
        (Answer::Refused, Answer::Refused) => None,
        (Answer::Moves(want), Answer::Moves(got)) => {
            let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
            let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
            if !missing.is_empty() || !extra.is_empty() {
                return Some(format!("missing moves {missing:?}, extra moves {extra:?}"));
            }
            want.iter().find_map(|(key, a)| {
                move_difference(a, &got[key]).map(|why| format!("{key:?}: {why}"))
            })
        }
        (want, got) => Some(format!("expected {want:?}, got {got:?}")),
    }
}

/// What Rust's answers held across a corpus, so a corpus that never moves
/// anything, or never states a payback, cannot pass unnoticed.
struct Tally {
    moves: usize,
    paybacks: usize,
}

/// Runs every language's `name` on every snapshot and asserts that each
/// answers as the Rust one does, and that every move states its reasons.
fn assert_same_everywhere(name: &str, corpus: &[(String, Snapshot)]) -> Tally {
    let engine = Engine::new(EngineConfig::default()).expect("engine starts");
    let policies: Vec<(&str, Policy)> = LANGUAGES
        .iter()
        .map(|&lang| {
            let policy = engine
                .load(&format!("{lang}/{name}"), &component(lang, name), None)
                .unwrap_or_else(|err| panic!("{lang}/{name} does not load: {err}"));
            (lang, policy)
        })
        .collect();
    let mut failures = Vec::new();
    let mut tally = Tally {
        moves: 0,
        paybacks: 0,
    };
    for (case, snapshot) in corpus {
        let answers: Vec<(&str, Answer)> = policies
            .iter()
            .map(|(lang, policy)| {
                let result = engine.evaluate_blocking(policy, snapshot, &limits());
                (*lang, answer(snapshot, result))
            })
            .collect();
        let (_, rust) = &answers[0];
        if let Answer::Moves(m) = rust {
            tally.moves += m.len();
            for (key, m) in m {
                match &m.reasons {
                    None => failures.push(format!("{name}, case {case}: {key:?} has no reasons")),
                    Some(r) => tally.paybacks += usize::from(r.payback_hours.is_some()),
                }
            }
        }
        for (lang, other) in &answers[1..] {
            if let Some(why) = difference(rust, other) {
                failures.push(format!(
                    "{name}, case {case}: {lang} differs from rust: {why}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    tally
}

fn assert_proves_enough(tally: &Tally) {
    assert!(
        tally.moves > 100,
        "the corpus moves too little to prove much: {}",
        tally.moves
    );
    assert!(
        tally.paybacks > 20,
        "the corpus states too few paybacks to prove much: {}",
        tally.paybacks
    );
}

#[test]
fn cheapest_cluster_decides_the_same_in_rust_python_and_javascript() {
    let mut corpus = cheapest_cases();
    corpus.extend(generated_cases(0x5EED_0001, 40, &["{}"]));
    assert_proves_enough(&assert_same_everywhere("cheapest-cluster", &corpus));
}

#[test]
fn spot_aware_decides_the_same_in_rust_python_and_javascript() {
    let mut corpus = spot_cases();
    let parameters = [
        "{}",
        r#"{"allowedRegions": ["region-1", "region-2"]}"#,
        r#"{"riskPremiums": {"spot": 0.6, "on-demand": 0}}"#,
        r#"{"riskLabel": "ferry.dev/capacity-type", "riskPremiums": {}}"#,
    ];
    corpus.extend(generated_cases(0x5EED_0002, 40, &parameters));
    assert_proves_enough(&assert_same_everywhere("spot-aware", &corpus));
}

/// A move of `name` from a to b saving `savings`, with the reasons the
/// examples give: a workload that costs 0.3 an hour at a and whose move
/// costs 0.6.
fn planned(savings: f64) -> Move {
    Move {
        savings,
        strategy: None,
        reasons: Some(Reasons {
            source_hourly_cost: 0.3,
            target_hourly_cost: 0.3 - savings,
            hourly_savings: savings,
            payback_hours: Some(0.6 / savings),
            detail: String::new(),
        }),
    }
}

fn key(name: &str) -> (String, String, String, String, u32) {
    ("shop".into(), name.into(), "a".into(), "b".into(), 2)
}

fn moves(entries: &[(&str, f64)]) -> Answer {
    Answer::Moves(
        entries
            .iter()
            .map(|(name, savings)| (key(name), planned(*savings)))
            .collect(),
    )
}

/// `moves(entries)` with the move of `name` changed by `change`.
fn changed(entries: &[(&str, f64)], name: &str, change: impl FnOnce(&mut Move)) -> Answer {
    let mut answer = moves(entries);
    if let Answer::Moves(map) = &mut answer {
        change(map.get_mut(&key(name)).expect("the move exists"));
    }
    answer
}

#[test]
fn the_comparison_catches_every_kind_of_divergence() {
    let both = [("web", 0.144), ("api", 0.02)];
    let rust = moves(&both);
    assert!(difference(&rust, &moves(&[("api", 0.02), ("web", 0.144)])).is_none());
    // Within a relative 1e-9: the last bits of a float may differ.
    assert!(
        difference(
            &rust,
            &changed(&both, "web", |m| {
                m.savings *= 1.0 + 1e-12;
                m.reasons.as_mut().unwrap().payback_hours = Some(0.6 / 0.144 * (1.0 + 1e-12));
            })
        )
        .is_none()
    );

    for (what, other) in [
        (
            "savings",
            moves(&[("web", 0.144 * (1.0 + 1e-8)), ("api", 0.02)]),
        ),
        ("a move missing", moves(&[("web", 0.144)])),
        (
            "a move too many",
            moves(&[("web", 0.144), ("api", 0.02), ("db", 0.1)]),
        ),
        ("a refusal", Answer::Refused),
        (
            "reasons missing",
            changed(&both, "web", |m| m.reasons = None),
        ),
        (
            "a payback missing",
            changed(&both, "web", |m| {
                m.reasons.as_mut().unwrap().payback_hours = None;
            }),
        ),
        (
            "another payback",
            changed(&both, "api", |m| {
                m.reasons.as_mut().unwrap().payback_hours = Some(31.0);
            }),
        ),
        (
            "another source cost",
            changed(&both, "api", |m| {
                m.reasons.as_mut().unwrap().source_hourly_cost = 0.31;
            }),
        ),
        (
            "another detail",
            changed(&both, "web", |m| {
                m.reasons.as_mut().unwrap().detail = "spot".into();
            }),
        ),
        (
            "a strategy",
            changed(&both, "web", |m| m.strategy = Some(Strategy::Progressive)),
        ),
    ] {
        assert!(difference(&rust, &other).is_some(), "{what} went unnoticed");
    }
    assert!(difference(&Answer::Refused, &moves(&[])).is_some());
    assert!(difference(&Answer::Refused, &Answer::Refused).is_none());
}

/// The default module size admits the interpreters' modules, and nothing
/// unbounded: one byte over it is refused before a byte is compiled. What
/// is admitted is compiled once per digest.
#[test]
fn the_default_module_size_admits_interpreters_and_refuses_more() {
    let limit = EngineConfig::default().max_module_bytes;
    assert_eq!(limit, 64 << 20);
    for lang in ["python", "js"] {
        let size = component(lang, "cheapest-cluster").len();
        assert!(size > 8 << 20 && size < limit, "{lang}: {size} bytes");
    }
    let engine = Engine::new(EngineConfig::default()).expect("engine starts");
    let mut oversized = component("rust", "cheapest-cluster");
    oversized.resize(limit + 1, 0);
    let err = engine.load("oversized", &oversized, None).unwrap_err();
    assert!(
        matches!(err, LoadError::TooLarge { size, limit: l } if size == limit + 1 && l == limit),
        "{err}"
    );
    assert!(engine.compiled_digests().is_empty());

    // A large module is compiled once: loading it again finds it compiled.
    let python = component("python", "cheapest-cluster");
    let first = engine.load("first", &python, None).expect("loads");
    let again = engine.load("again", &python, None).expect("loads");
    assert_eq!(first.digest(), again.digest());
    assert_eq!(engine.compiled_digests(), vec![first.digest().to_owned()]);
}

/// What `ferry policy eval` prints for a Python or JavaScript example is the
/// contract v2 answer: each decision's structured reasons, with the payback
/// computed from the workload's disruption cost, which only contract v2
/// hands a module. A module built against contract v1 would print none.
#[test]
fn ferry_policy_eval_shows_the_reasons_of_python_and_javascript_decisions() {
    let temp = tempfile::tempdir().unwrap();
    let snapshot = temp.path().join("snapshot.json");
    let mut json: serde_json::Value = serde_json::from_str(include_str!(
        "../policies/templates/common/snapshots/two-clusters.json"
    ))
    .unwrap();
    // 2 cores and 4 GiB: 0.124 an hour on dear, 0.052 on cheap; a move
    // costs 0.288, repaid in 4 hours.
    json["workloads"][0]["disruptionCost"] = 0.288.into();
    std::fs::write(&snapshot, json.to_string()).unwrap();

    for lang in LANGUAGES {
        let module = support::modules::component_path(lang, "cheapest-cluster");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["policy", "eval"])
            .arg(&module)
            .arg("--input")
            .arg(&snapshot)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{lang}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let output: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let decision = &output["decisions"][0];
        assert_eq!(decision["toCluster"], "cheap", "{lang}: {stdout}");
        let reasons = &decision["reasons"];
        for (field, want) in [
            ("sourceHourlyCost", 0.124),
            ("targetHourlyCost", 0.052),
            ("hourlySavings", 0.072),
            ("paybackHours", 4.0),
        ] {
            let got = reasons[field]
                .as_f64()
                .unwrap_or_else(|| panic!("{lang}: no reasons.{field} in {stdout}"));
            assert!(close(got, want), "{lang}: {field} is {got}");
        }
    }
}
