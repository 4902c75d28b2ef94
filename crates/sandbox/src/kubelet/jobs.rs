//! Jobs of the realistic mode: a Job is active for the start delay of its
//! images, then completes (`succeeded`, `SuccessCriteriaMet` and
//! `Complete`) or, when a rule fails its pull or exit, fails
//! (`failed`, `FailureTarget` and `Failed` with `BackoffLimitExceeded`).
//! No pods are made for Jobs. A suspended or finished Job is left alone.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::pods::{Context, timeless};
use super::settings::{Exit, Pull};
use super::{Clocks, JOBS, earliest};
use crate::object::{is_deleting, meta_str, now};
use crate::store::State;

/// Move every Job on; when the next one is due to end.
pub(super) fn run(state: &mut State, context: &Context, clocks: &mut Clocks) -> Option<Instant> {
    let jobs: Vec<Value> = state
        .range(JOBS, None, None)
        .map(|(_, j)| (**j).clone())
        .filter(|j| !is_deleting(j) && !finished(j))
        .filter(|j| j.pointer("/spec/suspend").and_then(Value::as_bool) != Some(true))
        .collect();
    let mut wake = None;
    for job in jobs {
        let since = clocks.since(meta_str(&job, "uid"));
        let effective = context.effective(job.pointer("/spec/template/spec"));
        let elapsed = context.now.saturating_duration_since(since);
        let old = job.get("status").cloned().unwrap_or(json!({}));
        let time = now();
        let start = old.get("startTime").cloned().unwrap_or(json!(time));
        let count = |pointer: &str, default: i64| {
            job.pointer(pointer)
                .and_then(Value::as_i64)
                .unwrap_or(default)
        };
        let desired = if elapsed < effective.start_delay {
            wake = earliest(wake, Some(since + effective.start_delay));
            json!({"startTime": start, "active": count("/spec/parallelism", 1).min(count("/spec/completions", 1)),
                "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}})
        } else if effective.pull == Pull::Fail || effective.exit == Exit::Fail {
            let condition = |type_: &str| {
                json!({"type": type_, "status": "True", "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit", "lastProbeTime": time, "lastTransitionTime": time})
            };
            json!({"startTime": start, "failed": count("/spec/backoffLimit", 6) + 1, "active": 0, "ready": 0, "terminating": 0,
                "uncountedTerminatedPods": {}, "conditions": [condition("FailureTarget"), condition("Failed")]})
        } else {
            let condition = |type_: &str| {
                json!({"type": type_, "status": "True", "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods", "lastProbeTime": time, "lastTransitionTime": time})
            };
            json!({"startTime": start, "completionTime": time, "succeeded": count("/spec/completions", 1), "active": 0,
                "ready": 0, "terminating": 0, "uncountedTerminatedPods": {},
                "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]})
        };
        if timeless(&old) != timeless(&desired) {
            let mut updated = job;
            updated["status"] = desired;
            state.put(JOBS, updated);
        }
    }
    wake
}

/// Whether the Job has a `Complete` or `Failed` condition.
fn finished(job: &Value) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
}
