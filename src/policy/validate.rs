//! Every answer is untrusted: each decision is checked against the snapshot
//! it answers before anything acts on it. Pure: needs no client and no guest.
//!
//! This is the one place decisions are validated: [`validate`] alone makes a
//! [`Validated`], and whatever takes one (the guardrails) trusts it rather
//! than checking again.

use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;

use serde::Serialize;

use crate::contract::{Decision, Reasons, Snapshot};

/// Why a decision was refused. The text is what a person reads.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "camelCase")]
pub enum Rejection {
    UnknownWorkload,
    NotOnSourceCluster {
        actual: String,
    },
    UnknownTarget,
    TargetNotReady,
    SameSourceAndTarget,
    InvalidSavings {
        value: String,
    },
    DuplicateWorkload,
    OverCycleLimit {
        limit: u32,
    },
    /// A partial move (contract v2) of no replicas or more than there are.
    InvalidReplicas {
        asked: u32,
        replicas: u32,
    },
    /// A number of the structured reasons (contract v2) that is not finite.
    InvalidReasons {
        field: &'static str,
        value: String,
    },
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::UnknownWorkload => write!(f, "workload is not in the snapshot"),
            Rejection::NotOnSourceCluster { actual } => {
                write!(f, "fromCluster is not the workload's cluster ({actual})")
            }
            Rejection::UnknownTarget => write!(f, "toCluster is not a known cluster"),
            Rejection::TargetNotReady => write!(f, "toCluster is not ready"),
            Rejection::SameSourceAndTarget => write!(f, "fromCluster and toCluster are the same"),
            Rejection::InvalidSavings { value } => {
                write!(f, "hourlySavings must be a finite number >= 0, got {value}")
            }
            Rejection::DuplicateWorkload => {
                write!(f, "the workload already has a decision in this answer")
            }
            Rejection::OverCycleLimit { limit } => {
                write!(f, "more than maxMigrationsPerCycle ({limit}) decisions")
            }
            Rejection::InvalidReplicas { asked, replicas } => write!(
                f,
                "replicas must be at least 1 and at most the workload's {replicas}, got {asked}"
            ),
            Rejection::InvalidReasons { field, value } => {
                write!(f, "reasons.{field} must be a finite number, got {value}")
            }
        }
    }
}

/// A decision that was not accepted, with its reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rejected {
    pub decision: Decision,
    pub reason: String,
    #[serde(skip)]
    pub rule: Rejection,
}

/// Decisions that passed [`validate`], in the policy's order. Only
/// `validate` makes one; it serialises as the list it holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Validated(Vec<Decision>);

impl Deref for Validated {
    type Target = [Decision];

    fn deref(&self) -> &[Decision] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a Validated {
    type Item = &'a Decision;
    type IntoIter = std::slice::Iter<'a, Decision>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for Validated {
    type Item = Decision;
    type IntoIter = std::vec::IntoIter<Decision>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// Splits an answer into the decisions that hold and those that do not, in
/// the order the policy gave them. Earlier decisions win over later ones.
///
/// Only the workloads named by some decision are looked up: an answer is
/// usually short and a snapshot may hold tens of thousands of workloads.
/// Each distinct workload the answer names gets a slot, found once by
/// hashing its key; the snapshot's workloads then fill in their clusters,
/// and the checks work on slots with no further hashing. The keys come from
/// untrusted code, so the map keeps std's keyed hasher, and a cheap filter
/// over names spares most workloads that hash.
pub fn validate(snapshot: &Snapshot, decisions: Vec<Decision>) -> (Validated, Vec<Rejected>) {
    if decisions.is_empty() {
        return (Validated(Vec::new()), Vec::new());
    }
    let (slots, clusters_of) = {
        let mut by_key: HashMap<(&str, &str), usize> = HashMap::with_capacity(decisions.len());
        let slots: Vec<usize> = decisions
            .iter()
            .map(|d| {
                let next = by_key.len();
                *by_key
                    .entry((d.namespace.as_str(), d.name.as_str()))
                    .or_insert(next)
            })
            .collect();
        let filter = NameFilter::new(&decisions);
        // Each named workload's cluster, by slot; `None` when the snapshot
        // has no such workload.
        let mut clusters_of: Vec<Option<(&str, u32)>> = vec![None; by_key.len()];
        for workload in &snapshot.workloads {
            if filter.may_hold(&workload.name)
                && let Some(&slot) =
                    by_key.get(&(workload.namespace.as_str(), workload.name.as_str()))
            {
                clusters_of[slot] = Some((workload.cluster.as_str(), workload.replicas));
            }
        }
        (slots, clusters_of)
    };
    let clusters: HashMap<&str, bool> = snapshot
        .clusters
        .iter()
        .map(|c| (c.name.as_str(), c.ready))
        .collect();
    let limit = snapshot.thresholds.max_migrations_per_cycle;

    let mut moving = vec![false; clusters_of.len()];
    let mut accepted = Vec::new();
    let mut rejected = Vec::new();
    for (decision, slot) in decisions.into_iter().zip(slots) {
        let check = || -> Result<(), Rejection> {
            let (current, replicas) = clusters_of[slot].ok_or(Rejection::UnknownWorkload)?;
            if current != decision.from_cluster {
                return Err(Rejection::NotOnSourceCluster {
                    actual: current.to_owned(),
                });
            }
            if decision.from_cluster == decision.to_cluster {
                return Err(Rejection::SameSourceAndTarget);
            }
            match clusters.get(decision.to_cluster.as_str()) {
                None => return Err(Rejection::UnknownTarget),
                Some(false) => return Err(Rejection::TargetNotReady),
                Some(true) => {}
            }
            if !decision.hourly_savings.is_finite() || decision.hourly_savings < 0.0 {
                return Err(Rejection::InvalidSavings {
                    value: decision.hourly_savings.to_string(),
                });
            }
            if let Some(asked) = decision.replicas
                && (asked == 0 || asked > replicas)
            {
                return Err(Rejection::InvalidReplicas { asked, replicas });
            }
            if let Some(reasons) = &decision.reasons {
                check_reasons(reasons)?;
            }
            if moving[slot] {
                return Err(Rejection::DuplicateWorkload);
            }
            if accepted.len() >= limit as usize {
                return Err(Rejection::OverCycleLimit { limit });
            }
            Ok(())
        };
        match check() {
            Ok(()) => {
                moving[slot] = true;
                accepted.push(decision);
            }
            Err(rule) => rejected.push(Rejected {
                reason: rule.to_string(),
                rule,
                decision,
            }),
        }
    }
    (Validated(accepted), rejected)
}

/// The numbers of structured reasons must be finite; a payback may be
/// absent.
fn check_reasons(reasons: &Reasons) -> Result<(), Rejection> {
    let numbers = [
        ("sourceHourlyCost", Some(reasons.source_hourly_cost)),
        ("targetHourlyCost", Some(reasons.target_hourly_cost)),
        ("hourlySavings", Some(reasons.hourly_savings)),
        ("paybackHours", reasons.payback_hours),
    ];
    for (field, value) in numbers {
        if let Some(value) = value
            && !value.is_finite()
        {
            return Err(Rejection::InvalidReasons {
                field,
                value: value.to_string(),
            });
        }
    }
    Ok(())
}

/// A one-hash Bloom filter over names, with an unkeyed FNV-1a hash that
/// costs a fraction of std's keyed one. A name it does not hold is named by
/// no decision; one it holds still goes through the keyed set. It only skips
/// work: a name crafted to collide costs what every name cost without it.
struct NameFilter {
    bits: Vec<u64>,
    /// 64 less the number of bits needed to index `bits`.
    shift: u32,
}

impl NameFilter {
    /// The names of `decisions`, in about 64 bits each, so that few names
    /// that are not in it hit.
    fn new(decisions: &[Decision]) -> Self {
        let words = decisions.len().next_power_of_two().clamp(1, 1 << 12);
        let mut filter = NameFilter {
            bits: vec![0; words],
            shift: 64 - (words * 64).trailing_zeros(),
        };
        for decision in decisions {
            let bit = filter.bit(&decision.name);
            filter.bits[bit / 64] |= 1 << (bit % 64);
        }
        filter
    }

    fn may_hold(&self, name: &str) -> bool {
        let bit = self.bit(name);
        self.bits[bit / 64] & (1 << (bit % 64)) != 0
    }

    /// A bit for `name` from its length and its first and last eight bytes,
    /// in constant time: the filter is asked about every workload, so it
    /// must cost less than the hashing it saves. Names that differ only in
    /// the middle share a bit, and pay for one lookup.
    fn bit(&self, name: &str) -> usize {
        let bytes = name.as_bytes();
        let word = |part: &[u8]| {
            let mut padded = [0; 8];
            padded[..part.len()].copy_from_slice(part);
            u64::from_le_bytes(padded)
        };
        let head = word(&bytes[..bytes.len().min(8)]);
        let tail = word(&bytes[bytes.len().saturating_sub(8)..]);
        let mixed = head.rotate_left(29) ^ tail ^ bytes.len() as u64;
        // Names tend to differ in their last bytes, the high ones of `tail`;
        // fold them down, then take the top bits of the product, which
        // depend on every bit of its input.
        let mixed = (mixed ^ (mixed >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (mixed >> self.shift) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::{Decision, NameFilter, Rejection, validate};
    use crate::contract::{Cluster, Snapshot, Workload};

    fn decision(namespace: &str, name: &str, from: &str, to: &str) -> Decision {
        Decision {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            from_cluster: from.to_owned(),
            to_cluster: to.to_owned(),
            hourly_savings: 1.0,
            ..Decision::default()
        }
    }

    /// A partial move names between 1 and the workload's replicas; the
    /// numbers of structured reasons are finite.
    #[test]
    fn partial_moves_and_reasons_are_checked() {
        let workload = |name: &str| Workload {
            namespace: "shop".to_owned(),
            name: name.to_owned(),
            cluster: "dear".to_owned(),
            replicas: 3,
            ..Workload::default()
        };
        let cluster = |name: &str| Cluster {
            name: name.to_owned(),
            ready: true,
            ..Cluster::default()
        };
        let mut snapshot = Snapshot {
            clusters: vec![cluster("dear"), cluster("cheap")],
            workloads: ["a", "b", "c", "d", "e", "f"].map(workload).to_vec(),
            ..Snapshot::default()
        };
        snapshot.thresholds.max_migrations_per_cycle = 10;
        let moving = |name: &str, replicas: Option<u32>, payback: Option<f64>| Decision {
            replicas,
            reasons: Some(crate::contract::Reasons {
                payback_hours: payback,
                ..crate::contract::Reasons::default()
            }),
            ..decision("shop", name, "dear", "cheap")
        };
        let answer = vec![
            moving("a", Some(0), None),
            moving("b", Some(4), None),
            moving("c", Some(1), Some(2.5)),
            moving("d", Some(3), None),
            moving("e", None, Some(f64::NAN)),
            moving("f", None, Some(f64::INFINITY)),
        ];
        let (accepted, rejected) = validate(&snapshot, answer);
        let names: Vec<&str> = accepted.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["c", "d"]);
        let rules: Vec<(&str, &Rejection)> = rejected
            .iter()
            .map(|r| (r.decision.name.as_str(), &r.rule))
            .collect();
        assert_eq!(
            rules,
            [
                (
                    "a",
                    &Rejection::InvalidReplicas {
                        asked: 0,
                        replicas: 3
                    }
                ),
                (
                    "b",
                    &Rejection::InvalidReplicas {
                        asked: 4,
                        replicas: 3
                    }
                ),
                (
                    "e",
                    &Rejection::InvalidReasons {
                        field: "paybackHours",
                        value: "NaN".to_owned()
                    }
                ),
                (
                    "f",
                    &Rejection::InvalidReasons {
                        field: "paybackHours",
                        value: "inf".to_owned()
                    }
                ),
            ]
        );
        assert_eq!(
            rejected[1].reason,
            "replicas must be at least 1 and at most the workload's 3, got 4"
        );
    }

    #[test]
    fn each_decision_is_judged_against_its_own_workload_in_order() {
        let cluster = |name: &str| Cluster {
            name: name.to_owned(),
            ready: true,
            ..Cluster::default()
        };
        let workload = |namespace: &str, name: &str, cluster: &str| Workload {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            cluster: cluster.to_owned(),
            ..Workload::default()
        };
        let mut snapshot = Snapshot {
            clusters: vec![cluster("dear"), cluster("cheap")],
            workloads: vec![
                workload("shop", "web", "dear"),
                // The same name in another namespace is another workload.
                workload("blog", "web", "cheap"),
            ],
            ..Snapshot::default()
        };
        snapshot.thresholds.max_migrations_per_cycle = 10;
        let answer = vec![
            // Rejected, so it does not count as the workload's decision...
            decision("shop", "web", "dear", "nowhere"),
            // ...and this one holds.
            decision("shop", "web", "dear", "cheap"),
            decision("shop", "web", "dear", "cheap"),
            decision("blog", "web", "cheap", "dear"),
            decision("blog", "web", "dear", "cheap"),
            decision("shop", "api", "dear", "cheap"),
        ];
        let (accepted, rejected) = validate(&snapshot, answer);
        let accepted: Vec<_> = accepted
            .iter()
            .map(|d| (d.namespace.as_str(), d.to_cluster.as_str()))
            .collect();
        assert_eq!(accepted, [("shop", "cheap"), ("blog", "dear")]);
        let rules: Vec<_> = rejected.iter().map(|r| r.rule.clone()).collect();
        assert_eq!(
            rules,
            [
                Rejection::UnknownTarget,
                Rejection::DuplicateWorkload,
                Rejection::NotOnSourceCluster {
                    actual: "cheap".to_owned()
                },
                Rejection::UnknownWorkload,
            ]
        );
    }

    #[test]
    fn the_name_filter_holds_every_name_it_was_given_and_few_others() {
        // Names of one length that differ only in their last digits, as
        // generated names do.
        let names: Vec<String> = (0..50)
            .map(|i| format!("service-{}", 1_000 + 200 * i))
            .collect();
        let decisions: Vec<Decision> = names
            .iter()
            .map(|name| Decision {
                namespace: "shop".to_owned(),
                name: name.clone(),
                from_cluster: "dear".to_owned(),
                to_cluster: "cheap".to_owned(),
                hourly_savings: 1.0,
                ..Decision::default()
            })
            .collect();
        let filter = NameFilter::new(&decisions);
        assert!(names.iter().all(|n| filter.may_hold(n)));
        let strangers = (1_000..11_000)
            .map(|i| format!("service-{i}"))
            .filter(|name| !names.contains(name) && filter.may_hold(name))
            .count();
        // 50 names in 4,096 bits: about 1.2% of other names hit.
        assert!(strangers < 300, "{strangers} of 9,950 other names hit");
    }
}
