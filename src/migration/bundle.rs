//! The objects that travel beside a workload, as they cross the cluster
//! boundary (pure, no client): a Service, HorizontalPodAutoscaler,
//! PodDisruptionBudget, NetworkPolicy or ServiceAccount stripped of
//! everything the source cluster assigned. The sender applies it to what
//! it reads; the receiver applies it again to what it creates, after its
//! admission rules judged the object as it arrived.
//!
//! It never widens an object: specs are copied as they are, minus the
//! fields listed here; nothing is added.

use serde_json::{Map, Value};

use super::sanitize::{Objection, reasons, sanitize_metadata};
use crate::admission::DEPENDENT_KINDS;

/// Fields of a Service's spec that the source cluster assigned or that
/// name its own addresses: never carried.
pub const DROPPED_SERVICE_FIELDS: &[&str] = &[
    "clusterIP",
    "clusterIPs",
    "externalIPs",
    "loadBalancerIP",
    "healthCheckNodePort",
    "ipFamilies",
    "ipFamilyPolicy",
];

/// The order in which a move creates its dependents, ahead of the
/// Deployment: the account its pods run as, then what confines them, then
/// what serves and scales them.
pub(crate) fn creation_rank(kind: &str) -> usize {
    DEPENDENT_KINDS
        .iter()
        .position(|(_, k)| *k == kind)
        .unwrap_or(DEPENDENT_KINDS.len())
}

/// The `&'static` name of a travelling kind.
pub(crate) fn static_kind(kind: &str) -> Option<&'static str> {
    DEPENDENT_KINDS
        .iter()
        .find(|(_, k)| *k == kind)
        .map(|(_, k)| *k)
}

/// A dependent as it travels: identity, labels and annotations (minus the
/// source-local ones), and its spec minus what the source cluster
/// assigned; never a status. A ServiceAccount keeps only its name, labels
/// and `automountServiceAccountToken`: no annotations (cloud workload
/// identities are granted through them), no token or pull Secrets.
pub fn sanitize_dependent(object: &Value) -> Result<Value, Objection> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    if !DEPENDENT_KINDS.contains(&(api_version, kind)) {
        return Err(Objection::new(
            reasons::UNSUPPORTED_KIND,
            format!("{api_version} {kind} does not travel beside a workload"),
        ));
    }
    let mut metadata = sanitize_metadata(object)?;
    let mut out = Map::new();
    out.insert("apiVersion".into(), api_version.into());
    out.insert("kind".into(), kind.into());
    if kind == "ServiceAccount" {
        if let Some(meta) = metadata.as_object_mut() {
            meta.remove("annotations");
        }
        out.insert("metadata".into(), metadata);
        if let Some(automount) = object
            .get("automountServiceAccountToken")
            .filter(|v| !v.is_null())
        {
            out.insert("automountServiceAccountToken".into(), automount.clone());
        }
        return Ok(Value::Object(out));
    }
    out.insert("metadata".into(), metadata);
    let mut spec = object.get("spec").cloned().unwrap_or_default();
    if kind == "Service"
        && let Some(fields) = spec.as_object_mut()
    {
        for field in DROPPED_SERVICE_FIELDS {
            fields.remove(*field);
        }
        for port in fields
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(port) = port.as_object_mut() {
                port.remove("nodePort");
            }
        }
    }
    if !spec.is_null() {
        out.insert("spec".into(), spec);
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn metadata() -> Value {
        json!({"name": "web", "namespace": "apps", "uid": "u", "resourceVersion": "7",
            "ownerReferences": [{"kind": "X"}], "finalizers": ["x"], "labels": {"app": "web"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "blue"}})
    }

    #[test]
    fn a_service_loses_what_the_source_cluster_assigned() {
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": metadata(),
            "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "externalIPs": ["1.2.3.4"],
                "loadBalancerIP": "5.6.7.8", "healthCheckNodePort": 32000,
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                "externalTrafficPolicy": "Local",
                "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 31000}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}}});
        let clean = sanitize_dependent(&service).unwrap();
        assert_eq!(
            clean,
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "apps", "labels": {"app": "web"},
                    "annotations": {"team": "blue"}},
                "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                    "externalTrafficPolicy": "Local",
                    "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
        );
    }

    #[test]
    fn a_service_account_carries_no_identity_and_no_credentials() {
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "web", "annotations": {"eks.amazonaws.com/role-arn": "arn:x"}},
            "secrets": [{"name": "web-token"}], "imagePullSecrets": [{"name": "registry"}],
            "automountServiceAccountToken": false});
        assert_eq!(
            sanitize_dependent(&account).unwrap(),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web"},
                "automountServiceAccountToken": false})
        );
    }

    #[test]
    fn other_kinds_keep_their_spec_and_lose_their_status() {
        for (api_version, kind) in [
            ("autoscaling/v2", "HorizontalPodAutoscaler"),
            ("policy/v1", "PodDisruptionBudget"),
            ("networking.k8s.io/v1", "NetworkPolicy"),
        ] {
            let spec = json!({"any": {"field": [1, 2]}});
            let object = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata(),
                "spec": spec, "status": {"x": 1}});
            let clean = sanitize_dependent(&object).unwrap();
            assert_eq!(clean["spec"], spec, "{kind}");
            assert!(clean.get("status").is_none(), "{kind}");
            assert!(clean["metadata"].get("uid").is_none(), "{kind}");
        }
    }

    #[test]
    fn only_the_travelling_kinds_pass() {
        for (api_version, kind) in [
            ("apps/v1", "Deployment"),
            ("autoscaling/v1", "HorizontalPodAutoscaler"),
            ("v1", "Secret"),
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ] {
            let object =
                json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
            assert_eq!(
                sanitize_dependent(&object).unwrap_err().reason,
                reasons::UNSUPPORTED_KIND
            );
        }
    }

    #[test]
    fn dependents_are_created_account_first_autoscaler_last() {
        let ranks: Vec<usize> = [
            "ServiceAccount",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Service",
            "HorizontalPodAutoscaler",
        ]
        .iter()
        .map(|k| creation_rank(k))
        .collect();
        assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{ranks:?}");
    }
}
