//! Status conditions, shared by every Ferry resource.
//!
//! Invariant: a condition's `lastTransitionTime` changes only when its
//! `status` changes. Rewriting it on every reconcile would make every status
//! write a change, which wakes every watcher and feeds reconcile storms.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types used by Ferry's resources.
pub mod types {
    /// ClusterPeer: the peer's API server answered the last probe.
    pub const CONNECTED: &str = "Connected";
    /// Every resource: the object is valid and doing its job.
    pub const READY: &str = "Ready";
    /// MigrationPolicy: the module was fetched, its digest matched, it compiled.
    pub const MODULE_LOADED: &str = "ModuleLoaded";
    /// MigrationPolicy: cycles run but something is wrong (stale metrics, a
    /// module error, refused decisions).
    pub const DEGRADED: &str = "Degraded";
}

/// Condition reasons shared across controllers.
pub mod reasons {
    /// The spec breaks a rule the operator checks (see `validate_policy`).
    pub const INVALID_SPEC: &str = "InvalidSpec";
}

/// `"True"` or `"False"`.
pub fn status_str(status: bool) -> &'static str {
    if status { "True" } else { "False" }
}

/// A condition with the given fields; `lastTransitionTime` is `now`, and
/// [`set_condition`] replaces it with the old one when the status is unchanged.
pub fn new_condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: &Time,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status_str(status).to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation,
        last_transition_time: now.clone(),
    }
}

/// Sets `new` in `conditions`, replacing the condition of the same type.
///
/// `lastTransitionTime` becomes `now` when the condition is new or its status
/// changed; otherwise the old transition time is kept while reason, message
/// and observedGeneration are updated. Returns whether anything changed, so a
/// caller can skip a status write that would change nothing.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition, now: Time) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            new.last_transition_time = now;
            conditions.push(new);
            true
        }
        Some(old) => {
            new.last_transition_time = if old.status == new.status {
                old.last_transition_time.clone()
            } else {
                now
            };
            if *old == new {
                false
            } else {
                *old = new;
                true
            }
        }
    }
}

/// The condition of the given type, if any.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of the given type is present with status `"True"`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(jiff::Timestamp::from_second(seconds).unwrap())
    }

    fn ready(status: bool, reason: &str, message: &str) -> Condition {
        new_condition(types::READY, status, reason, message, Some(1), &at(0))
    }

    #[test]
    fn a_new_condition_gets_now_as_transition_time() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            ready(true, "Ok", ""),
            at(10)
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, at(10));
        assert_eq!(conditions[0].status, "True");
    }

    #[test]
    fn unchanged_status_keeps_the_transition_time_but_updates_the_rest() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, ready(false, "InvalidSpec", "a"), at(10));
        let changed = set_condition(&mut conditions, ready(false, "InvalidSpec", "b"), at(20));
        assert!(changed);
        assert_eq!(conditions[0].last_transition_time, at(10));
        assert_eq!(conditions[0].message, "b");
    }

    #[test]
    fn identical_condition_is_no_change() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, ready(true, "Ok", "fine"), at(10));
        let before = conditions.clone();
        assert!(!set_condition(
            &mut conditions,
            ready(true, "Ok", "fine"),
            at(99)
        ));
        assert_eq!(conditions, before);
    }

    #[test]
    fn changed_status_moves_the_transition_time() {
        let mut conditions = Vec::new();
        set_condition(&mut conditions, ready(true, "Ok", ""), at(10));
        assert!(set_condition(
            &mut conditions,
            ready(false, "InvalidSpec", "x"),
            at(30)
        ));
        assert_eq!(conditions[0].last_transition_time, at(30));
        assert_eq!(conditions[0].status, "False");
        assert_eq!(conditions[0].reason, "InvalidSpec");
    }

    #[test]
    fn other_types_are_left_alone() {
        let mut conditions = Vec::new();
        let loaded = new_condition(types::MODULE_LOADED, true, "Loaded", "", None, &at(0));
        set_condition(&mut conditions, loaded, at(5));
        set_condition(&mut conditions, ready(true, "Ok", ""), at(10));
        set_condition(&mut conditions, ready(false, "Bad", ""), at(20));
        assert_eq!(conditions.len(), 2);
        let loaded = find_condition(&conditions, types::MODULE_LOADED).unwrap();
        assert_eq!(loaded.last_transition_time, at(5));
        assert!(is_condition_true(&conditions, types::MODULE_LOADED));
        assert!(!is_condition_true(&conditions, types::READY));
        assert!(!is_condition_true(&conditions, types::DEGRADED));
    }
}
