//! The steps of a progressive move and its health gate.
//!
//! Both sides plan the steps from the same signed request, so they agree on
//! what "step k" means without trusting each other's arithmetic: the target
//! runs `levels[k-1]` replicas at step k, and the source runs the rest.
//! The sender reads the gate from the target cluster's Prometheus (it
//! already reads it for prices), so no peer ever runs a query in the
//! other's cluster.
//!
//! Pure but for [`read_gate`], which only reads through [`GateMetrics`].

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::crd::{GateQuery, ReplicaCount, Rounding, WorkloadMigrationSpec};
use crate::migration::sanitize::{Objection, reasons};

/// The most steps one move may take.
pub const MAX_STEPS: usize = 100;

/// A progressive move's steps, as both sides compute them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    /// The workload's replicas (the source's before the move).
    pub replicas: i32,
    /// The target's replicas at steps 1, 2, …; the last is all that move
    /// (`replicas`, or fewer for a partial move).
    pub levels: Vec<i32>,
    /// How long each step's target must have been ready before the gate.
    pub pause: Duration,
    /// The fewest ready replicas, summed over both clusters.
    pub min_available: i32,
    /// The gate's queries.
    pub gate: Vec<GateQuery>,
}

impl Plan {
    /// How many steps the move takes.
    pub fn steps(&self) -> i32 {
        self.levels.len() as i32
    }

    /// The target's replicas at `step` (0 before the first).
    pub fn level(&self, step: i32) -> i32 {
        match usize::try_from(step) {
            Ok(0) | Err(_) => 0,
            Ok(k) => self.levels[(k - 1).min(self.levels.len() - 1)],
        }
    }

    /// The source's replicas while the target runs `step`.
    pub fn source_at(&self, step: i32) -> i32 {
        self.replicas - self.level(step)
    }
}

/// The plan of `spec`'s move: `None` for an all-at-once move, an objection
/// (`InvalidStrategy`) for a strategy the receiver cannot follow.
pub(crate) fn plan(spec: &WorkloadMigrationSpec) -> Result<Option<Plan>, Objection> {
    let Some(strategy) = spec.strategy.as_ref().filter(|s| s.is_progressive()) else {
        return Ok(None);
    };
    let invalid = |field: &str, message: String| {
        Objection::new(
            reasons::INVALID_STRATEGY,
            format!("spec.strategy.{field}: {message}"),
        )
    };
    if let Some((field, message)) = strategy.problems().into_iter().next() {
        return Err(invalid(&field, message));
    }
    let moving = spec
        .workload
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .clamp(0, i64::from(i32::MAX));
    // A partial move steps up to what moves; the source had more.
    let replicas = spec.partial.map_or(moving, |p| i64::from(p.of).max(moving));
    let step = strategy.step_of(moving).map_err(|e| invalid("step", e))?;
    let mut levels = Vec::new();
    let mut level = 0;
    loop {
        level = (level + step).min(moving);
        levels.push(level as i32);
        if level >= moving {
            break;
        }
        if levels.len() >= MAX_STEPS {
            return Err(invalid(
                "step",
                format!(
                    "{} of {replicas} replicas takes more than {MAX_STEPS} steps; take larger steps",
                    strategy
                        .step
                        .as_ref()
                        .map_or("25%".into(), ToString::to_string)
                ),
            ));
        }
    }
    let pause = match &strategy.pause {
        Some(pause) => pause
            .to_std()
            .map_err(|e| invalid("pause", e.to_string()))?,
        None => Duration::ZERO,
    };
    let min_available = match &strategy.min_available {
        Some(min) => min
            .resolve(replicas, Rounding::Up)
            .map_err(|e| invalid("minAvailable", e))?,
        None => default_min_available(spec, replicas),
    }
    .clamp(0, replicas) as i32;
    Ok(Some(Plan {
        replicas: replicas as i32,
        levels,
        pause,
        min_available,
        gate: strategy.gate.clone(),
    }))
}

/// `minAvailable` when the strategy does not set it: from the
/// PodDisruptionBudget that travels with the workload (its `minAvailable`,
/// or all but its `maxUnavailable`, percents rounded up as Kubernetes
/// does), else all but the Deployment's `maxUnavailable` (25% when unset,
/// rounded down as a rollout does).
fn default_min_available(spec: &WorkloadMigrationSpec, replicas: i64) -> i64 {
    let count = |v: &Value| serde_json::from_value::<ReplicaCount>(v.clone()).ok();
    let budget = spec
        .dependents
        .iter()
        .find(|d| d.get("kind").and_then(Value::as_str) == Some("PodDisruptionBudget"));
    if let Some(budget) = budget {
        if let Some(min) = budget.pointer("/spec/minAvailable").and_then(count)
            && let Ok(min) = min.resolve(replicas, Rounding::Up)
        {
            return min;
        }
        if let Some(max) = budget.pointer("/spec/maxUnavailable").and_then(count)
            && let Ok(max) = max.resolve(replicas, Rounding::Up)
        {
            return replicas - max;
        }
    }
    let max_unavailable = spec
        .workload
        .pointer("/spec/strategy/rollingUpdate/maxUnavailable")
        .and_then(count)
        .unwrap_or(ReplicaCount::Text("25%".into()))
        .resolve(replicas, Rounding::Down)
        .unwrap_or(0);
    replicas - max_unavailable
}

/// Instant queries against a cluster's Prometheus: every value the query
/// returns, or why it could not be read.
pub trait GateMetrics: Send + Sync {
    /// The values of `query` evaluated now in `cluster`'s Prometheus.
    fn values<'a>(
        &'a self,
        cluster: &'a str,
        query: &'a str,
    ) -> BoxFuture<'a, Result<Vec<f64>, String>>;
}

/// What a reading of the gate says.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GateReading {
    /// Every query returned values within its bounds.
    Pass(String),
    /// A query returned nothing yet or could not be read: ask again.
    Wait(String),
    /// A query returned a value out of its bounds.
    Fail(String),
}

/// Reads every query of `gate` in `cluster`, with `$namespace` and
/// `$workload` replaced (both are Kubernetes names, which need no quoting
/// inside a PromQL string).
pub(crate) async fn read_gate(
    metrics: Option<&dyn GateMetrics>,
    cluster: &str,
    namespace: &str,
    workload: &str,
    gate: &[GateQuery],
) -> GateReading {
    if gate.is_empty() {
        return GateReading::Pass("no gate queries".into());
    }
    let Some(metrics) = metrics else {
        return GateReading::Fail(format!(
            "the gate has {} queries but this operator reads no Prometheus",
            gate.len()
        ));
    };
    let mut passed = Vec::new();
    for q in gate {
        let query = q
            .query
            .replace("$namespace", namespace)
            .replace("$workload", workload);
        let values = match metrics.values(cluster, &query).await {
            Ok(values) => values,
            Err(e) => {
                return GateReading::Wait(format!(
                    "gate query {} could not be read in {cluster}'s Prometheus: {e}",
                    q.name
                ));
            }
        };
        if values.is_empty() {
            return GateReading::Wait(format!(
                "gate query {} returned no value yet in {cluster}",
                q.name
            ));
        }
        if let Some(bad) = values.iter().find(|v| !q.holds(**v)) {
            return GateReading::Fail(format!(
                "gate query {} returned {bad} in {cluster}, not {}",
                q.name,
                q.bounds()
            ));
        }
        let worst = values
            .iter()
            .copied()
            .fold(f64::NAN, |a, b| if a.is_nan() { b } else { a.max(b) });
        passed.push(format!("{} {worst} {}", q.name, q.bounds()));
    }
    GateReading::Pass(passed.join("; "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(replicas: i64, strategy: Value, dependents: Value) -> WorkloadMigrationSpec {
        serde_json::from_value(json!({
            "requestId": "r", "sourceCluster": "a", "targetCluster": "b",
            "targetNamespace": "apps", "deadline": "2099-01-01T00:00:00Z", "role": "Target",
            "nonce": "n", "strategy": strategy, "dependents": dependents,
            "workload": {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"}, "spec": {"replicas": replicas}},
        }))
        .unwrap()
    }

    #[test]
    fn steps_grow_the_target_to_every_replica() {
        let p = plan(&spec(
            10,
            json!({"type": "Progressive", "step": 3}),
            json!([]),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(p.levels, vec![3, 6, 9, 10]);
        assert_eq!((p.level(0), p.level(2), p.source_at(2)), (0, 6, 4));
        let p = plan(&spec(
            4,
            json!({"type": "Progressive", "step": "50%", "pause": "30s"}),
            json!([]),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(p.levels, vec![2, 4]);
        assert_eq!(p.pause, Duration::from_secs(30));
    }

    #[test]
    fn all_at_once_has_no_plan() {
        assert_eq!(plan(&spec(3, json!(null), json!([]))), Ok(None));
        assert_eq!(
            plan(&spec(3, json!({"type": "AllAtOnce"}), json!([]))),
            Ok(None)
        );
    }

    #[test]
    fn min_available_comes_from_the_budget_then_the_rollout() {
        let progressive = json!({"type": "Progressive"});
        let with = |deps: Value| {
            plan(&spec(8, progressive.clone(), deps))
                .unwrap()
                .unwrap()
                .min_available
        };
        let pdb = |s: Value| json!([{"kind": "PodDisruptionBudget", "spec": s}]);
        assert_eq!(with(pdb(json!({"minAvailable": "60%"}))), 5);
        assert_eq!(with(pdb(json!({"maxUnavailable": 1}))), 7);
        assert_eq!(with(json!([])), 6, "25% of 8 unavailable, rounded down");
        let explicit = json!({"type": "Progressive", "minAvailable": 3});
        assert_eq!(
            plan(&spec(8, explicit, json!([])))
                .unwrap()
                .unwrap()
                .min_available,
            3
        );
    }

    #[test]
    fn a_strategy_the_receiver_cannot_follow_is_refused_by_field() {
        let refused = |strategy: Value| plan(&spec(500, strategy, json!([]))).unwrap_err();
        let too_many = refused(json!({"type": "Progressive", "step": 1}));
        assert_eq!(too_many.reason, reasons::INVALID_STRATEGY);
        assert!(
            too_many.message.contains("spec.strategy.step"),
            "{too_many:?}"
        );
        let bad_pause = refused(json!({"type": "Progressive", "pause": "soon"}));
        assert!(
            bad_pause.message.contains("spec.strategy.pause"),
            "{bad_pause:?}"
        );
        let unbounded = refused(json!({"type": "Progressive",
            "gate": [{"name": "e", "query": "up"}]}));
        assert!(unbounded.message.contains("gate[0].below"), "{unbounded:?}");
        let stray = json!({"type": "AllAtOnce", "pause": "1s"});
        assert_eq!(
            plan(&spec(3, stray, json!([]))),
            Ok(None),
            "an all-at-once move has no steps to follow, whatever else it says"
        );
    }

    struct Fixed(Vec<f64>);

    impl GateMetrics for Fixed {
        fn values<'a>(
            &'a self,
            _: &'a str,
            query: &'a str,
        ) -> BoxFuture<'a, Result<Vec<f64>, String>> {
            assert!(query.contains("apps") && query.contains("web"), "{query}");
            Box::pin(async move { Ok(self.0.clone()) })
        }
    }

    #[tokio::test]
    async fn the_gate_passes_waits_or_fails_on_what_prometheus_returns() {
        let gate = vec![GateQuery {
            name: "error-ratio".into(),
            query: r#"errors{namespace="$namespace",deployment="$workload"}"#.into(),
            below: Some(0.01),
            above: None,
        }];
        let read = |values: Vec<f64>| {
            let gate = gate.clone();
            async move { read_gate(Some(&Fixed(values)), "b", "apps", "web", &gate).await }
        };
        assert!(matches!(read(vec![0.001]).await, GateReading::Pass(_)));
        assert!(matches!(read(vec![]).await, GateReading::Wait(_)));
        let GateReading::Fail(why) = read(vec![0.001, 0.2]).await else {
            panic!("a value out of bounds fails the gate");
        };
        assert!(why.contains("0.2") && why.contains("below 0.01"), "{why}");
        assert!(matches!(
            read_gate(None, "b", "apps", "web", &gate).await,
            GateReading::Fail(_)
        ));
    }
}
