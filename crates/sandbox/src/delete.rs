//! Deletion as the API documents it: `DeleteOptions` (`propagationPolicy`,
//! the deprecated `orphanDependents`, `preconditions`, `dryRun`), the answer
//! a delete gets, the finalizers a deletion adds (`orphan`,
//! `foregroundDeletion`), and when an update finishes a deletion. (What a
//! write may do to finalizers and ownerReferences is `meta_rules.rs`.)
//!
//! It marks or removes only the object it is asked to. What then happens to
//! dependents and to a namespace's content is decided by the garbage
//! collector (`gc.rs`) and the namespace controller (`namespaces.rs`) from the
//! events this leaves behind, never here.

use std::sync::Arc;

use http::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ctx::{Body, Ctx};
use crate::error::{ApiError, ApiResult, Cause};
use crate::namespaces;
use crate::object::{has_finalizers, is_deleting, meta_mut, meta_str, now};
use crate::registry::ResourceType;
use crate::store::{CRD_KEY, Event, NAMESPACE_KEY, State};
use crate::table::ListMeta;

/// The finalizer that makes the garbage collector orphan the dependents.
pub(crate) const ORPHAN: &str = "orphan";
/// The finalizer that holds an owner until its blocking dependents are gone.
pub(crate) const FOREGROUND: &str = "foregroundDeletion";

/// `DeleteOptions.propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Propagation {
    Foreground,
    Background,
    Orphan,
}

/// What a delete request chose for the dependents, if anything; what it
/// leaves open is decided by the finalizers the object already has.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Policy {
    pub(crate) propagation: Option<Propagation>,
    /// The deprecated `orphanDependents`.
    pub(crate) orphan_dependents: Option<bool>,
}

impl Policy {
    pub(crate) fn explicit(propagation: Propagation) -> Self {
        Self {
            propagation: Some(propagation),
            orphan_dependents: None,
        }
    }
}

/// A validated `DeleteOptions`.
struct Options {
    policy: Policy,
    uid: Option<String>,
    resource_version: Option<String>,
    dry_run: bool,
}

/// `DeleteOptions` as sent; unknown fields (`gracePeriodSeconds`, …) are
/// ignored because no kind the sandbox serves deletes gracefully.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawOptions {
    propagation_policy: Option<String>,
    orphan_dependents: Option<bool>,
    dry_run: Option<Vec<String>>,
    preconditions: Option<RawPreconditions>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawPreconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

/// What a delete did to the object.
pub(crate) enum Outcome {
    /// Removed from storage; its last state.
    Gone(Value),
    /// Still there, being deleted (finalizers, a terminating namespace).
    Pending(Value),
}

impl Ctx<'_> {
    /// The options from the body or, when there is none, from the query (as
    /// kube-apiserver reads them: never both).
    fn delete_options(&self) -> ApiResult<Options> {
        let raw = if self.call.body.is_empty() {
            let mut raw = json!({});
            if let Some(policy) = self.call.param("propagationPolicy") {
                raw["propagationPolicy"] = json!(policy);
            }
            if let Some(orphan) = self.call.param("orphanDependents") {
                let orphan: bool = orphan.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid orphanDependents: {orphan}"))
                })?;
                raw["orphanDependents"] = json!(orphan);
            }
            if let Some(dry_run) = self.call.param("dryRun") {
                raw["dryRun"] = json!([dry_run]);
            }
            raw
        } else {
            self.body()?
        };
        let raw: RawOptions = serde_json::from_value(raw)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid: {e}")))?;
        validate(raw)
    }

    pub(crate) fn delete(&self) -> ApiResult<Response<Body>> {
        let options = self.delete_options()?;
        let key = self.rt.key();
        let outcome = self.cluster.write(|state| {
            let current = state
                .get(&key, self.namespace(), self.name())
                .cloned()
                .ok_or_else(|| self.not_found())?;
            check_preconditions(&self.rt, &current, &options)?;
            if key == NAMESPACE_KEY {
                namespaces::admit_delete(self.name())?;
            }
            delete_object(
                state,
                &key,
                self.namespace(),
                self.name(),
                options.policy,
                options.dry_run,
            )
            .ok_or_else(|| self.not_found())
        })?;
        Ok(match outcome {
            Outcome::Pending(object) => {
                // kube-apiserver answers 202 only to the deprecated way of
                // asking for cascading deletion; every other pending delete is 200.
                let code = if options.policy.orphan_dependents == Some(false) {
                    StatusCode::ACCEPTED
                } else {
                    StatusCode::OK
                };
                self.object_response(code, &object, None)
            }
            Outcome::Gone(object) if returns_deleted_object(&self.rt) => {
                self.object_response(StatusCode::OK, &object, None)
            }
            // A Status in the negotiated media type (protobuf for a
            // built-in kind when asked), as kube-apiserver's handler answers.
            Outcome::Gone(object) => {
                self.value_response(StatusCode::OK, &deleted_status(&self.rt, &object))
            }
        })
    }

    pub(crate) fn delete_collection(&self) -> ApiResult<Response<Body>> {
        // kube-apiserver serves no deletecollection for namespaces: one
        // request must not take `default` and `kube-system` with it.
        if self.rt.key() == NAMESPACE_KEY {
            return Err(ApiError::method_not_allowed("DELETE"));
        }
        let options = self.delete_options()?;
        let selector = self.selector()?;
        let key = self.rt.key();
        let namespace = self
            .target
            .namespace
            .as_deref()
            .filter(|_| self.rt.namespaced);
        let (listed, rv) = self.cluster.write(|state| -> ApiResult<_> {
            let rv = state.resource_version();
            let listed: Vec<Arc<Value>> = state
                .range(&key, namespace, None)
                .filter(|(_, o)| selector.matches(o))
                .map(|(_, o)| o.clone())
                .collect();
            for object in &listed {
                check_preconditions(&self.rt, object, &options)?;
                let (ns, name) = (meta_str(object, "namespace"), meta_str(object, "name"));
                delete_object(state, &key, ns, name, options.policy, options.dry_run);
            }
            Ok((listed, rv))
        })?;
        // As kube-apiserver: the list as it was before the deletion.
        let meta = ListMeta {
            resource_version: rv.to_string(),
            continue_token: None,
        };
        Ok(self.list_response(&listed, &meta))
    }
}

/// `ValidateDeleteOptions`: a 422 on `DeleteOptions.meta.k8s.io ""`.
fn validate(raw: RawOptions) -> ApiResult<Options> {
    let mut causes = Vec::new();
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    if let (Some(_), Some(policy)) = (raw.orphan_dependents, &raw.propagation_policy) {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "propagationPolicy".into(),
            message: format!(
                "Invalid value: {}: orphanDependents and deletionPropagation cannot be both set",
                quoted(policy)
            ),
        });
    }
    let propagation = match raw.propagation_policy.as_deref() {
        None => None,
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Background") => Some(Propagation::Background),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(other) => {
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: "propagationPolicy".into(),
                message: format!(
                    "Unsupported value: {}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
                    quoted(other)
                ),
            });
            None
        }
    };
    let dry_run = raw.dry_run.unwrap_or_default();
    if dry_run.iter().any(|v| v != "All") {
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: "dryRun".into(),
            message: format!(
                "Unsupported value: {}: supported values: \"All\"",
                serde_json::to_string(&dry_run).unwrap_or_default()
            ),
        });
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            &causes,
        ));
    }
    let preconditions = raw.preconditions.unwrap_or_default();
    Ok(Options {
        policy: Policy {
            propagation,
            orphan_dependents: raw.orphan_dependents,
        },
        uid: preconditions.uid,
        resource_version: preconditions.resource_version,
        dry_run: !dry_run.is_empty(),
    })
}

/// `preconditions` must match the stored object, or the delete is a 409 in
/// the words of the kind's storage (Namespaces and CRDs have their own).
fn check_preconditions(rt: &ResourceType, current: &Value, options: &Options) -> ApiResult<()> {
    let name = meta_str(current, "name");
    let checks = [
        ("UID", options.uid.as_deref(), meta_str(current, "uid")),
        (
            "ResourceVersion",
            options.resource_version.as_deref(),
            meta_str(current, "resourceVersion"),
        ),
    ];
    for (field, want, have) in checks {
        let Some(want) = want.filter(|want| *want != have) else {
            continue;
        };
        return Err(match rt.key().as_str() {
            NAMESPACE_KEY => ApiError::conflict(
                "",
                "namespaces",
                name,
                &format!(
                    "Precondition failed: {field} in precondition: {want}, {field} in object meta: {have}"
                ),
            ),
            CRD_KEY => ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "precondition failed: {field} in precondition: {want}, {field} in object meta: {have}"
                ),
            ),
            // The generic store names the kind, not the resource, here.
            _ if field == "UID" => ApiError::conflict(
                &rt.group,
                &rt.kind,
                name,
                &format!(
                    "the UID in the precondition ({want}) does not match the UID in record ({have}). The object might have been deleted and then recreated"
                ),
            ),
            _ => ApiError::conflict(
                &rt.group,
                &rt.kind,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({have}). The object might have been modified"
                ),
            ),
        });
    }
    Ok(())
}

/// Delete one object as the registry does: a Namespace first becomes
/// Terminating; an object left with finalizers (its own, or `orphan` /
/// `foregroundDeletion` added for `policy`) only gets a deletionTimestamp;
/// anything else is removed. `None` when the object does not exist.
pub(crate) fn delete_object(
    state: &mut State,
    resource: &str,
    namespace: &str,
    name: &str,
    policy: Policy,
    dry_run: bool,
) -> Option<Outcome> {
    let current = (**state.get(resource, namespace, name)?).clone();
    if resource == NAMESPACE_KEY
        && let Some(next) = namespaces::terminate(&current, policy)
    {
        return Some(Outcome::Pending(commit(
            state, resource, &current, next, dry_run,
        )));
    }
    let finalizers = finalizers_for(&current, policy);
    if finalizers.is_empty() {
        if dry_run {
            return Some(Outcome::Gone(current));
        }
        let event = state.remove(resource, current.clone());
        return Some(Outcome::Gone(
            event.map_or(current, |e| (*e.object).clone()),
        ));
    }
    let mut next = current.clone();
    if let Some(meta) = meta_mut(&mut next) {
        // The generation moves once, when the deletion starts, so that
        // controllers watching observedGeneration notice it.
        if !meta.contains_key("deletionTimestamp") {
            if let Some(generation) = meta.get("generation").and_then(Value::as_i64)
                && generation > 0
            {
                meta.insert("generation".into(), json!(generation + 1));
            }
            meta.insert("deletionTimestamp".into(), json!(now()));
        }
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
        meta.insert("finalizers".into(), json!(finalizers));
    }
    Some(Outcome::Pending(commit(
        state, resource, &current, next, dry_run,
    )))
}

/// Store `next` unless it is a dry run or changes nothing (a repeated
/// delete must not make a new version, or the controllers would loop).
fn commit(state: &mut State, resource: &str, current: &Value, next: Value, dry_run: bool) -> Value {
    if dry_run || next == *current {
        return next;
    }
    (*state.put(resource, next).object).clone()
}

/// The finalizers an object has once deleted with `policy`: its own, plus
/// `orphan` or `foregroundDeletion` as the options (first) or its existing
/// finalizers (then) decide. Background is the default.
fn finalizers_for(current: &Value, policy: Policy) -> Vec<String> {
    let existing = finalizers(current);
    let preset = existing
        .iter()
        .find(|f| *f == ORPHAN || *f == FOREGROUND)
        .map(String::as_str);
    let (orphan, foreground) = match (policy.orphan_dependents, policy.propagation) {
        (Some(orphan), _) => (orphan, false),
        (None, Some(p)) => (p == Propagation::Orphan, p == Propagation::Foreground),
        (None, None) => (preset == Some(ORPHAN), preset == Some(FOREGROUND)),
    };
    let mut next: Vec<String> = existing
        .iter()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .cloned()
        .collect();
    if orphan {
        next.push(ORPHAN.into());
    }
    if foreground {
        next.push(FOREGROUND.into());
    }
    fn as_set(list: &[String]) -> std::collections::BTreeSet<&String> {
        list.iter().collect()
    }
    if as_set(&next) == as_set(&existing) {
        existing
    } else {
        next
    }
}

/// `metadata.finalizers` as strings.
pub(crate) fn finalizers(object: &Value) -> Vec<String> {
    crate::object::strings_at(object, "/metadata/finalizers")
}

/// Whether an update leaves `object` finished with: being deleted and held
/// by nothing (for a Namespace, also nothing in `spec.finalizers`).
pub(crate) fn finalized(resource: &str, object: &Value) -> bool {
    is_deleting(object)
        && !has_finalizers(object)
        && (resource != NAMESPACE_KEY || namespaces::spec_finalizers(object).is_empty())
}

/// Store an update as the registry does: one that leaves a deleting object
/// with no finalizers removes it instead. `None` if the object was already
/// gone.
pub(crate) fn store(state: &mut State, resource: &str, object: Value) -> Option<Arc<Event>> {
    if finalized(resource, &object) {
        state.remove(resource, object)
    } else {
        Some(state.put(resource, object))
    }
}

/// Kinds whose storage answers a delete with the deleted object; every
/// other kind answers with a `Status` (kube-apiserver's `ReturnDeletedObject`).
fn returns_deleted_object(rt: &ResourceType) -> bool {
    rt.group.is_empty()
        && matches!(
            rt.plural.as_str(),
            "namespaces" | "services" | "serviceaccounts" | "pods"
        )
}

/// The `Status` a delete that removed the object answers with.
fn deleted_status(rt: &ResourceType, object: &Value) -> Value {
    let mut details = json!({
        "name": meta_str(object, "name"),
        "kind": rt.plural,
        "uid": meta_str(object, "uid"),
    });
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_finalizers(list: &[&str]) -> Value {
        json!({"metadata": {"name": "x", "finalizers": list}})
    }

    #[test]
    fn the_options_decide_the_gc_finalizers_before_the_existing_ones() {
        let cases = [
            (&[][..], Policy::default(), &[][..]),
            (
                &[],
                Policy::explicit(Propagation::Foreground),
                &[FOREGROUND][..],
            ),
            (
                &["a/b"],
                Policy::explicit(Propagation::Orphan),
                &["a/b", ORPHAN][..],
            ),
            (&[ORPHAN], Policy::default(), &[ORPHAN][..]),
            (
                &[ORPHAN],
                Policy::explicit(Propagation::Background),
                &[][..],
            ),
            (
                &[FOREGROUND],
                Policy::explicit(Propagation::Orphan),
                &[ORPHAN][..],
            ),
            (
                &[],
                Policy {
                    propagation: None,
                    orphan_dependents: Some(true),
                },
                &[ORPHAN][..],
            ),
            (
                &[ORPHAN],
                Policy {
                    propagation: None,
                    orphan_dependents: Some(false),
                },
                &[][..],
            ),
        ];
        for (existing, policy, want) in cases {
            let got = finalizers_for(&with_finalizers(existing), policy);
            assert_eq!(got, want, "{existing:?} with {policy:?}");
        }
    }

    #[test]
    fn delete_options_are_validated_in_the_api_servers_words() {
        let raw = RawOptions {
            propagation_policy: Some("Sideways".into()),
            dry_run: Some(vec!["Some".into()]),
            ..RawOptions::default()
        };
        let Err(error) = validate(raw) else {
            panic!("accepted")
        };
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: [propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\", dryRun: Unsupported value: [\"Some\"]: supported values: \"All\"]"
        );
    }
}
