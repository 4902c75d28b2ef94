//! Caps on replicas, CPU and memory, per request and in total for a peer.
//! A pod's demand is what the scheduler reserves for it: the larger of its
//! containers' sum (with sidecars) and its largest init container (with the
//! sidecars started before it, counted as all of them); a request without a
//! value falls back to the limit, as Kubernetes defaults it; pod-level
//! `resources` win when set. While a CPU or memory cap is set, a container
//! that gives neither request nor limit is refused rather than counted as
//! zero. Arithmetic saturates; it never wraps or panics.

use super::Usage;
use super::json::{Node, Obj, object_or_empty};
use super::pod::PodTemplate;
use super::violation::{Violation, reasons};
use crate::crd::{AdmissionCaps, Quantity, ResourceCaps};
use crate::units::quantity::{to_millis, to_whole};

/// One resource the caps count.
#[derive(Clone, Copy)]
enum Resource {
    Cpu,
    Memory,
}

impl Resource {
    fn key(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }

    /// Millicores for CPU, bytes for memory.
    fn amount(self, value: f64) -> Option<u64> {
        match self {
            Resource::Cpu => to_millis(value),
            Resource::Memory => to_whole(value),
        }
    }

    fn cap(self, caps: &ResourceCaps) -> Option<&Quantity> {
        match self {
            Resource::Cpu => caps.cpu.as_ref(),
            Resource::Memory => caps.memory.as_ref(),
        }
    }

    fn used(self, usage: &Usage) -> u64 {
        match self {
            Resource::Cpu => usage.cpu_millis,
            Resource::Memory => usage.memory_bytes,
        }
    }

    fn show(self, amount: u64) -> String {
        match self {
            Resource::Cpu => format!("{amount}m CPU"),
            Resource::Memory => format!("{amount} bytes of memory"),
        }
    }
}

/// Checks the workload at `workload` (its `spec.replicas`) and its pod
/// template against `caps`, given what the peer already has here.
pub(crate) fn check(
    workload: &Obj<'_, '_>,
    pod: &PodTemplate<'_>,
    caps: &AdmissionCaps,
    usage: &Usage,
) -> Result<(), Violation> {
    let replicas_node = workload.get("replicas");
    let replicas = match replicas_node.int()? {
        None => 1,
        Some(n) if n >= 0 => n as u64,
        Some(n) => {
            return Err(Violation::new(
                reasons::INVALID_MANIFEST,
                &replicas_node.path,
                format!("{} is {n}; it must not be negative", replicas_node.path),
            ));
        }
    };
    for (scope, cap, already) in [
        ("perRequest", caps.per_request.replicas, 0),
        ("total", caps.total.replicas, usage.replicas),
    ] {
        let wanted = already.saturating_add(replicas);
        if let Some(cap) = cap.filter(|c| wanted > u64::from(*c)) {
            return Err(over(
                &replicas_node.path,
                scope,
                "replicas",
                format!("{replicas} replicas"),
                already,
                wanted,
                format!("{cap}"),
            ));
        }
    }
    for resource in [Resource::Cpu, Resource::Memory] {
        let per_request = limit(resource, &caps.per_request, "perRequest")?;
        let total = limit(resource, &caps.total, "total")?;
        if per_request.is_none() && total.is_none() {
            continue;
        }
        let per_pod = pod_demand(pod, resource)?;
        let asked = per_pod.saturating_mul(replicas);
        let field = format!(
            "{}.containers[*].resources.requests.{}",
            pod.spec.path,
            resource.key()
        );
        let what = format!("{replicas} replicas × {}", resource.show(per_pod));
        for (scope, cap, already) in [
            ("perRequest", per_request, 0),
            ("total", total, resource.used(usage)),
        ] {
            let wanted = already.saturating_add(asked);
            if let Some((cap, text)) = cap.filter(|(c, _)| wanted > *c) {
                return Err(over(
                    &field,
                    scope,
                    resource.key(),
                    what,
                    already,
                    wanted,
                    format!("{} ({text:?})", resource.show(cap)),
                ));
            }
        }
    }
    Ok(())
}

/// A cap from the receiver's spec; a value that does not parse refuses
/// everything (fail closed) rather than lifting the cap.
fn limit<'c>(
    resource: Resource,
    caps: &'c ResourceCaps,
    scope: &str,
) -> Result<Option<(u64, &'c str)>, Violation> {
    let Some(quantity) = resource.cap(caps) else {
        return Ok(None);
    };
    let parsed = match resource {
        Resource::Cpu => quantity.millis(),
        Resource::Memory => quantity.whole(),
    };
    let field = format!("spec.admission.caps.{scope}.{}", resource.key());
    parsed.map(|v| Some((v, quantity.as_str()))).ok_or_else(|| {
        Violation::new(
            reasons::INVALID_ADMISSION_CONFIG,
            &field,
            format!("this cluster's {field} is {:?}, not a Kubernetes quantity; every request is refused until it is fixed", quantity.as_str()),
        )
    })
}

fn over(
    field: &str,
    scope: &str,
    key: &str,
    what: String,
    already: u64,
    wanted: u64,
    cap: String,
) -> Violation {
    let message = if scope == "total" {
        format!(
            "{what}: with what this peer already has here ({already}) it would have {wanted}, over the total cap of {cap} (spec.admission.caps.total.{key})"
        )
    } else {
        format!(
            "{what} = {wanted}, over the per-request cap of {cap} (spec.admission.caps.perRequest.{key})"
        )
    };
    Violation::new(reasons::CAP_EXCEEDED, field, message)
}

/// What the scheduler reserves for one pod of the template.
fn pod_demand(pod: &PodTemplate<'_>, resource: Resource) -> Result<u64, Violation> {
    let spec = object_or_empty(&pod.spec)?;
    let pod_resources = spec.get("resources");
    if let Some(amount) = declared(&pod_resources, resource)? {
        return Ok(amount);
    }
    let (mut app, mut sidecars, mut largest_init) = (0u64, 0u64, 0u64);
    for container in pod
        .containers
        .iter()
        .filter(|c| c.list != "ephemeralContainers")
    {
        let object = object_or_empty(&container.node)?;
        let resources = object.get("resources");
        let Some(amount) = declared(&resources, resource)? else {
            let field = format!(
                "{}.resources.requests.{}",
                container.node.path,
                resource.key()
            );
            return Err(Violation::new(
                reasons::RESOURCES_MISSING,
                &field,
                format!(
                    "{field} is unset (and so is the limit): while this peer has a {} cap, every container must request it",
                    resource.key()
                ),
            ));
        };
        let sidecar = object.get("restartPolicy").str()? == Some("Always");
        match (container.list, sidecar) {
            ("containers", _) => app = app.saturating_add(amount),
            (_, true) => sidecars = sidecars.saturating_add(amount),
            _ => largest_init = largest_init.max(amount),
        }
    }
    Ok(app
        .saturating_add(sidecars)
        .max(largest_init.saturating_add(sidecars)))
}

/// `resources.requests.<r>`, else `resources.limits.<r>`, in millicores or
/// bytes.
fn declared(resources: &Node<'_>, resource: Resource) -> Result<Option<u64>, Violation> {
    let resources = object_or_empty(resources)?;
    for side in ["requests", "limits"] {
        let side = resources.get(side);
        let value = object_or_empty(&side)?.get(resource.key());
        if let Some(number) = value.quantity()? {
            return Ok(resource.amount(number));
        }
    }
    Ok(None)
}

/// What a Deployment manifest reserves in all: its replicas, and their CPU
/// and memory as the caps count them. A manifest that cannot be read counts
/// as its replicas alone (it was admitted once, so it reads; this is only a
/// fallback for a tally).
pub(crate) fn demand(workload: &serde_json::Value, template: &str) -> Usage {
    let replicas = workload
        .pointer("/spec/replicas")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(1);
    let Ok(pod) = PodTemplate::read(workload, template) else {
        return Usage {
            replicas,
            ..Usage::default()
        };
    };
    let per_pod = |resource| pod_demand(&pod, resource).unwrap_or(0);
    Usage {
        replicas,
        cpu_millis: per_pod(Resource::Cpu).saturating_mul(replicas),
        memory_bytes: per_pod(Resource::Memory).saturating_mul(replicas),
    }
}
