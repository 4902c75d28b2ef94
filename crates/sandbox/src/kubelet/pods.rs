//! Pods of the realistic mode: each moves from `ContainerCreating` to
//! running (ready, never ready, or ready in turns) or to image-pull errors,
//! by the time since the kubelet first saw it and the rules for its
//! images. Whatever created the pod (a workload here, or a user), its
//! status is written only when it differs from what time has led to.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::settings::{Effective, Pull, Readiness};
use super::{Clocks, KubeletRules, PODS, earliest};
use crate::object::{is_deleting, meta_str, now};
use crate::store::State;

/// What a pass knows: the rules, the kubelet's delay, whether rollouts may
/// become ready at all, and the time it runs at.
pub(super) struct Context<'a> {
    pub(super) rules: &'a KubeletRules,
    pub(super) delay: Duration,
    pub(super) ready: bool,
    pub(super) now: Instant,
}

impl Context<'_> {
    /// The rules' outcome for a pod template or pod `spec`.
    pub(super) fn effective(&self, spec: Option<&Value>) -> Effective {
        let images = containers(spec).filter_map(|c| c.get("image").and_then(Value::as_str));
        let mut effective = self.rules.effective(images, self.delay);
        if !self.ready {
            effective.readiness = Readiness::Never;
        }
        effective
    }
}

fn containers(spec: Option<&Value>) -> impl Iterator<Item = &Value> {
    spec.and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Where a pod is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Creating,
    PullError(&'static str),
    Running { ready: bool },
}

/// The stage `elapsed` after the pod was first seen, and how long until
/// the next one (`None`: it stays).
fn stage(effective: &Effective, elapsed: Duration) -> (Stage, Option<Duration>) {
    let start = effective.start_delay;
    if elapsed < start {
        return (Stage::Creating, Some(start - elapsed));
    }
    // Turns of pull errors and flaky readiness last the start delay, and
    // never less than 100 ms, so a zero delay cannot spin.
    let turn = start.max(Duration::from_millis(100));
    let turns = (elapsed - start).as_nanos() / turn.as_nanos();
    let left = turn - Duration::from_nanos(((elapsed - start).as_nanos() % turn.as_nanos()) as u64);
    if effective.pull == Pull::Fail {
        let reason = if turns.is_multiple_of(2) {
            "ErrImagePull"
        } else {
            "ImagePullBackOff"
        };
        return (Stage::PullError(reason), Some(left));
    }
    match effective.readiness {
        Readiness::Ready => (Stage::Running { ready: true }, None),
        Readiness::Never => (Stage::Running { ready: false }, None),
        Readiness::Flaky => (
            Stage::Running {
                ready: turns.is_multiple_of(2),
            },
            Some(left),
        ),
    }
}

/// Move every pod on; when the next one is due to change.
pub(super) fn advance(
    state: &mut State,
    context: &Context,
    clocks: &mut Clocks,
) -> Option<Instant> {
    let pods: Vec<Value> = state
        .range(PODS, None, None)
        .map(|(_, pod)| (**pod).clone())
        .filter(|pod| !is_deleting(pod))
        .collect();
    let mut wake = None;
    for pod in pods {
        let since = clocks.since(meta_str(&pod, "uid"));
        let effective = context.effective(pod.get("spec"));
        let (stage, next) = stage(&effective, context.now.saturating_duration_since(since));
        wake = earliest(wake, next.map(|n| context.now + n));
        let old = pod.get("status").cloned().unwrap_or(json!({}));
        let ip = match (stage, old.get("podIP").and_then(Value::as_str)) {
            (Stage::Running { .. }, Some(ip)) => Some(ip.to_string()),
            (Stage::Running { .. }, None) => Some(clocks.ip()),
            _ => None,
        };
        let desired = status(&pod, stage, ip.as_deref(), &old);
        if timeless(&old) != timeless(&desired) {
            let mut updated = pod;
            updated["status"] = desired;
            state.put(PODS, updated);
        }
    }
    wake
}

/// Whether a pod is Ready.
pub(super) fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The pod status of `stage`, keeping the times `old` has for what did not
/// change.
fn status(pod: &Value, stage: Stage, ip: Option<&str>, old: &Value) -> Value {
    let time = now();
    let kept = |pointer: &str| {
        old.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or(&time)
            .to_string()
    };
    let (phase, running, ready) = match stage {
        Stage::Creating | Stage::PullError(_) => ("Pending", false, false),
        Stage::Running { ready } => ("Running", true, ready),
    };
    let flag = |b: bool| if b { "True" } else { "False" };
    let condition = |type_: &str, status: bool| {
        let same = old
            .get("conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c["type"] == type_ && c["status"] == flag(status));
        let since = same
            .and_then(|c| c.get("lastTransitionTime"))
            .cloned()
            .unwrap_or(json!(time));
        let mut c = json!({"type": type_, "status": flag(status), "lastProbeTime": null, "lastTransitionTime": since});
        if !status && (type_ == "Ready" || type_ == "ContainersReady") {
            c["reason"] = json!("ContainersNotReady");
        }
        c
    };
    let container_statuses: Vec<Value> = containers(pod.get("spec"))
        .map(|c| {
            let state = match stage {
                Stage::Creating => json!({"waiting": {"reason": "ContainerCreating"}}),
                Stage::PullError(reason) => {
                    json!({"waiting": {"reason": reason, "message": pull_message(reason, c)}})
                }
                Stage::Running { .. } => json!({"running": {"startedAt": kept("/startTime")}}),
            };
            json!({
                "name": c.get("name").cloned().unwrap_or(json!("")),
                "image": c.get("image").cloned().unwrap_or(json!("")),
                "imageID": "",
                "ready": ready,
                "started": running,
                "restartCount": 0,
                "state": state,
            })
        })
        .collect();
    let mut status = json!({
        "phase": phase,
        "conditions": [
            condition("PodReadyToStartContainers", running),
            condition("Initialized", true),
            condition("Ready", ready),
            condition("ContainersReady", ready),
            condition("PodScheduled", true),
        ],
        "hostIP": "10.0.0.2",
        "hostIPs": [{"ip": "10.0.0.2"}],
        "startTime": kept("/startTime"),
        "containerStatuses": container_statuses,
        "qosClass": "BestEffort",
    });
    if let Some(ip) = ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    status
}

fn pull_message(reason: &str, container: &Value) -> String {
    let image = container.get("image").and_then(Value::as_str).unwrap_or("");
    if reason == "ErrImagePull" {
        format!("failed to pull and unpack image \"{image}\": not found (sandbox kubelet rule)")
    } else {
        format!("Back-off pulling image \"{image}\"")
    }
}

/// A status without its times, to tell whether anything but time changed.
pub(super) fn timeless(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        "lastTransitionTime"
                            | "lastUpdateTime"
                            | "lastProbeTime"
                            | "startTime"
                            | "startedAt"
                    )
                })
                .map(|(k, v)| (k.clone(), timeless(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(timeless).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::settings::Exit;

    fn effective(readiness: Readiness, pull: Pull) -> Effective {
        Effective {
            start_delay: Duration::from_millis(500),
            readiness,
            pull,
            exit: Exit::Success,
        }
    }

    #[test]
    fn pods_start_after_the_delay_then_settle_or_alternate() {
        let ms = Duration::from_millis;
        let ready = effective(Readiness::Ready, Pull::Ok);
        assert_eq!(stage(&ready, ms(100)), (Stage::Creating, Some(ms(400))));
        assert_eq!(
            stage(&ready, ms(500)),
            (Stage::Running { ready: true }, None)
        );
        let flaky = effective(Readiness::Flaky, Pull::Ok);
        assert_eq!(
            stage(&flaky, ms(600)),
            (Stage::Running { ready: true }, Some(ms(400)))
        );
        assert_eq!(stage(&flaky, ms(1000)).0, Stage::Running { ready: false });
        assert_eq!(stage(&flaky, ms(1500)).0, Stage::Running { ready: true });
        let broken = effective(Readiness::Ready, Pull::Fail);
        assert_eq!(stage(&broken, ms(500)).0, Stage::PullError("ErrImagePull"));
        assert_eq!(
            stage(&broken, ms(1000)).0,
            Stage::PullError("ImagePullBackOff")
        );
        let instant = Effective {
            start_delay: Duration::ZERO,
            ..broken
        };
        assert_eq!(
            stage(&instant, ms(150)),
            (Stage::PullError("ImagePullBackOff"), Some(ms(50)))
        );
    }
}
