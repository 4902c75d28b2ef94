//! Every answer is untrusted: each decision is checked against the snapshot
//! it answers before anything acts on it. Pure: needs no client and no guest.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::Serialize;

use super::contract::{Decision, Snapshot};

/// Why a decision was refused. The text is what a person reads.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "camelCase")]
pub enum Rejection {
    UnknownWorkload,
    NotOnSourceCluster { actual: String },
    UnknownTarget,
    TargetNotReady,
    SameSourceAndTarget,
    InvalidSavings { value: String },
    DuplicateWorkload,
    OverCycleLimit { limit: u32 },
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

/// Splits an answer into the decisions that hold and those that do not, in
/// the order the policy gave them. Earlier decisions win over later ones.
///
/// Only the workloads named by some decision are indexed: an answer is
/// usually short and a snapshot may hold tens of thousands of workloads. The
/// keys come from untrusted code, so the maps keep std's keyed hasher.
pub fn validate(snapshot: &Snapshot, decisions: Vec<Decision>) -> (Vec<Decision>, Vec<Rejected>) {
    if decisions.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let named: HashSet<(&str, &str)> = decisions
        .iter()
        .map(|d| (d.namespace.as_str(), d.name.as_str()))
        .collect();
    let workloads: HashMap<(&str, &str), &str> = snapshot
        .workloads
        .iter()
        .map(|w| ((w.namespace.as_str(), w.name.as_str()), w.cluster.as_str()))
        .filter(|(key, _)| named.contains(key))
        .collect();
    drop(named);
    let clusters: HashMap<&str, bool> = snapshot
        .clusters
        .iter()
        .map(|c| (c.name.as_str(), c.ready))
        .collect();
    let limit = snapshot.thresholds.max_migrations_per_cycle;

    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut accepted = Vec::new();
    let mut rejected = Vec::new();
    for decision in decisions {
        let check = || -> Result<(), Rejection> {
            let key = (decision.namespace.as_str(), decision.name.as_str());
            let current = *workloads.get(&key).ok_or(Rejection::UnknownWorkload)?;
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
            if seen.contains(&(decision.namespace.clone(), decision.name.clone())) {
                return Err(Rejection::DuplicateWorkload);
            }
            if accepted.len() >= limit as usize {
                return Err(Rejection::OverCycleLimit { limit });
            }
            Ok(())
        };
        match check() {
            Ok(()) => {
                seen.insert((decision.namespace.clone(), decision.name.clone()));
                accepted.push(decision);
            }
            Err(rule) => rejected.push(Rejected {
                reason: rule.to_string(),
                rule,
                decision,
            }),
        }
    }
    (accepted, rejected)
}
