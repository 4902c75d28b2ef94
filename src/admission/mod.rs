//! Admission of incoming workloads: what a receiver agrees to run for a
//! peer, judged by the receiver's own `ClusterPeer.spec.admission` only.
//!
//! [`review`] checks one request (the workload manifest and the
//! ConfigMaps, Secrets and ServiceAccounts travelling with it) against the
//! Pod Security Standards profile the receiver chose (`restricted` unless it
//! opted for less), Ferry's own rules (ServiceAccount and token, scheduling,
//! volumes, references, travelling objects, images) and the peer's caps.
//! [`review_dependents`] checks the Services, autoscalers, disruption
//! budgets and NetworkPolicies travelling beside it.
//! [`RateLimiter`] is the per-peer rate limit the receiver holds between
//! requests. The rules are documented for users in `docs/admission.md`.
//!
//! Pure: no client, no clock (the caller passes `now` and the peer's
//! current usage), no I/O. Every input is hostile: a wrong JSON type is a
//! refusal naming the field, never a panic and never "not set".

mod caps;
mod claims;
mod dependents;
mod image;
mod json;
mod objects;
mod pod;
mod pss;
mod rate;
mod rules;
mod selector;
mod violation;
mod volumes;

#[cfg(test)]
mod tests;

use serde_json::Value;

pub use dependents::{DEPENDENT_KINDS, MAX_DEPENDENTS};
pub use rate::RateLimiter;
pub use selector::selects_only_workload;
pub use violation::{Violation, reasons};

use crate::crd::AdmissionSpec;
use json::{Node, object_or_empty};
use violation::Violation as R;

/// The JSON path of the pod template in an `apps/v1` Deployment (and
/// StatefulSet).
pub const DEPLOYMENT_TEMPLATE: &str = "spec.template";

/// One incoming request, as the receiver read it.
#[derive(Clone, Copy, Debug)]
pub struct Incoming<'a> {
    /// The workload manifest: an `apps/v1` Deployment or StatefulSet.
    pub workload: &'a Value,
    /// ConfigMaps travelling in the same request.
    pub config_maps: &'a [Value],
    /// Secrets travelling in the same request.
    pub secrets: &'a [Value],
    /// ServiceAccounts travelling in the same request (created fresh).
    pub service_accounts: &'a [Value],
    /// PersistentVolumeClaims travelling in the same request (created
    /// empty): the only claims incoming pods may mount.
    pub claims: &'a [Value],
    /// The image of the import hook the request asks this cluster to run.
    pub hook_image: Option<&'a str>,
}

/// What the sending peer already has in this cluster, counted by the
/// caller: the workloads of its moves in flight and completed here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Replicas.
    pub replicas: u64,
    /// CPU requested by all of them, in millicores.
    pub cpu_millis: u64,
    /// Memory requested by all of them, in bytes.
    pub memory_bytes: u64,
}

/// What an admitted Deployment reserves in all (replicas, and their CPU
/// and memory as the caps count them): for a receiver's tally of what a
/// peer already runs here.
pub fn demand(workload: &serde_json::Value) -> Usage {
    caps::demand(workload, DEPLOYMENT_TEMPLATE)
}

/// Whether the receiver may apply `incoming`, under its `spec` for the
/// sending peer, given the peer's `usage` here. The first problem, in a
/// stable order: the workload's kind and shape; the travelling objects;
/// the Pod Security profile; Ferry's rules; the caps.
pub fn review(incoming: &Incoming<'_>, spec: &AdmissionSpec, usage: &Usage) -> Result<(), R> {
    let root = Node::new(incoming.workload, "");
    let workload = root.object()?.ok_or_else(|| {
        R::new(
            reasons::INVALID_MANIFEST,
            "",
            "the workload must be a JSON object",
        )
    })?;
    let kind = (
        workload.get("apiVersion").str()?.unwrap_or(""),
        workload.get("kind").str()?.unwrap_or(""),
    );
    let stateful_set = kind == ("apps/v1", "StatefulSet");
    if kind != ("apps/v1", "Deployment") && !stateful_set {
        return Err(R::new(
            reasons::UNSUPPORTED_KIND,
            "kind",
            format!(
                "the workload is {} {}; only apps/v1 Deployments and StatefulSets are admitted",
                kind.0, kind.1
            ),
        ));
    }
    claims::check(stateful_set, incoming.claims, incoming.hook_image, spec)?;
    let metadata = workload.get("metadata");
    let namespace = object_or_empty(&metadata)?.get("namespace").str()?;
    let travelling = objects::read(
        incoming.config_maps,
        incoming.secrets,
        incoming.service_accounts,
        incoming.claims,
        namespace,
        &spec.secrets,
    )?;
    let pod = pod::PodTemplate::read(incoming.workload, DEPLOYMENT_TEMPLATE)?;
    pss::check(&pod, spec.profile)?;
    rules::check(&pod, spec, &travelling)?;
    let workload_spec = workload.get("spec");
    caps::check(&object_or_empty(&workload_spec)?, &pod, &spec.caps, usage)
}

/// Whether the receiver may create `dependents` (every travelling object
/// but ServiceAccounts, which [`review`] reads) beside the Deployment
/// `workload`, which [`review`] admitted. An autoscaler that may scale the
/// workload above its replicas is counted against the caps at its
/// `maxReplicas`.
pub fn review_dependents(
    workload: &Value,
    dependents: &[Value],
    spec: &AdmissionSpec,
    usage: &Usage,
) -> Result<(), R> {
    let namespace = workload
        .pointer("/metadata/namespace")
        .and_then(Value::as_str);
    let Some(scaling) = dependents::check(workload, namespace, dependents, &spec.dependents)?
    else {
        return Ok(());
    };
    let replicas = workload
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if scaling.max_replicas <= replicas {
        return Ok(());
    }
    let mut scaled = workload.clone();
    scaled["spec"]["replicas"] = scaling.max_replicas.into();
    let pod = pod::PodTemplate::read(&scaled, DEPLOYMENT_TEMPLATE)?;
    let root = Node::new(&scaled, "");
    let workload_spec = object_or_empty(&root)?.get("spec");
    caps::check(&object_or_empty(&workload_spec)?, &pod, &spec.caps, usage).map_err(|v| {
        R::new(
            v.reason,
            &scaling.path,
            format!(
                "HorizontalPodAutoscaler {} may scale the workload to {} replicas: {}",
                scaling.name, scaling.max_replicas, v.message
            ),
        )
    })
}
