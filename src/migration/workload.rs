//! The kinds of workload a move carries (pure, no client): `apps/v1`
//! Deployments, and, when the deciding policy enables stateful moves,
//! StatefulSets and Deployments that mount PersistentVolumeClaims. What
//! their claims are called, how a claim travels (empty), and when the
//! workload counts as rolled out, read from its JSON so that both kinds go
//! through one path.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::api::ApiResource;
use serde_json::{Map, Value, json};

use super::sanitize::{Objection, reasons, sanitize_metadata};

/// The kind of a claim a move creates.
pub const CLAIM: &str = "PersistentVolumeClaim";

/// A kind of workload that moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet: only in a stateful move.
    StatefulSet,
}

impl WorkloadKind {
    /// The kind of `manifest`, if it is one that moves.
    pub fn of(manifest: &Value) -> Option<Self> {
        let api_version = manifest.get("apiVersion").and_then(Value::as_str);
        let kind = manifest.get("kind").and_then(Value::as_str);
        match (api_version, kind) {
            (Some("apps/v1"), Some("Deployment")) => Some(Self::Deployment),
            (Some("apps/v1"), Some("StatefulSet")) => Some(Self::StatefulSet),
            _ => None,
        }
    }

    /// The kind a request names: `Deployment` or `StatefulSet`.
    pub fn named(kind: &str) -> Option<Self> {
        match kind {
            "Deployment" => Some(Self::Deployment),
            "StatefulSet" => Some(Self::StatefulSet),
            _ => None,
        }
    }

    /// `Deployment` or `StatefulSet`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::StatefulSet => "StatefulSet",
        }
    }

    /// The API resource, for dynamic clients.
    pub fn resource(self) -> ApiResource {
        match self {
            Self::Deployment => ApiResource::erase::<Deployment>(&()),
            Self::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
        }
    }
}

/// The kind of the workload a request carries (`Deployment` when the
/// manifest names none the move knows, as the receiver's check refuses it).
pub fn kind_of(manifest: &Value) -> WorkloadKind {
    WorkloadKind::of(manifest).unwrap_or(WorkloadKind::Deployment)
}

/// The desired replicas (1 when unset, as the API server defaults them).
pub fn replicas(workload: &Value) -> i64 {
    workload
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// The ready replicas the workload's status reports.
pub fn ready_replicas(workload: &Value) -> i64 {
    workload
        .pointer("/status/readyReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Whether the workload's current generation is rolled out with every
/// desired replica updated and available: the same fields for a
/// Deployment and a StatefulSet.
pub fn is_rolled_out(workload: &Value) -> bool {
    let desired = replicas(workload);
    let field = |name: &str| {
        workload
            .pointer(&format!("/status/{name}"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let generation = workload
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    workload.get("status").is_some_and(Value::is_object)
        && field("observedGeneration") >= generation
        && field("updatedReplicas") >= desired
        && field("availableReplicas") >= desired
}

/// The claims the workload mounts, by name: a Deployment's
/// `persistentVolumeClaim` volumes; a StatefulSet's claims,
/// `TEMPLATE-NAME-ORDINAL` for each claim template and ordinal below its
/// replicas (as its controller names them), plus any its pods mount by
/// name.
pub fn claim_names(workload: &Value) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = workload
        .pointer("/spec/template/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/persistentVolumeClaim/claimName"))
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    if WorkloadKind::of(workload) == Some(WorkloadKind::StatefulSet) {
        let name = workload
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for template in claim_templates(workload) {
            let template_name = template
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            for ordinal in 0..replicas(workload).max(0) {
                names.insert(format!("{template_name}-{name}-{ordinal}"));
            }
        }
    }
    names
}

fn claim_templates(workload: &Value) -> &[Value] {
    workload
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether the workload keeps state a plain move would lose: a
/// StatefulSet, or a pod template that mounts a claim.
pub fn is_stateful(workload: &Value) -> bool {
    WorkloadKind::of(workload) == Some(WorkloadKind::StatefulSet)
        || !claim_names(workload).is_empty()
}

/// The spec a claim travels with: the access modes, the storage asked for,
/// and the volume mode. Never a volume name, a selector or a data source
/// (each would bind or copy a volume of the target cluster), nor a
/// StorageClass (the target's classes are its own: its default applies).
pub fn sanitize_claim_spec(spec: &Value) -> Value {
    let mut out = Map::new();
    for field in ["accessModes", "volumeMode"] {
        if let Some(value) = spec.get(field) {
            out.insert(field.into(), value.clone());
        }
    }
    let mut resources = Map::new();
    for part in ["requests", "limits"] {
        if let Some(storage) = spec.pointer(&format!("/resources/{part}/storage")) {
            resources.insert(part.into(), json!({"storage": storage}));
        }
    }
    if !resources.is_empty() {
        out.insert("resources".into(), Value::Object(resources));
    }
    Value::Object(out)
}

/// A claim as it travels: name, labels and annotations, and the
/// sanitised spec; never a status.
pub fn sanitize_claim(object: &Value) -> Result<Value, Objection> {
    let kind = (
        object.get("apiVersion").and_then(Value::as_str),
        object.get("kind").and_then(Value::as_str),
    );
    if kind != (Some("v1"), Some(CLAIM)) {
        return Err(Objection::new(
            reasons::UNSUPPORTED_KIND,
            format!("a travelling claim must be a v1 {CLAIM}"),
        ));
    }
    let mut metadata = sanitize_metadata(object)?;
    if let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        // The provisioner's and the binder's records describe the source's volume.
        annotations.retain(|k, _| !k.starts_with("pv.kubernetes.io/") && !k.starts_with("volume."));
        if annotations.is_empty() {
            metadata.as_object_mut().map(|m| m.remove("annotations"));
        }
    }
    let spec = object.get("spec").cloned().unwrap_or_default();
    Ok(json!({
        "apiVersion": "v1",
        "kind": CLAIM,
        "metadata": metadata,
        "spec": sanitize_claim_spec(&spec),
    }))
}

/// The claims of a StatefulSet as its controller would create them, from
/// its claim templates: what a stateful move creates in the target when
/// the source has not made them yet.
pub fn claims_from_templates(workload: &Value) -> Vec<Value> {
    let Some(name) = workload.pointer("/metadata/name").and_then(Value::as_str) else {
        return Vec::new();
    };
    let labels = workload
        .pointer("/spec/selector/matchLabels")
        .cloned()
        .unwrap_or(json!({}));
    let mut out = Vec::new();
    for template in claim_templates(workload) {
        let template_name = template
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for ordinal in 0..replicas(workload).max(0) {
            out.push(json!({
                "apiVersion": "v1",
                "kind": CLAIM,
                "metadata": {"name": format!("{template_name}-{name}-{ordinal}"), "labels": labels},
                "spec": sanitize_claim_spec(template.get("spec").unwrap_or(&Value::Null)),
            }));
        }
    }
    out
}

/// Checks that `claims` are exactly the claims `workload` mounts, each
/// named once: a request may create no claim its workload does not use.
pub fn check_claims(workload: &Value, claims: &[Value]) -> Result<(), Objection> {
    let wanted = claim_names(workload);
    let mut seen = BTreeSet::new();
    for (index, claim) in claims.iter().enumerate() {
        let name = claim
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !wanted.contains(name) {
            return Err(Objection::new(
                reasons::INVALID_MANIFEST,
                format!(
                    "spec.claims[{index}]: the workload mounts no claim named {name:?}; a move creates only the claims its workload uses"
                ),
            ));
        }
        if !seen.insert(name) {
            return Err(Objection::new(
                reasons::INVALID_MANIFEST,
                format!("spec.claims[{index}]: claim {name:?} is listed twice"),
            ));
        }
    }
    if let Some(missing) = wanted.iter().find(|n| !seen.contains(n.as_str())) {
        return Err(Objection::new(
            reasons::INVALID_MANIFEST,
            format!(
                "spec.claims: the workload mounts claim {missing:?}, which the request does not carry"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stateful_set(replicas: i64) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "generation": 2},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"spec": {"containers": [{"name": "db", "image": "postgres:17"}]}},
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                             "resources": {"requests": {"storage": "1Gi"}}},
                }],
            },
        })
    }

    #[test]
    fn a_stateful_set_owns_one_claim_per_template_and_ordinal() {
        let sts = stateful_set(2);
        let names: Vec<String> = claim_names(&sts).into_iter().collect();
        assert_eq!(names, ["data-db-0", "data-db-1"]);
        assert!(is_stateful(&sts));
        let claims = claims_from_templates(&sts);
        assert_eq!(claims.len(), 2);
        // The StorageClass is the source's: the target's default applies.
        assert_eq!(
            claims[0]["spec"],
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}})
        );
        assert!(check_claims(&sts, &claims).is_ok());
    }

    #[test]
    fn a_request_carries_exactly_the_claims_its_workload_mounts() {
        let sts = stateful_set(2);
        let claims = claims_from_templates(&sts);
        let too_few = check_claims(&sts, &claims[..1]).unwrap_err();
        assert!(too_few.message.contains("data-db-1"), "{too_few}");
        let mut foreign = claims.clone();
        foreign[1]["metadata"]["name"] = "pgdata-billing-0".into();
        let err = check_claims(&sts, &foreign).unwrap_err();
        assert_eq!(err.reason, reasons::INVALID_MANIFEST);
        assert!(err.message.contains("spec.claims[1]"), "{err}");
        let twice = [claims[0].clone(), claims[0].clone()];
        assert!(check_claims(&stateful_set(1), &twice).is_err());
    }

    #[test]
    fn a_travelling_claim_binds_and_copies_nothing() {
        let claim = json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "cache", "uid": "u", "annotations": {
                "pv.kubernetes.io/bind-completed": "yes", "team": "a"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pvc-123",
                     "selector": {"matchLabels": {"disk": "old"}},
                     "dataSource": {"kind": "PersistentVolumeClaim", "name": "secret-data"},
                     "storageClassName": "fast",
                     "resources": {"requests": {"storage": "5Gi", "cpu": "1"}}},
            "status": {"phase": "Bound"},
        });
        let clean = sanitize_claim(&claim).unwrap();
        assert_eq!(
            clean,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": "cache", "annotations": {"team": "a"}},
                   "spec": {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "5Gi"}}}})
        );
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"volumes": [
                {"name": "c", "persistentVolumeClaim": {"claimName": "cache"}},
                {"name": "tmp", "emptyDir": {}}]}}}});
        assert!(is_stateful(&deployment));
        assert!(check_claims(&deployment, &[clean]).is_ok());
    }

    #[test]
    fn both_kinds_roll_out_on_the_same_fields() {
        let mut sts = stateful_set(2);
        assert!(!is_rolled_out(&sts));
        sts["status"] = json!({"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 1, "readyReplicas": 2});
        assert!(!is_rolled_out(&sts));
        sts["status"]["availableReplicas"] = 2.into();
        assert!(is_rolled_out(&sts));
        assert_eq!(ready_replicas(&sts), 2);
        sts["metadata"]["generation"] = 3.into();
        assert!(!is_rolled_out(&sts));
    }
}
