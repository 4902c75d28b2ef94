//! What a module answered against what a fixture expects, as a list of
//! differences a person reads per decision. Pure: it compares values.

use std::fmt;

use ferry::contract::{Decision, Snapshot};
use ferry::policy::{Evaluation, PolicyError, Rejected};
use serde::Serialize;

use super::policy_fixture::{Expect, ExpectedDecision, ExpectedRejection, Refusal};

/// A move as the report shows it: expected, or made by the module.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Move {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) from: String,
    pub(super) to: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) replicas: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) savings: Option<f64>,
}

/// One way the answer differs from the fixture.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(super) enum Difference {
    /// Expected, not made.
    MissingDecision { expected: Move },
    /// Made, not expected.
    UnexpectedDecision { got: Move },
    /// Made for the expected workload, but not as expected.
    WrongDecision {
        expected: Move,
        got: Move,
        fields: Vec<&'static str>,
    },
    /// A refusal by Ferry's validation the fixture expects, not seen.
    MissingRejection { expected: ExpectedRejection },
    /// A decision Ferry's validation refused, which the fixture does not expect.
    UnexpectedRejection {
        got: Move,
        rule: String,
        reason: String,
    },
    /// The module answered where the fixture expects it to refuse.
    NotRefused { expected: Refusal },
    /// The module refused where the fixture expects an answer, or with
    /// another message.
    Refused {
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        expected: Option<String>,
    },
    /// The evaluation failed: trap, deadline, memory.
    Failed { class: String, message: String },
}

/// The differences between `result` and `expect`; none when it passes.
pub(super) fn compare(
    snapshot: &Snapshot,
    expect: &Expect,
    result: &Result<Evaluation, PolicyError>,
) -> Vec<Difference> {
    let evaluation = match (result, &expect.refusal) {
        (Err(PolicyError::PolicyError(message)), Some(refusal)) => {
            return match refusal {
                Refusal::Containing(text) if !message.contains(text.as_str()) => {
                    vec![Difference::Refused {
                        message: message.clone(),
                        expected: Some(text.clone()),
                    }]
                }
                _ => Vec::new(),
            };
        }
        (Err(PolicyError::PolicyError(message)), None) => {
            return vec![Difference::Refused {
                message: message.clone(),
                expected: None,
            }];
        }
        (Err(err), _) => {
            return vec![Difference::Failed {
                class: err.class().to_owned(),
                message: err.to_string(),
            }];
        }
        (Ok(_), Some(refusal)) => {
            return vec![Difference::NotRefused {
                expected: refusal.clone(),
            }];
        }
        (Ok(evaluation), None) => evaluation,
    };
    let mut differences = Vec::new();
    if let Some(expected) = &expect.decisions {
        compare_decisions(
            snapshot,
            expected,
            &evaluation.decisions,
            expect.savings_tolerance,
            &mut differences,
        );
    }
    compare_rejections(&expect.rejected, &evaluation.rejected, &mut differences);
    differences
}

/// Matches decisions by workload: Ferry's validation lets through at most
/// one per workload.
fn compare_decisions(
    snapshot: &Snapshot,
    expected: &[ExpectedDecision],
    got: &[Decision],
    tolerance: f64,
    out: &mut Vec<Difference>,
) {
    let mut unmatched: Vec<&Decision> = got.iter().collect();
    for want in expected {
        let expected_move = Move::expected(want);
        let found = unmatched
            .iter()
            .position(|d| d.namespace == want.namespace && d.name == want.name);
        let Some(index) = found else {
            out.push(Difference::MissingDecision {
                expected: expected_move,
            });
            continue;
        };
        let got_move = Move::made(snapshot, unmatched.remove(index));
        let fields = differing_fields(&expected_move, &got_move, tolerance);
        if !fields.is_empty() {
            out.push(Difference::WrongDecision {
                expected: expected_move,
                got: got_move,
                fields,
            });
        }
    }
    out.extend(
        unmatched
            .into_iter()
            .map(|d| Difference::UnexpectedDecision {
                got: Move::made(snapshot, d),
            }),
    );
}

/// The fields an expected move gives that the made one does not match.
fn differing_fields(expected: &Move, got: &Move, tolerance: f64) -> Vec<&'static str> {
    let mut fields = Vec::new();
    if expected.from != got.from {
        fields.push("from");
    }
    if expected.to != got.to {
        fields.push("to");
    }
    if expected.replicas.is_some() && expected.replicas != got.replicas {
        fields.push("replicas");
    }
    if let (Some(want), Some(have)) = (expected.savings, got.savings)
        && !savings_match(want, have, tolerance)
    {
        fields.push("savings");
    }
    fields
}

/// Equal, or within `tolerance` relative to the larger of the two.
pub(super) fn savings_match(expected: f64, got: f64, tolerance: f64) -> bool {
    expected == got || (expected - got).abs() <= tolerance * expected.abs().max(got.abs())
}

/// Matches each expected rejection to one refused decision whose given
/// fields agree; whatever is left on either side is a difference.
fn compare_rejections(expected: &[ExpectedRejection], got: &[Rejected], out: &mut Vec<Difference>) {
    let mut unmatched: Vec<&Rejected> = got.iter().collect();
    for want in expected {
        match unmatched.iter().position(|r| rejection_matches(want, r)) {
            Some(index) => {
                unmatched.remove(index);
            }
            None => out.push(Difference::MissingRejection {
                expected: want.clone(),
            }),
        }
    }
    out.extend(
        unmatched
            .into_iter()
            .map(|r| Difference::UnexpectedRejection {
                got: Move::refused(&r.decision),
                rule: rule_name(r),
                reason: r.reason.clone(),
            }),
    );
}

fn rejection_matches(want: &ExpectedRejection, got: &Rejected) -> bool {
    let d = &got.decision;
    want.namespace == d.namespace
        && want.name == d.name
        && want
            .from
            .as_ref()
            .is_none_or(|from| *from == d.from_cluster)
        && want.to.as_ref().is_none_or(|to| *to == d.to_cluster)
        && want
            .rule
            .as_ref()
            .is_none_or(|rule| *rule == rule_name(got))
}

/// The rule's name as `ferry policy eval` prints it (`unknownTarget`, …).
fn rule_name(rejected: &Rejected) -> String {
    serde_json::to_value(&rejected.rule)
        .ok()
        .and_then(|value| value.get("rule")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl Move {
    fn expected(want: &ExpectedDecision) -> Self {
        Move {
            namespace: want.namespace.clone(),
            name: want.name.clone(),
            from: want.from.clone(),
            to: want.to.clone(),
            replicas: want.replicas,
            savings: want.savings,
        }
    }

    /// A validated decision: the replicas it names (a contract v2 partial
    /// move), else the workload's own, as a whole move takes them all.
    fn made(snapshot: &Snapshot, d: &Decision) -> Self {
        Move {
            replicas: d
                .replicas
                .or_else(|| snapshot.workload(&d.namespace, &d.name).map(|w| w.replicas)),
            ..Move::refused(d)
        }
    }

    /// A decision as the module gave it, whatever validation made of it.
    fn refused(d: &Decision) -> Self {
        Move {
            namespace: d.namespace.clone(),
            name: d.name.clone(),
            from: d.from_cluster.clone(),
            to: d.to_cluster.clone(),
            replicas: None,
            savings: Some(d.hourly_savings),
        }
    }
}

impl fmt::Display for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.from, self.to)?;
        if let Some(replicas) = self.replicas {
            write!(f, ", replicas {replicas}")?;
        }
        if let Some(savings) = self.savings {
            write!(f, ", savings {savings}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Difference {
    /// Two or three lines, indented under the fixture's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::MissingDecision { expected } => write!(
                f,
                "decision {}/{}: expected, not made\n    expected  {expected}",
                expected.namespace, expected.name
            ),
            Difference::UnexpectedDecision { got } => write!(
                f,
                "decision {}/{}: made, not expected\n    got       {got}",
                got.namespace, got.name
            ),
            Difference::WrongDecision {
                expected,
                got,
                fields,
            } => write!(
                f,
                "decision {}/{}: {} differ\n    expected  {expected}\n    got       {got}",
                expected.namespace,
                expected.name,
                fields.join(", ")
            ),
            Difference::MissingRejection { expected } => write!(
                f,
                "rejection of {}/{}{}: expected, not seen",
                expected.namespace,
                expected.name,
                expected
                    .rule
                    .as_ref()
                    .map(|rule| format!(" ({rule})"))
                    .unwrap_or_default()
            ),
            Difference::UnexpectedRejection { got, rule, reason } => write!(
                f,
                "decision {}/{}: refused by Ferry's validation ({rule}: {reason})\n    got       {got}",
                got.namespace, got.name
            ),
            Difference::NotRefused { expected } => match expected {
                Refusal::Containing(text) => write!(
                    f,
                    "expected the policy to refuse the snapshot with a message containing {text:?}; it answered"
                ),
                Refusal::Any(_) => {
                    write!(f, "expected the policy to refuse the snapshot; it answered")
                }
            },
            Difference::Refused {
                message,
                expected: Some(text),
            } => write!(
                f,
                "refusal message does not contain {text:?}\n    got       {message}"
            ),
            Difference::Refused {
                message,
                expected: None,
            } => write!(
                f,
                "the policy refused the snapshot, where decisions were expected\n    got       {message}"
            ),
            Difference::Failed { class, message } => {
                write!(f, "the evaluation failed ({class}): {message}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::savings_match;

    #[test]
    fn savings_match_within_a_relative_tolerance() {
        assert!(savings_match(0.072, 0.124 - 0.052, 1e-9));
        assert!(savings_match(0.0, 0.0, 0.0));
        assert!(!savings_match(0.0, 1e-12, 1e-9));
        assert!(savings_match(100.0, 100.5, 0.01));
        assert!(!savings_match(100.0, 102.0, 0.01));
    }
}
