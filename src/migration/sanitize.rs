//! What crosses the cluster boundary (pure, no client): the workload
//! manifest stripped of everything cluster-local, the ConfigMaps and Secrets
//! its pod template references, and the receiver's checks.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// Annotations that describe the source cluster's copy, never carried over.
const DROPPED_ANNOTATIONS: &[&str] = &[
    "deployment.kubernetes.io/revision",
    "kubectl.kubernetes.io/last-applied-configuration",
    super::names::ANNOTATION_MIGRATED_TO,
    super::names::ANNOTATION_MIGRATED_FROM,
    super::names::ANNOTATION_LAST_MIGRATION,
    super::names::ANNOTATION_MIGRATION,
    super::names::ANNOTATION_ORIGINAL_REPLICAS,
    super::names::ANNOTATION_REQUEST_ID,
];

/// Why a workload or request is refused: a CamelCase reason and a sentence.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Objection {
    /// For machines (becomes `status.reason`).
    pub reason: &'static str,
    /// For people.
    pub message: String,
}

impl Objection {
    pub(crate) fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// The reasons an [`Objection`] carries.
pub mod reasons {
    /// Only `apps/v1` Deployments and StatefulSets move.
    pub const UNSUPPORTED_KIND: &str = "UnsupportedKind";
    /// The manifest lacks a name or a pod template.
    pub const INVALID_MANIFEST: &str = "InvalidManifest";
    /// The pod template references Secrets and the policy may not copy them.
    pub const SECRETS_NOT_ALLOWED: &str = "SecretsNotAllowed";
    /// The pod spec asks for host access or privileged containers.
    pub const PRIVILEGED_POD_SPEC: &str = "PrivilegedPodSpec";
    /// The source cluster is not a known peer of the receiver.
    pub const UNKNOWN_PEER: &str = "UnknownPeer";
    /// The source peer lacks `acceptFrom`.
    pub const PEER_NOT_ACCEPTED: &str = "PeerNotAccepted";
    /// The namespace is protected, Ferry's own, an inbox, or not in
    /// `allowedNamespaces`.
    pub const NAMESPACE_NOT_ALLOWED: &str = "NamespaceNotAllowed";
    /// The request's `sourceCluster` is not the peer whose inbox holds it.
    pub const SOURCE_MISMATCH: &str = "SourceMismatch";
    /// An object of a name the move needs exists and is not the move's own.
    pub const NAME_CONFLICT: &str = "NameConflict";
    /// A Secret travelled with plaintext data instead of sealed data.
    pub const SECRET_NOT_SEALED: &str = "SecretNotSealed";
    /// A Secret of a type other than `Opaque` was sent.
    pub const SECRET_TYPE_NOT_ALLOWED: &str = "SecretTypeNotAllowed";
    /// The workload's namespace does not exist in the target.
    pub const TARGET_NAMESPACE_MISSING: &str = "TargetNamespaceMissing";
    /// The request's content changed after the receiver accepted it.
    pub const SPEC_CHANGED: &str = "SpecChanged";
    /// The peer's inbox holds as many requests in flight as this cluster
    /// stores for one peer.
    pub const INBOX_FULL: &str = "InboxFull";
    /// The request's progressive strategy cannot be followed (a step, a
    /// pause, a budget or a gate query is malformed, or the move would take
    /// too many steps).
    pub const INVALID_STRATEGY: &str = "InvalidStrategy";
    /// The workload keeps state (a StatefulSet, or a claim it mounts) and
    /// the deciding policy does not enable stateful moves.
    pub const STATEFUL_NOT_ALLOWED: &str = "StatefulNotAllowed";
}

/// The manifest as it travels: `apps/v1` `Deployment` only; metadata reduced
/// to name, namespace, labels and annotations (minus the source-local ones);
/// no status. Everything else cluster-local (uid, resourceVersion,
/// managedFields, ownerReferences, creationTimestamp, generation,
/// deletionTimestamp, selfLink, finalizers) is dropped.
pub fn sanitize_workload(object: &Value) -> Result<Value, Objection> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let Some(kind) = super::workload::WorkloadKind::of(object) else {
        return Err(Objection::new(
            reasons::UNSUPPORTED_KIND,
            format!("only apps/v1 Deployments and StatefulSets can move, not {api_version} {kind}"),
        ));
    };
    let kind = kind.as_str();
    let metadata = sanitize_metadata(object)?;
    let Some(spec) = object.get("spec").filter(|s| s.is_object()) else {
        return Err(Objection::new(
            reasons::INVALID_MANIFEST,
            format!("the {kind} has no spec"),
        ));
    };
    if spec.pointer("/template/spec").is_none() {
        return Err(Objection::new(
            reasons::INVALID_MANIFEST,
            format!("the {kind} has no pod template spec"),
        ));
    }
    let mut spec = spec.clone();
    if let Some(templates) = spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
    {
        // Each claim is created empty in the target, from what it asks for.
        for template in templates {
            let name = template.pointer("/metadata/name").cloned();
            let clean =
                super::workload::sanitize_claim_spec(template.get("spec").unwrap_or(&Value::Null));
            *template = json!({"metadata": {"name": name}, "spec": clean});
        }
    }
    Ok(json!({
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": metadata,
        "spec": spec,
    }))
}

/// A referenced ConfigMap or Secret as it travels: identity, labels,
/// annotations and data only.
pub fn sanitize_config_object(object: &Value) -> Result<Value, Objection> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    if !matches!(kind, "ConfigMap" | "Secret") {
        return Err(Objection::new(
            reasons::UNSUPPORTED_KIND,
            format!("only ConfigMaps and Secrets travel with a workload, not {kind:?}"),
        ));
    }
    let mut out = Map::new();
    out.insert("apiVersion".into(), "v1".into());
    out.insert("kind".into(), kind.into());
    out.insert("metadata".into(), sanitize_metadata(object)?);
    for field in ["data", "binaryData", "type", "immutable"] {
        if let Some(value) = object.get(field).filter(|v| !v.is_null()) {
            out.insert(field.into(), value.clone());
        }
    }
    Ok(Value::Object(out))
}

pub(super) fn sanitize_metadata(object: &Value) -> Result<Value, Objection> {
    let meta = object.get("metadata").cloned().unwrap_or_default();
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        return Err(Objection::new(
            reasons::INVALID_MANIFEST,
            "the object has no name",
        ));
    }
    let mut out = Map::new();
    out.insert("name".into(), name.into());
    if let Some(ns) = meta.get("namespace").and_then(Value::as_str) {
        out.insert("namespace".into(), ns.into());
    }
    if let Some(labels) = meta.get("labels").filter(|l| l.is_object()) {
        out.insert("labels".into(), labels.clone());
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let kept: Map<String, Value> = annotations
            .iter()
            .filter(|(k, _)| !DROPPED_ANNOTATIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            out.insert("annotations".into(), Value::Object(kept));
        }
    }
    Ok(Value::Object(out))
}

/// The ConfigMaps and Secrets a pod template references.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct References {
    /// From volumes, projected volumes, `envFrom` and `env[].valueFrom`.
    pub config_maps: BTreeSet<String>,
    /// The same places plus `imagePullSecrets`.
    pub secrets: BTreeSet<String>,
}

/// What the Deployment's pod template references.
pub fn references(workload: &Value) -> References {
    let mut refs = References::default();
    let Some(pod) = workload.pointer("/spec/template/spec") else {
        return refs;
    };
    let name_at = |v: &Value, pointer: &str| {
        v.pointer(pointer)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    for volume in array(pod, "volumes") {
        refs.config_maps.extend(name_at(volume, "/configMap/name"));
        refs.secrets.extend(name_at(volume, "/secret/secretName"));
        for source in volume
            .pointer("/projected/sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            refs.config_maps.extend(name_at(source, "/configMap/name"));
            refs.secrets.extend(name_at(source, "/secret/name"));
        }
    }
    for container in containers(pod) {
        for from in array(container, "envFrom") {
            refs.config_maps.extend(name_at(from, "/configMapRef/name"));
            refs.secrets.extend(name_at(from, "/secretRef/name"));
        }
        for env in array(container, "env") {
            refs.config_maps
                .extend(name_at(env, "/valueFrom/configMapKeyRef/name"));
            refs.secrets
                .extend(name_at(env, "/valueFrom/secretKeyRef/name"));
        }
    }
    for pull in array(pod, "imagePullSecrets") {
        refs.secrets.extend(name_at(pull, "/name"));
    }
    refs
}

/// Every reason the pod spec needs privileges: privileged containers,
/// `hostNetwork`, `hostPID`, `hostIPC`, `hostPath` volumes. Empty: none.
pub fn privileged_features(workload: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let Some(pod) = workload.pointer("/spec/template/spec") else {
        return found;
    };
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod.get(field).and_then(Value::as_bool) == Some(true) {
            found.push(field.to_owned());
        }
    }
    for volume in array(pod, "volumes") {
        if volume.get("hostPath").is_some_and(|h| !h.is_null()) {
            let name = volume.get("name").and_then(Value::as_str).unwrap_or("?");
            found.push(format!("hostPath volume {name}"));
        }
    }
    for container in containers(pod) {
        if container
            .pointer("/securityContext/privileged")
            .and_then(Value::as_bool)
            == Some(true)
        {
            let name = container.get("name").and_then(Value::as_str).unwrap_or("?");
            found.push(format!("privileged container {name}"));
        }
    }
    found
}

fn array<'a>(value: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    value
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn containers(pod: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |field| array(pod, field))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "apps", "uid": "u-1", "resourceVersion": "42",
                "generation": 3, "creationTimestamp": "2024-01-01T00:00:00Z",
                "deletionTimestamp": "2024-01-02T00:00:00Z", "selfLink": "/x",
                "managedFields": [{"manager": "kubectl"}], "finalizers": ["x"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "1"}],
                "labels": {"app": "web"},
                "annotations": {
                    "deployment.kubernetes.io/revision": "4",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "ferry.dev/migrated-to": "b",
                    "team": "blue",
                },
            },
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "app", "image": "nginx",
                            "envFrom": [{"configMapRef": {"name": "env-cm"}}, {"secretRef": {"name": "env-secret"}}],
                            "env": [
                                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "key-cm", "key": "a"}}},
                                {"name": "B", "valueFrom": {"secretKeyRef": {"name": "key-secret", "key": "b"}}},
                                {"name": "C", "value": "plain"},
                            ],
                        }],
                        "volumes": [
                            {"name": "v1", "configMap": {"name": "vol-cm"}},
                            {"name": "v2", "secret": {"secretName": "vol-secret"}},
                            {"name": "v3", "projected": {"sources": [
                                {"configMap": {"name": "proj-cm"}},
                                {"secret": {"name": "proj-secret"}},
                            ]}},
                        ],
                    },
                },
            },
            "status": {"availableReplicas": 3},
        })
    }

    #[test]
    fn sanitising_keeps_the_spec_and_drops_everything_cluster_local() {
        let clean = sanitize_workload(&deployment()).unwrap();
        assert_eq!(
            clean["metadata"],
            json!({"name": "web", "namespace": "apps", "labels": {"app": "web"}, "annotations": {"team": "blue"}})
        );
        assert!(clean.get("status").is_none());
        assert_eq!(clean["spec"], deployment()["spec"]);
    }

    #[test]
    fn other_kinds_are_refused_with_a_reason() {
        for (api_version, kind) in [
            ("apps/v1", "DaemonSet"),
            ("batch/v1", "Job"),
            ("v1", "Pod"),
            ("apps/v1beta1", "Deployment"),
        ] {
            let mut object = deployment();
            object["apiVersion"] = api_version.into();
            object["kind"] = kind.into();
            let objection = sanitize_workload(&object).unwrap_err();
            assert_eq!(objection.reason, reasons::UNSUPPORTED_KIND, "{kind}");
            assert!(objection.message.contains(kind), "{}", objection.message);
        }
    }

    #[test]
    fn a_manifest_without_name_or_template_is_invalid() {
        let mut object = deployment();
        object["metadata"]["name"] = "".into();
        assert_eq!(
            sanitize_workload(&object).unwrap_err().reason,
            reasons::INVALID_MANIFEST
        );
        let mut object = deployment();
        object["spec"]["template"] = json!({});
        assert_eq!(
            sanitize_workload(&object).unwrap_err().reason,
            reasons::INVALID_MANIFEST
        );
    }

    #[test]
    fn every_kind_of_reference_is_found() {
        let refs = references(&deployment());
        let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(
            refs.config_maps,
            set(&["env-cm", "key-cm", "proj-cm", "vol-cm"])
        );
        assert_eq!(
            refs.secrets,
            set(&["env-secret", "key-secret", "proj-secret", "vol-secret"])
        );
    }

    #[test]
    fn config_objects_keep_only_identity_and_data() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "apps", "uid": "1", "resourceVersion": "9"},
            "data": {"k": "v"}});
        assert_eq!(
            sanitize_config_object(&cm).unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "apps"}, "data": {"k": "v"}})
        );
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}});
        assert_eq!(sanitize_config_object(&secret).unwrap()["type"], "Opaque");
        let other = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}});
        assert!(sanitize_config_object(&other).is_err());
    }

    #[test]
    fn privileged_features_are_each_named() {
        assert!(privileged_features(&deployment()).is_empty());
        let cases: [(&str, Value); 5] = [
            ("hostNetwork", json!({"hostNetwork": true})),
            ("hostPID", json!({"hostPID": true})),
            ("hostIPC", json!({"hostIPC": true})),
            (
                "hostPath volume h",
                json!({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}),
            ),
            (
                "privileged container p",
                json!({"initContainers": [{"name": "p", "securityContext": {"privileged": true}}]}),
            ),
        ];
        for (expected, pod) in cases {
            let mut object = deployment();
            let spec = object.pointer_mut("/spec/template/spec").unwrap();
            for (k, v) in pod.as_object().unwrap() {
                spec[k] = v.clone();
            }
            assert_eq!(privileged_features(&object), vec![expected.to_owned()]);
        }
    }
}
