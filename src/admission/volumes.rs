//! Ferry's volume rule, under every profile: the kinds the restricted
//! profile allows, narrowed. `secret` and `configMap` (also in `projected`)
//! only for objects travelling or allow-listed; `csi` only for allow-listed
//! drivers (and its publish Secret like any reference); a projected
//! ServiceAccount token only for an allowed ServiceAccount; a
//! `persistentVolumeClaim` only for a claim travelling in the request, which
//! the move creates empty (an existing claim holds another workload's
//! data); never an `ephemeral` volume (its claim template can clone an
//! existing claim or bind a named volume).

use super::json::{Node, object_or_empty};
use super::rules::{Allowed, config_map, secret};
use super::violation::{Violation, reasons};

/// Volume kinds that need no further check.
const PLAIN: &[&str] = &["emptyDir", "downwardAPI"];

/// Sources of a projected volume that need no further check
/// (`clusterTrustBundle` holds public certificates only).
const PLAIN_PROJECTED: &[&str] = &["downwardAPI", "clusterTrustBundle"];

fn refused(field: &str, message: String) -> Violation {
    Violation::new(reasons::VOLUME_NOT_ALLOWED, field, message)
}

/// Checks one entry of `spec.volumes`.
pub(crate) fn check(volume: &Node<'_>, allowed: &Allowed<'_>) -> Result<(), Violation> {
    let object = object_or_empty(volume)?;
    for kind in object.keys().filter(|k| *k != "name") {
        let source = object.get(kind);
        let fields = object_or_empty(&source)?;
        match kind {
            _ if PLAIN.contains(&kind) => {}
            "secret" => secret(allowed, &fields.get("secretName"))?,
            "configMap" => config_map(allowed, &fields.get("name"))?,
            "csi" => {
                let driver = fields.get("driver");
                let name = driver.required_str()?;
                if !allowed.spec.csi_drivers.iter().any(|d| d == name) {
                    return Err(refused(
                        &driver.path,
                        format!(
                            "{} is {name:?}, which is not in spec.admission.csiDrivers",
                            driver.path
                        ),
                    ));
                }
                let publish = fields.get("nodePublishSecretRef");
                if let Some(reference) = publish.object()? {
                    secret(allowed, &reference.get("name"))?;
                }
            }
            "projected" => {
                for item in fields.get("sources").list()? {
                    projected(&item, allowed)?;
                }
            }
            "persistentVolumeClaim" => {
                // Only a claim this move creates empty: claims of this
                // cluster hold other workloads' data.
                let claim = fields.get("claimName");
                let name = claim.required_str()?;
                if !allowed.travelling.claims.contains(name) {
                    return Err(refused(
                        &claim.path,
                        format!(
                            "{} is {name:?}, which does not travel in this request; incoming pods mount only the claims their move creates, never one of this cluster's",
                            claim.path
                        ),
                    ));
                }
            }
            "ephemeral" => {
                return Err(refused(
                    &source.path,
                    format!(
                        "{}: generic ephemeral volumes are refused (their claim template can clone an existing claim)",
                        source.path
                    ),
                ));
            }
            other => {
                return Err(refused(
                    &source.path,
                    format!(
                        "{}: {other} volumes are refused; incoming pods may use emptyDir, downwardAPI, configMap, secret, projected and csi (listed drivers)",
                        source.path
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn projected(item: &Node<'_>, allowed: &Allowed<'_>) -> Result<(), Violation> {
    let object = object_or_empty(item)?;
    for kind in object.keys() {
        let source = object.get(kind);
        let fields = object_or_empty(&source)?;
        match kind {
            _ if PLAIN_PROJECTED.contains(&kind) => {}
            "secret" => secret(allowed, &fields.get("name"))?,
            "configMap" => config_map(allowed, &fields.get("name"))?,
            "serviceAccountToken" => {
                let pod_account = allowed.pod_service_account;
                if !allowed.token_allowed() {
                    return Err(refused(
                        &source.path,
                        format!(
                            "{}: a projected token of ServiceAccount {pod_account:?} needs that account to travel in this request or to be in spec.admission.serviceAccounts",
                            source.path
                        ),
                    ));
                }
            }
            other => {
                return Err(refused(
                    &source.path,
                    format!("{}: projected {other} sources are refused", source.path),
                ));
            }
        }
    }
    Ok(())
}
