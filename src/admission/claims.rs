//! Stateful moves (`spec.admission.claims`): a StatefulSet, a claim a
//! Deployment mounts, or an import hook, only from a peer the receiver
//! lets create storage here, within its storage cap; and a hook's image
//! under the same registry rule as the workload's.

use serde_json::Value;

use super::json::Node;
use super::violation::{Violation, reasons};
use crate::crd::AdmissionSpec;
use crate::units::quantity;

/// Checks what a stateful request creates: `claims` (the travelling
/// claims, read as the request's `claims[i]`), whether the workload is a
/// StatefulSet, and the import hook's image.
pub(crate) fn check(
    stateful_set: bool,
    claims: &[Value],
    hook_image: Option<&str>,
    spec: &AdmissionSpec,
) -> Result<(), Violation> {
    if !stateful_set && claims.is_empty() && hook_image.is_none() {
        return Ok(());
    }
    if !spec.claims.allow {
        let (field, what) = if stateful_set {
            ("kind", "a StatefulSet".to_owned())
        } else if !claims.is_empty() {
            ("claims[0]", format!("{} claim(s)", claims.len()))
        } else {
            ("hooks.import", "an import hook".to_owned())
        };
        return Err(Violation::new(
            reasons::CLAIMS_NOT_ALLOWED,
            field,
            format!(
                "the request carries {what}, and spec.admission.claims.allow is off for this peer: stateful moves create storage here"
            ),
        ));
    }
    if let Some(image) = hook_image {
        super::rules::check_image("hooks.import.image", image, spec)?;
    }
    let Some(cap) = &spec.claims.max_storage else {
        return Ok(());
    };
    let cap_bytes = quantity::parse(cap.as_str())
        .and_then(quantity::to_whole)
        .ok_or_else(|| {
            Violation::new(
                reasons::INVALID_ADMISSION_CONFIG,
                "spec.admission.claims.maxStorage",
                format!("{:?} is not a quantity", cap.as_str()),
            )
        })?;
    let mut total: u64 = 0;
    for (i, claim) in claims.iter().enumerate() {
        let node = Node::new(claim, format!("claims[{i}]"));
        let path = format!("{}.spec.resources.requests.storage", node.path);
        let asked = claim
            .pointer("/spec/resources/requests/storage")
            .and_then(Value::as_str)
            .and_then(quantity::parse)
            .and_then(quantity::to_whole)
            .ok_or_else(|| {
                Violation::new(
                    reasons::RESOURCES_MISSING,
                    &path,
                    format!(
                        "{path} must be a quantity while spec.admission.claims.maxStorage is set"
                    ),
                )
            })?;
        total = total.saturating_add(asked);
        if total > cap_bytes {
            return Err(Violation::new(
                reasons::CAP_EXCEEDED,
                &path,
                format!(
                    "the request's claims ask for {total} bytes of storage by {path}, over spec.admission.claims.maxStorage {}",
                    cap.as_str()
                ),
            ));
        }
    }
    Ok(())
}
