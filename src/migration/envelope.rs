//! The signed envelope of the protocol: what each signature covers, and
//! the one place the protocol signs and verifies (with `trust`'s keys).
//!
//! Three messages, each under its own `trust` context so that none can be
//! replayed as another: the request (the sender's spec, role included, so a
//! request can never pass for a mirror), the intent, and the receiver's
//! status. Every one binds the request id and the request's nonce, so a
//! signature from one request cannot be moved to another.
//!
//! This file must never treat a message as verified without a good
//! signature by a listed key, and never reads a clock: callers pass `now`.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;
use serde_json::Value;

use super::sealed;
use crate::crd::{
    AppliedObject, DataHooks, HookRun, Intent, IntentAction, MigrationPhase, MigrationRole,
    MigrationStrategy, PartialMove, PolicyRef, SourceAction, StepProgress, WorkloadMigration,
    WorkloadMigrationSpec, WorkloadMigrationStatus,
};
use crate::trust::{self, ClusterKeys, PublicKeys, TrustError, context};

/// How far a mirror's `issuedAt` may be from the server-set
/// creationTimestamp, and a request's from the receiver's clock.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(120);

/// This cluster's keys, shared by the sender and the receiver and set once
/// they are loaded (a context without keys signs and verifies nothing).
#[derive(Clone, Default)]
pub struct KeyRing(Arc<RwLock<Option<Arc<ClusterKeys>>>>);

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing")
            .field("key_id", &self.get().map(|k| k.key_id().to_owned()))
            .finish()
    }
}

impl KeyRing {
    /// A ring holding `keys`.
    pub fn new(keys: ClusterKeys) -> Self {
        let ring = Self::default();
        ring.set(keys);
        ring
    }

    /// Replaces the keys (after loading or a rotation).
    pub fn set(&self, keys: ClusterKeys) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(keys));
    }

    /// The keys, once loaded.
    pub fn get(&self) -> Option<Arc<ClusterKeys>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What a request's signature covers: the whole spec but the intent and
/// the signature itself, with each Secret's sealed data covered through its
/// digest, so the receiver can clear the ciphertext once it has created the
/// Secret and the request still verifies.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RequestContent<'a> {
    request_id: &'a str,
    source_cluster: &'a str,
    target_cluster: &'a str,
    target_namespace: &'a str,
    role: MigrationRole,
    workload: &'a Value,
    config_maps: &'a [Value],
    /// The Secrets without their sealed data: each one's `sealedDigest`
    /// stands for it (see `sealed.rs`).
    secrets: Vec<Value>,
    /// Absent when empty, so that a request without dependents signs as it
    /// did before the field existed.
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    dependents: &'a [Value],
    /// Absent for a move without claims, which signs as it always did.
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    claims: &'a [Value],
    /// Absent for a move without hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    hooks: Option<&'a DataHooks>,
    source_action: SourceAction,
    /// Absent for an all-at-once move, which signs as it always did.
    #[serde(skip_serializing_if = "Option::is_none")]
    strategy: Option<&'a MigrationStrategy>,
    /// Absent for a move of every replica.
    #[serde(skip_serializing_if = "Option::is_none")]
    partial: Option<PartialMove>,
    deadline: &'a Time,
    dry_run: bool,
    policy: Option<&'a PolicyRef>,
    hourly_savings: Option<f64>,
    nonce: &'a str,
    issued_at: Option<&'a Time>,
}

fn request_content(spec: &WorkloadMigrationSpec) -> RequestContent<'_> {
    RequestContent {
        request_id: &spec.request_id,
        source_cluster: &spec.source_cluster,
        target_cluster: &spec.target_cluster,
        target_namespace: &spec.target_namespace,
        role: spec.role,
        workload: &spec.workload,
        config_maps: &spec.config_maps,
        secrets: sealed::without_sealed_data(&spec.secrets),
        dependents: &spec.dependents,
        claims: &spec.claims,
        hooks: spec.hooks.as_ref(),
        source_action: spec.source_action,
        strategy: spec.strategy.as_ref(),
        partial: spec.partial,
        deadline: &spec.deadline,
        dry_run: spec.dry_run,
        policy: spec.policy.as_ref(),
        hourly_savings: spec.hourly_savings,
        nonce: &spec.nonce,
        issued_at: spec.issued_at.as_ref(),
    }
}

/// What an intent's signature covers.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IntentContent<'a> {
    request_id: &'a str,
    nonce: &'a str,
    action: IntentAction,
    sequence: i64,
    /// Absent unless a progressive move names its step.
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<i32>,
}

/// What a status signature covers: what the sender acts on.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusContent<'a> {
    request_id: &'a str,
    nonce: &'a str,
    phase: MigrationPhase,
    reason: Option<&'a str>,
    observed_intent: Option<i64>,
    applied: &'a [AppliedObject],
    /// The target's side of a progressive move; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<TargetProgress>,
    /// The import hook's run; absent for a move without one.
    #[serde(skip_serializing_if = "<[HookRun]>::is_empty")]
    hooks: &'a [HookRun],
}

/// The part of [`StepProgress`] the receiver vouches for.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TargetProgress {
    step: i32,
    steps: i32,
    target_replicas: i32,
    ready_replicas: i32,
}

impl From<&StepProgress> for TargetProgress {
    fn from(p: &StepProgress) -> Self {
        TargetProgress {
            step: p.step,
            steps: p.steps,
            target_replicas: p.target_replicas,
            ready_replicas: p.ready_replicas,
        }
    }
}

fn status_content<'a>(
    spec: &'a WorkloadMigrationSpec,
    status: &'a WorkloadMigrationStatus,
) -> StatusContent<'a> {
    StatusContent {
        request_id: &spec.request_id,
        nonce: &spec.nonce,
        phase: status.phase,
        reason: status.reason.as_deref(),
        observed_intent: status.observed_intent,
        applied: &status.applied,
        progress: status.progress.as_ref().map(TargetProgress::from),
        hooks: &status.hooks,
    }
}

/// A fresh nonce: 16 random bytes, hex.
pub fn nonce() -> Result<String, TrustError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| TrustError::malformed("nonce", "no randomness available"))?;
    Ok(hex::encode(bytes))
}

/// Signs `spec` (its role included) in place.
pub fn sign_request(
    keys: &ClusterKeys,
    spec: &mut WorkloadMigrationSpec,
) -> Result<(), TrustError> {
    spec.signature = Some(keys.sign(context::REQUEST, &request_content(spec))?);
    Ok(())
}

/// Verifies that one of `keys` signed `spec` as it is: the signature, and
/// each Secret's sealed data, where it is still present, against the digest
/// the signature covers.
pub fn verify_request(keys: &[PublicKeys], spec: &WorkloadMigrationSpec) -> Result<(), TrustError> {
    trust::verify(
        keys,
        context::REQUEST,
        &request_content(spec),
        spec.signature.as_ref(),
    )?;
    sealed::verify_sealed_data(spec)
}

/// A signed intent of `spec`'s request.
pub fn signed_intent(
    keys: &ClusterKeys,
    spec: &WorkloadMigrationSpec,
    action: IntentAction,
    sequence: i64,
    step: Option<i32>,
) -> Result<Intent, TrustError> {
    let content = IntentContent {
        request_id: &spec.request_id,
        nonce: &spec.nonce,
        action,
        sequence,
        step,
    };
    Ok(Intent {
        action,
        sequence,
        step,
        signature: Some(keys.sign(context::INTENT, &content)?),
    })
}

/// Verifies that one of `keys` signed `intent` for `spec`'s request.
pub(crate) fn verify_intent(
    keys: &[PublicKeys],
    spec: &WorkloadMigrationSpec,
    intent: &Intent,
) -> Result<(), TrustError> {
    let content = IntentContent {
        request_id: &spec.request_id,
        nonce: &spec.nonce,
        action: intent.action,
        sequence: intent.sequence,
        step: intent.step,
    };
    trust::verify(keys, context::INTENT, &content, intent.signature.as_ref())
}

/// Signs `status` of `spec`'s request in place.
pub(crate) fn sign_status(
    keys: &ClusterKeys,
    spec: &WorkloadMigrationSpec,
    status: &mut WorkloadMigrationStatus,
) -> Result<(), TrustError> {
    let signature = keys.sign(context::STATUS, &status_content(spec, status))?;
    status.signature = Some(signature);
    Ok(())
}

/// Verifies that one of `keys` signed the status of `wm` as it is.
pub(crate) fn verify_status(keys: &[PublicKeys], wm: &WorkloadMigration) -> Result<(), TrustError> {
    let status = wm.status.clone().unwrap_or_default();
    trust::verify(
        keys,
        context::STATUS,
        &status_content(&wm.spec, &status),
        status.signature.as_ref(),
    )
}

/// Verifies a local mirror: signed by this cluster's own keys as a
/// `Source`, and issued when the object was created (a re-created old
/// mirror carries an old `issuedAt` on a new object).
pub(crate) fn verify_mirror(keys: &ClusterKeys, wm: &WorkloadMigration) -> Result<(), TrustError> {
    verify_request(&keys.public_keys(), &wm.spec)?;
    let issued = wm
        .spec
        .issued_at
        .as_ref()
        .map(|t| t.0)
        .ok_or_else(|| TrustError::malformed("spec.issuedAt", "is missing"))?;
    let created = wm
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .ok_or_else(|| TrustError::malformed("metadata.creationTimestamp", "is missing"))?;
    let skew = jiff::SignedDuration::try_from(MAX_CLOCK_SKEW).unwrap_or_default();
    if (created - skew) > issued || issued > (created + skew) {
        return Err(TrustError::malformed(
            "spec.issuedAt",
            format!("{issued} is not when the object was created ({created})"),
        ));
    }
    Ok(())
}

/// The refusal reason of a trust failure.
pub(crate) fn reason(error: &TrustError) -> &'static str {
    match error {
        TrustError::Unsigned => "Unsigned",
        TrustError::UnknownKey { .. } => "UnknownKey",
        TrustError::Expired { .. } | TrustError::NotYetValid { .. } => "Expired",
        _ => "BadSignature",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(dependents: Value) -> WorkloadMigrationSpec {
        serde_json::from_value(json!({
            "requestId": "r", "sourceCluster": "a", "targetCluster": "b",
            "targetNamespace": "apps", "deadline": "2099-01-01T00:00:00Z", "role": "Target",
            "nonce": "n", "workload": {"kind": "Deployment", "metadata": {"name": "web"}},
            "dependents": dependents,
        }))
        .unwrap()
    }

    #[test]
    fn the_signature_covers_every_dependent() {
        let keys = ClusterKeys::generate().unwrap();
        let mut signed = spec(json!([{"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}}}]));
        sign_request(&keys, &mut signed).unwrap();
        verify_request(&keys.public_keys(), &signed).unwrap();
        let mut widened = signed.clone();
        widened.dependents[0]["spec"]["type"] = "LoadBalancer".into();
        assert!(verify_request(&keys.public_keys(), &widened).is_err());
        let mut added = signed.clone();
        added
            .dependents
            .push(json!({"apiVersion": "v1", "kind": "ServiceAccount"}));
        assert!(verify_request(&keys.public_keys(), &added).is_err());
        let mut dropped = signed;
        dropped.dependents.clear();
        assert!(verify_request(&keys.public_keys(), &dropped).is_err());
    }

    #[test]
    fn an_intent_signs_its_step_and_a_status_its_progress() {
        let keys = ClusterKeys::generate().unwrap();
        let request = spec(json!([]));
        let intent = signed_intent(&keys, &request, IntentAction::Proceed, 2, Some(2)).unwrap();
        verify_intent(&keys.public_keys(), &request, &intent).unwrap();
        let mut skipped = intent.clone();
        skipped.step = Some(3);
        assert!(verify_intent(&keys.public_keys(), &request, &skipped).is_err());

        let mut wm = WorkloadMigration::new("web", request);
        let mut status = WorkloadMigrationStatus {
            progress: Some(StepProgress {
                step: 1,
                steps: 3,
                target_replicas: 1,
                ready_replicas: 1,
                ..StepProgress::default()
            }),
            ..WorkloadMigrationStatus::default()
        };
        sign_status(&keys, &wm.spec, &mut status).unwrap();
        wm.status = Some(status.clone());
        verify_status(&keys.public_keys(), &wm).unwrap();
        if let Some(p) = status.progress.as_mut() {
            p.ready_replicas = 3;
        }
        wm.status = Some(status);
        assert!(
            verify_status(&keys.public_keys(), &wm).is_err(),
            "a peer's claim of more ready replicas must not verify"
        );
    }

    #[test]
    fn a_request_without_dependents_signs_as_it_did_before_they_existed() {
        let content = serde_json::to_value(request_content(&spec(json!([])))).unwrap();
        assert!(content.get("dependents").is_none(), "{content}");
    }
}
