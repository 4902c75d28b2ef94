//! How a move hands a workload over: all at once, or in steps with a pause
//! and a health gate between them (`spec.strategy` of a `MigrationPolicy`,
//! copied into each `WorkloadMigration` it starts and signed with it).
//!
//! Pure: the types, their schema, and the arithmetic of counts and percents.
//! The steps themselves are planned by the migration protocol.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::Duration;

/// How a move hands the workload over from the source to the target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationStrategy {
    /// `AllAtOnce` (the default): the target runs every replica, then the
    /// source action follows. `Progressive`: the target grows step by step
    /// and the source shrinks by the same amount after each step passes.
    #[serde(rename = "type", default)]
    pub type_: StrategyType,
    /// Progressive: replicas added to the target per step, a count (`2`)
    /// or a percent of the workload's replicas (`"25%"`, rounded up).
    /// Default `25%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<ReplicaCount>,
    /// Progressive: how long each step's target replicas must have been
    /// ready before the gate is read and the source shrinks (`"30s"`).
    /// Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<Duration>,
    /// Progressive: the fewest ready replicas, summed over both clusters,
    /// that the move may leave at any time: a count or a percent of the
    /// workload's replicas (rounded up). Default: from the
    /// PodDisruptionBudget that travels with the workload, else from the
    /// Deployment's `maxUnavailable` (25% when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<ReplicaCount>,
    /// Progressive: PromQL queries read from the target cluster's
    /// Prometheus after each step's pause. A step passes when every query
    /// returns at least one value and every value is within its bounds; a
    /// query that fails rolls the move back, step by step. At most 8.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub gate: Vec<GateQuery>,
}

/// The two ways of handing over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum StrategyType {
    /// Every replica in the target, then the source action at once.
    #[default]
    AllAtOnce,
    /// A step at a time: the target grows, is checked, then the source
    /// shrinks by the same amount.
    Progressive,
}

/// One query of a health gate. `$namespace` and `$workload` in the query
/// are replaced by the moving workload's namespace and name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateQuery {
    /// A name for messages and Events (`error-ratio`).
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// The PromQL expression, for example
    /// `sum(rate(http_errors_total{namespace="$namespace"}[1m])) / sum(rate(http_requests_total{namespace="$namespace"}[1m]))`.
    #[schemars(length(min = 1, max = 2048))]
    pub query: String,
    /// Every value must be strictly below this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<f64>,
    /// Every value must be strictly above this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<f64>,
}

impl GateQuery {
    /// Whether `value` is within this query's bounds.
    pub fn holds(&self, value: f64) -> bool {
        !value.is_nan()
            && self.below.is_none_or(|b| value < b)
            && self.above.is_none_or(|a| value > a)
    }

    /// The bounds in words: `below 0.01`, `above 0`, `above 0 and below 5`.
    pub fn bounds(&self) -> String {
        match (self.above, self.below) {
            (Some(a), Some(b)) => format!("above {a} and below {b}"),
            (Some(a), None) => format!("above {a}"),
            (None, Some(b)) => format!("below {b}"),
            (None, None) => "any value".to_owned(),
        }
    }
}

/// The most queries one gate may hold.
pub const MAX_GATE_QUERIES: usize = 8;

impl MigrationStrategy {
    /// A progressive strategy with every default: steps of 25%, no pause,
    /// no gate.
    pub fn progressive() -> Self {
        MigrationStrategy {
            type_: StrategyType::Progressive,
            ..MigrationStrategy::default()
        }
    }

    /// Whether the move goes in steps.
    pub fn is_progressive(&self) -> bool {
        self.type_ == StrategyType::Progressive
    }

    /// The replicas per step out of `total` (at least one).
    pub fn step_of(&self, total: i64) -> Result<i64, String> {
        let step = self
            .step
            .clone()
            .unwrap_or(ReplicaCount::Text("25%".into()))
            .resolve(total, Rounding::Up)?;
        Ok(step.max(1))
    }

    /// What is wrong with the strategy, as (field below `strategy`,
    /// message) pairs; empty when nothing is.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut push = |field: &str, message: String| problems.push((field.to_owned(), message));
        if !self.is_progressive() {
            for (field, set) in [
                ("step", self.step.is_some()),
                ("pause", self.pause.is_some()),
                ("minAvailable", self.min_available.is_some()),
                ("gate", !self.gate.is_empty()),
            ] {
                if set {
                    push(
                        field,
                        "applies only to type Progressive; set type: Progressive or remove it"
                            .into(),
                    );
                }
            }
            return problems;
        }
        if let Some(step) = &self.step {
            match step.resolve(100, Rounding::Up) {
                Ok(0) => push(
                    "step",
                    format!("is {step}; a step adds at least one replica"),
                ),
                Ok(_) => {}
                Err(e) => push("step", e),
            }
        }
        if let Some(pause) = &self.pause
            && let Err(e) = pause.to_std()
        {
            push("pause", e.to_string());
        }
        if let Some(min) = &self.min_available
            && let Err(e) = min.resolve(100, Rounding::Up)
        {
            push("minAvailable", e);
        }
        if self.gate.len() > MAX_GATE_QUERIES {
            push(
                "gate",
                format!(
                    "holds {} queries; at most {MAX_GATE_QUERIES}",
                    self.gate.len()
                ),
            );
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, q) in self.gate.iter().enumerate() {
            let at = |field: &str| format!("gate[{i}].{field}");
            if q.name.is_empty() || q.name.len() > 63 {
                push(&at("name"), "must have 1 to 63 characters".into());
            } else if !names.insert(q.name.as_str()) {
                push(&at("name"), format!("{:?} is used twice", q.name));
            }
            if q.query.trim().is_empty() || q.query.len() > 2048 {
                push(&at("query"), "must have 1 to 2048 characters".into());
            }
            if q.below.is_none() && q.above.is_none() {
                push(
                    &at("below"),
                    "a query needs a bound: set below, above or both".into(),
                );
            }
            for (field, bound) in [("below", q.below), ("above", q.above)] {
                if bound.is_some_and(|b| !b.is_finite()) {
                    push(&at(field), "must be a finite number".into());
                }
            }
        }
        problems
    }
}

/// A number of replicas: a count, or a percent of a total (`"25%"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ReplicaCount {
    /// A count.
    Count(i64),
    /// A count as text (`"3"`) or a percent (`"25%"`).
    Text(String),
}

impl JsonSchema for ReplicaCount {
    fn schema_name() -> Cow<'static, str> {
        "ReplicaCount".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"x-kubernetes-int-or-string": true})
    }
}

/// How a percent becomes a count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    Up,
    Down,
}

impl ReplicaCount {
    /// The count this stands for out of `total` replicas, or what is wrong
    /// with it. A percent above 100 or a negative count is refused.
    pub fn resolve(&self, total: i64, rounding: Rounding) -> Result<i64, String> {
        let text = match self {
            ReplicaCount::Count(n) if *n >= 0 => return Ok(*n),
            ReplicaCount::Count(n) => return Err(format!("{n} is negative")),
            ReplicaCount::Text(text) => text.trim(),
        };
        if let Some(percent) = text.strip_suffix('%') {
            let p: i64 = percent
                .parse()
                .ok()
                .filter(|p| (0..=100).contains(p))
                .ok_or_else(|| format!("{text:?} is not a percent from 0% to 100%"))?;
            let scaled = total.saturating_mul(p);
            return Ok(match rounding {
                Rounding::Up => (scaled + 99) / 100,
                Rounding::Down => scaled / 100,
            });
        }
        text.parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("{text:?} is neither a count nor a percent such as \"25%\""))
    }
}

impl std::fmt::Display for ReplicaCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplicaCount::Count(n) => write!(f, "{n}"),
            ReplicaCount::Text(t) => write!(f, "{t:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_percents_resolve_with_their_rounding() {
        let count = |v: serde_json::Value| serde_json::from_value::<ReplicaCount>(v).unwrap();
        assert_eq!(count(2.into()).resolve(10, Rounding::Up), Ok(2));
        assert_eq!(count("3".into()).resolve(10, Rounding::Up), Ok(3));
        assert_eq!(count("25%".into()).resolve(10, Rounding::Up), Ok(3));
        assert_eq!(count("25%".into()).resolve(10, Rounding::Down), Ok(2));
        assert_eq!(count("100%".into()).resolve(7, Rounding::Down), Ok(7));
        assert!(count("150%".into()).resolve(10, Rounding::Up).is_err());
        assert!(count("-1".into()).resolve(10, Rounding::Up).is_err());
        assert!(count((-1).into()).resolve(10, Rounding::Up).is_err());
        assert!(count("half".into()).resolve(10, Rounding::Up).is_err());
    }

    #[test]
    fn progressive_fields_on_an_all_at_once_strategy_are_problems() {
        let strategy: MigrationStrategy =
            serde_json::from_value(serde_json::json!({"pause": "1s", "step": 2})).unwrap();
        let fields: Vec<String> = strategy.problems().into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["step", "pause"]);
    }

    #[test]
    fn a_gate_query_holds_strictly_within_its_bounds() {
        let q = GateQuery {
            name: "errors".into(),
            query: "x".into(),
            below: Some(0.01),
            above: Some(0.0),
        };
        assert!(q.holds(0.005));
        assert!(!q.holds(0.01));
        assert!(!q.holds(0.0));
        assert!(!q.holds(f64::NAN));
        assert_eq!(q.bounds(), "above 0 and below 0.01");
    }
}
