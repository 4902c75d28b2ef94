//! The example policies written in Rust, Python and JavaScript give the same
//! decisions: each pair of implementations runs in the real engine, under
//! its default configuration, on a corpus of snapshots (the edge cases of
//! the Rust examples' unit tests, and generated ones), and must agree on the
//! set of moves, with savings equal to within a relative 1e-9, or on refusing
//! the snapshot. Reasons are free text and not compared.
//!
//! The components are built by `scripts/build-policies`.

mod support;
use support::modules::{LANGUAGES, component};

#[path = "policy_languages/corpus.rs"]
mod corpus;
use corpus::{cheapest_cases, generated_cases, spot_cases};

use std::collections::BTreeMap;
use std::time::Duration;

use ferry::contract::{Decision, Snapshot};
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
/// from, to, replicas), each with its savings; or a refusal. Contract v1
/// moves a workload whole, so `replicas` is the workload's own count.
#[derive(Debug)]
enum Answer {
    Moves(BTreeMap<(String, String, String, String, u32), f64>),
    Refused,
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
        let replicas = snapshot
            .workloads
            .iter()
            .find(|w| w.namespace == d.namespace && w.name == d.name)
            .map_or(0, |w| w.replicas);
        let key = (
            d.namespace.clone(),
            d.name.clone(),
            d.from_cluster.clone(),
            d.to_cluster.clone(),
            replicas,
        );
        (key, d.hourly_savings)
    });
    let mut map = BTreeMap::new();
    for (key, savings) in moves {
        assert!(
            map.insert(key.clone(), savings).is_none(),
            "two decisions for {key:?}"
        );
    }
    Answer::Moves(map)
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
            want.iter().find_map(|(key, &a)| {
                let b = got[key];
                let scale = a.abs().max(b.abs());
                ((a - b).abs() > RELATIVE * scale)
                    .then(|| format!("savings of {key:?}: {a} against {b}"))
            })
        }
        (want, got) => Some(format!("expected {want:?}, got {got:?}")),
    }
}

/// Runs every language's `name` on every snapshot and asserts that each
/// answers as the Rust one does; returns how many moves Rust proposed, so a
/// corpus that never moves anything cannot pass unnoticed.
fn assert_same_everywhere(name: &str, corpus: &[(String, Snapshot)]) -> usize {
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
    let mut moves = 0;
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
            moves += m.len();
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
    moves
}

#[test]
fn cheapest_cluster_decides_the_same_in_rust_python_and_javascript() {
    let mut corpus = cheapest_cases();
    corpus.extend(generated_cases(0x5EED_0001, 40, &["{}"]));
    let moves = assert_same_everywhere("cheapest-cluster", &corpus);
    assert!(
        moves > 100,
        "the corpus moves too little to prove much: {moves}"
    );
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
    let moves = assert_same_everywhere("spot-aware", &corpus);
    assert!(
        moves > 100,
        "the corpus moves too little to prove much: {moves}"
    );
}

fn moves(entries: &[(&str, f64)]) -> Answer {
    Answer::Moves(
        entries
            .iter()
            .map(|(name, savings)| {
                let key = (
                    "shop".to_owned(),
                    (*name).to_owned(),
                    "a".to_owned(),
                    "b".to_owned(),
                    2,
                );
                (key, *savings)
            })
            .collect(),
    )
}

#[test]
fn the_comparison_catches_every_kind_of_divergence() {
    let rust = moves(&[("web", 0.144), ("api", 0.02)]);
    assert!(difference(&rust, &moves(&[("api", 0.02), ("web", 0.144)])).is_none());
    // Within a relative 1e-9: the last bits of a float may differ.
    assert!(
        difference(
            &rust,
            &moves(&[("web", 0.144 * (1.0 + 1e-12)), ("api", 0.02)])
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
