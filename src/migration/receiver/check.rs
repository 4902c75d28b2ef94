//! The receiver's checks of one request (pure, no client): who sent it
//! (from the inbox it sits in, never from a spec field), where it may go,
//! and what it carries.
//!
//! A request passes only if every check passes; this part never decides
//! anything from `spec.sourceCluster` alone.

use kube::ResourceExt;
use serde_json::Value;

use crate::admission::{self, Incoming, Usage};
use crate::crd::HookKind;
use crate::crd::{PROTECTED_NAMESPACES, WorkloadMigration, WorkloadMigrationSpec};
use crate::migration::applied::SERVICE_EXPORT;
use crate::migration::bundle::{creation_rank, sanitize_dependent, static_kind};
use crate::migration::envelope::{self, verify_request};
use crate::migration::hooks::{hook, job_name};
use crate::migration::names::INBOX_PREFIX;
use crate::migration::sanitize::{Objection, reasons, sanitize_config_object, sanitize_workload};
use crate::migration::sealed::without_sealed_data;
use crate::migration::workload::{self, CLAIM};
use crate::peers::Peer;

/// What a request creates, once checked: `(kind, manifest)` in creation order.
#[derive(Debug)]
pub(super) struct Checked {
    pub objects: Vec<(&'static str, Value)>,
}

/// The rules the receiver applies beyond the peer's own spec.
pub(super) struct Rules<'a> {
    /// Ferry's own namespace: never a target.
    pub operator_namespace: Option<&'a str>,
    /// What the peer already runs here (for its total caps).
    pub usage: Usage,
}

/// Checks a request found in the inbox of `inbox_peer`, sent by `peer` (the
/// ClusterPeer of that name, if any).
pub(super) fn check(
    wm: &WorkloadMigration,
    inbox_peer: &str,
    peer: Option<&Peer>,
    rules: &Rules<'_>,
) -> Result<Checked, Objection> {
    let Some(peer) = peer else {
        return Err(Objection::new(
            reasons::UNKNOWN_PEER,
            format!("{inbox_peer} is not a ClusterPeer of this cluster"),
        ));
    };
    if !peer.spec.accept_from {
        return Err(Objection::new(
            reasons::PEER_NOT_ACCEPTED,
            format!("ClusterPeer {inbox_peer} does not set acceptFrom"),
        ));
    }
    if let Err(error) = verify_request(&peer.spec.public_keys, &wm.spec) {
        return Err(Objection::new(
            envelope::reason(&error),
            format!("spec.signature: not signed by ClusterPeer {inbox_peer}'s keys: {error}"),
        ));
    }
    let claimed = &wm.spec.source_cluster;
    if claimed != inbox_peer {
        return Err(Objection::new(
            reasons::SOURCE_MISMATCH,
            format!(
                "spec.sourceCluster says {claimed:?} but the request is in the inbox of {inbox_peer:?}"
            ),
        ));
    }
    let namespace = wm.spec.target_namespace.as_str();
    let refused = PROTECTED_NAMESPACES.contains(&namespace)
        || rules.operator_namespace == Some(namespace)
        || namespace.starts_with(INBOX_PREFIX)
        || !peer.spec.accepts_into(namespace);
    if refused {
        return Err(Objection::new(
            reasons::NAMESPACE_NOT_ALLOWED,
            format!(
                "spec.targetNamespace: ClusterPeer {inbox_peer} may not send workloads into namespace {namespace}"
            ),
        ));
    }
    let mut workload = sanitize_workload(&wm.spec.workload)?;
    let kind = workload::kind_of(&workload);
    crate::migration::progressive::plan(&wm.spec)?;
    check_partial(&wm.spec, &workload)?;
    workload["metadata"]["namespace"] = namespace.into();
    let mut objects = Vec::new();
    // Claims first: the import hook fills them before anything else runs.
    for (index, claim) in wm.spec.claims.iter().enumerate() {
        let mut clean = workload::sanitize_claim(claim).map_err(|o| {
            Objection::new(o.reason, format!("spec.claims[{index}]: {}", o.message))
        })?;
        clean["metadata"]["namespace"] = namespace.into();
        objects.push((CLAIM, clean));
    }
    for (field, kind, list) in [
        ("configMaps", "ConfigMap", &wm.spec.config_maps),
        ("secrets", "Secret", &wm.spec.secrets),
    ] {
        for (index, object) in list.iter().enumerate() {
            objects.push((kind, config_object(field, index, kind, object)?));
        }
    }
    // ServiceAccounts are judged with the other travelling objects; their
    // place in `dependents` names them in a refusal.
    let accounts: Vec<usize> = (wm.spec.dependents.iter().enumerate())
        .filter(|(_, d)| d.get("kind").and_then(Value::as_str) == Some("ServiceAccount"))
        .map(|(i, _)| i)
        .collect();
    let service_accounts: Vec<Value> = accounts
        .iter()
        .map(|i| wm.spec.dependents[*i].clone())
        .collect();
    let incoming = Incoming {
        workload: &workload,
        config_maps: &wm.spec.config_maps,
        secrets: &wm.spec.secrets,
        service_accounts: &service_accounts,
        claims: &wm.spec.claims,
        hook_image: hook(&wm.spec, HookKind::Import).map(|h| h.image.as_str()),
    };
    let objection = |v: admission::Violation| {
        let field = request_field(&v.field, &accounts);
        Objection::new(v.reason, format!("{field}: {}", v.message))
    };
    let admission = &peer.spec.admission;
    admission::review(&incoming, admission, &rules.usage).map_err(objection)?;
    admission::review_dependents(&workload, &wm.spec.dependents, admission, &rules.usage)
        .map_err(objection)?;
    // After admission: a claim of this cluster that the pods mount is
    // refused there as such (`VolumeNotAllowed`).
    check_stateful(&wm.spec, &workload)?;
    let mut dependents = Vec::new();
    for object in &wm.spec.dependents {
        let clean = sanitize_dependent(object)?;
        let kind = clean["kind"]
            .as_str()
            .and_then(static_kind)
            .ok_or_else(|| {
                Objection::new(
                    reasons::UNSUPPORTED_KIND,
                    "spec.dependents holds an unknown kind",
                )
            })?;
        dependents.push((kind, clean));
    }
    dependents.sort_by_key(|(kind, _)| creation_rank(kind));
    objects.extend(dependents);
    objects.push((kind.as_str(), workload));
    Ok(Checked { objects })
}

/// The request's field for a path admission names: `serviceAccounts[j]`
/// is the `j`th ServiceAccount among `dependents` (at `accounts[j]`).
fn request_field(path: &str, accounts: &[usize]) -> String {
    if let Some(rest) = path.strip_prefix("serviceAccounts[")
        && let Some((index, tail)) = rest.split_once(']')
        && let Some(at) = index.parse::<usize>().ok().and_then(|j| accounts.get(j))
    {
        return format!("spec.dependents[{at}]{tail}");
    }
    let at_request = ["configMaps", "secrets", "dependents"]
        .iter()
        .any(|f| path.starts_with(f));
    match (at_request, path) {
        (true, field) => format!("spec.{field}"),
        (false, "") => "spec.workload".to_owned(),
        (false, field) => format!("spec.workload.{field}"),
    }
}

/// One ConfigMap or Secret of the request, sanitised; only `Opaque` Secrets.
fn config_object(
    field: &str,
    index: usize,
    kind: &str,
    object: &Value,
) -> Result<Value, Objection> {
    let clean = sanitize_config_object(object)?;
    if clean["kind"] != kind {
        return Err(Objection::new(
            reasons::UNSUPPORTED_KIND,
            format!("spec.{field}[{index}] holds a {}", clean["kind"]),
        ));
    }
    if kind == "Secret" {
        let plaintext = ["data", "stringData", "binaryData"]
            .iter()
            .any(|f| object.get(*f).is_some_and(|v| !v.is_null()));
        if plaintext {
            return Err(Objection::new(
                reasons::SECRET_NOT_SEALED,
                format!("spec.{field}[{index}] carries plaintext data; Secrets travel sealed"),
            ));
        }
        let type_ = clean
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("Opaque");
        if type_ != "Opaque" {
            return Err(Objection::new(
                reasons::SECRET_TYPE_NOT_ALLOWED,
                format!("spec.{field}[{index}].type is {type_:?}; only Opaque Secrets travel"),
            ));
        }
    }
    Ok(clean)
}

/// The `(kind, name)` of every object the request names, read leniently (a
/// malformed entry is skipped): what a cleanup looks for even when the
/// request never passed its checks.
/// A partial move's numbers must agree with the manifest it carries.
fn check_partial(spec: &WorkloadMigrationSpec, workload: &Value) -> Result<(), Objection> {
    let Some(partial) = spec.partial else {
        return Ok(());
    };
    let carried = workload
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if partial.replicas < 1
        || partial.replicas >= partial.of
        || i64::from(partial.replicas) != carried
    {
        return Err(Objection::new(
            reasons::INVALID_MANIFEST,
            format!(
                "spec.partial: moves {} of {} replicas, but the workload carries {carried}",
                partial.replicas, partial.of
            ),
        ));
    }
    Ok(())
}

/// A stateful move must carry exactly the claims its workload mounts, and
/// hands over all at once and whole: a StatefulSet's ordinals, and a
/// claim a Deployment's replicas share, cannot be split between clusters.
fn check_stateful(spec: &WorkloadMigrationSpec, workload: &Value) -> Result<(), Objection> {
    let stateful = workload::is_stateful(workload);
    if !stateful && spec.claims.is_empty() {
        return Ok(());
    }
    workload::check_claims(workload, &spec.claims)?;
    if spec.partial.is_some() || spec.strategy.as_ref().is_some_and(|s| s.is_progressive()) {
        return Err(Objection::new(
            reasons::INVALID_STRATEGY,
            "a stateful workload moves whole and all at once; spec.partial and a progressive spec.strategy are refused",
        ));
    }
    Ok(())
}

/// What this move may have created here, by kind and name: what a
/// rollback looks for beyond the recorded uids.
pub(super) fn wanted_names(wm: &WorkloadMigration) -> Vec<(String, String)> {
    let spec = &wm.spec;
    let name = |v: &Value| {
        v.pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
    };
    let mut out = Vec::new();
    for (kind, list) in [("ConfigMap", &spec.config_maps), ("Secret", &spec.secrets)] {
        out.extend(list.iter().filter_map(name).map(|n| (kind.to_owned(), n)));
    }
    for object in &spec.dependents {
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .and_then(static_kind);
        if let (Some(kind), Some(n)) = (kind, name(object)) {
            if kind == "Service" {
                // Exported under the same name where the MCS API is served.
                out.push((SERVICE_EXPORT.to_owned(), n.clone()));
            }
            out.push((kind.to_owned(), n));
        }
    }
    out.extend(
        spec.claims
            .iter()
            .filter_map(name)
            .map(|n| (CLAIM.to_owned(), n)),
    );
    if hook(spec, HookKind::Import).is_some() {
        out.push(("Job".to_owned(), job_name(&wm.name_any(), HookKind::Import)));
    }
    let kind = workload::kind_of(&spec.workload).as_str();
    out.extend(name(&spec.workload).map(|n| (kind.to_owned(), n)));
    out
}

/// The digest of what the request asks (everything but the intent and the
/// sealed data), to notice a change after acceptance.
pub(super) fn content_digest(spec: &WorkloadMigrationSpec) -> String {
    let mut content = spec.clone();
    content.intent = None;
    // The sealed data is covered by its signed digest, and is cleared once
    // the Secrets are created.
    content.secrets = without_sealed_data(&content.secrets);
    // Canonical JSON: equal content digests equally, whatever order an API
    // server writes its members in after the spec was patched.
    crate::trust::digest(&content).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::crd::{ClusterPeerSpec, Intent, IntentAction};

    fn request(source: &str, namespace: &str, secrets: Value) -> WorkloadMigration {
        let spec = serde_json::from_value(json!({
            "requestId": "r", "sourceCluster": source, "targetCluster": "b",
            "targetNamespace": namespace, "deadline": "2099-01-01T00:00:00Z", "role": "Target",
            "workload": {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"template": {"spec": {
                    "automountServiceAccountToken": false,
                    "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "c", "image": "i", "securityContext":
                        {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}}}},
            "configMaps": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}],
            "secrets": secrets,
        }))
        .unwrap();
        let mut wm = WorkloadMigration::new("web-1", spec);
        crate::migration::envelope::sign_request(&KEYS, &mut wm.spec).unwrap();
        wm
    }

    #[test]
    fn a_partial_move_must_agree_with_the_replicas_it_carries() {
        let partial = |replicas: i64, moving: i32, of: i32| {
            let mut wm = request("a", "apps", json!([]));
            wm.spec.workload["spec"]["replicas"] = replicas.into();
            wm.spec.partial = Some(crate::crd::PartialMove {
                replicas: moving,
                of,
            });
            crate::migration::envelope::sign_request(&KEYS, &mut wm.spec).unwrap();
            check(&wm, "a", Some(&peer(true)), &RULES).map(|_| ())
        };
        assert_eq!(partial(2, 2, 3), Ok(()));
        for (carried, moving, of) in [(3, 2, 3), (2, 2, 2), (0, 0, 3), (4, 4, 3)] {
            let refused = partial(carried, moving, of).unwrap_err();
            assert_eq!(refused.reason, reasons::INVALID_MANIFEST, "{refused:?}");
            assert!(refused.message.starts_with("spec.partial"), "{refused:?}");
        }
    }

    #[test]
    fn a_stateful_move_carries_exactly_its_claims_whole_and_at_once() {
        let stateful = |change: &dyn Fn(&mut WorkloadMigration)| {
            let mut wm = request("a", "apps", json!([]));
            wm.spec.workload["spec"]["replicas"] = 2.into();
            wm.spec.workload["spec"]["template"]["spec"]["volumes"] =
                json!([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]);
            wm.spec.claims = vec![json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data"},
                "spec": {"resources": {"requests": {"storage": "1Gi"}}, "volumeName": "pv-of-b"}})];
            change(&mut wm);
            crate::migration::envelope::sign_request(&KEYS, &mut wm.spec).unwrap();
            let mut peer = peer(true);
            peer.spec.admission.claims.allow = true;
            check(&wm, "a", Some(&peer), &RULES)
        };
        let checked = stateful(&|_| {}).unwrap();
        let kinds: Vec<&str> = checked.objects.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, ["PersistentVolumeClaim", "ConfigMap", "Deployment"]);
        // The claim is created empty: no volume of this cluster is bound.
        assert_eq!(checked.objects[0].1["spec"].get("volumeName"), None);
        let refused = stateful(&|wm| wm.spec.claims.clear()).unwrap_err();
        assert_eq!(refused.reason, "VolumeNotAllowed");
        let refused = stateful(&|wm| {
            let mut extra = wm.spec.claims[0].clone();
            extra["metadata"]["name"] = "billing".into();
            wm.spec.claims.push(extra);
        })
        .unwrap_err();
        assert_eq!(refused.reason, reasons::INVALID_MANIFEST);
        assert!(refused.message.contains("spec.claims[1]"), "{refused:?}");
        let refused = stateful(&|wm| {
            wm.spec.strategy = Some(crate::crd::MigrationStrategy::progressive());
        })
        .unwrap_err();
        assert_eq!(refused.reason, reasons::INVALID_STRATEGY);
        let refused = stateful(&|wm| {
            wm.spec.partial = Some(crate::crd::PartialMove { replicas: 1, of: 2 });
            wm.spec.workload["spec"]["replicas"] = 1.into();
        })
        .unwrap_err();
        assert_eq!(refused.reason, reasons::INVALID_STRATEGY);
    }

    static KEYS: std::sync::LazyLock<crate::trust::ClusterKeys> =
        std::sync::LazyLock::new(|| crate::trust::ClusterKeys::generate().unwrap());

    fn peer(accept_from: bool) -> Peer {
        let mut spec: ClusterPeerSpec = serde_json::from_value(json!({
            "kubeconfigSecretRef": {"namespace": "f", "name": "k", "key": "k"},
            "region": "r", "acceptFrom": accept_from, "allowedNamespaces": ["apps"],
        }))
        .unwrap();
        spec.public_keys = KEYS.public_keys();
        Peer::new("a", spec)
    }

    #[test]
    fn only_a_request_the_peer_signed_as_it_is_passes() {
        let p = peer(true);
        let mut wm = request("a", "apps", json!([]));
        wm.spec.target_namespace = "other".into();
        assert_eq!(reason(&wm, Some(&p)), "BadSignature");
        wm.spec.signature = None;
        assert_eq!(reason(&wm, Some(&p)), "Unsigned");
        let mut stranger = p.clone();
        stranger.spec.public_keys = crate::trust::ClusterKeys::generate().unwrap().public_keys();
        assert_eq!(
            reason(&request("a", "apps", json!([])), Some(&stranger)),
            "UnknownKey"
        );
    }

    const RULES: Rules<'static> = Rules {
        operator_namespace: Some("ferry"),
        usage: Usage {
            replicas: 0,
            cpu_millis: 0,
            memory_bytes: 0,
        },
    };

    fn reason(wm: &WorkloadMigration, peer: Option<&Peer>) -> &'static str {
        match check(wm, "a", peer, &RULES) {
            Ok(_) => "Ok",
            Err(objection) => objection.reason,
        }
    }

    #[test]
    fn the_sender_is_the_inbox_never_the_claimed_source() {
        let p = peer(true);
        assert_eq!(reason(&request("a", "apps", json!([])), Some(&p)), "Ok");
        assert_eq!(
            reason(&request("c", "apps", json!([])), Some(&p)),
            reasons::SOURCE_MISMATCH
        );
        assert_eq!(
            reason(&request("a", "apps", json!([])), None),
            reasons::UNKNOWN_PEER
        );
        assert_eq!(
            reason(&request("a", "apps", json!([])), Some(&peer(false))),
            reasons::PEER_NOT_ACCEPTED
        );
    }

    #[test]
    fn protected_own_and_inbox_namespaces_are_never_targets() {
        let p = peer(true);
        for namespace in ["kube-system", "ferry", "ferry-inbox-a", "ferry-inbox-c"] {
            assert_eq!(
                reason(&request("a", namespace, json!([])), Some(&p)),
                reasons::NAMESPACE_NOT_ALLOWED,
                "{namespace}"
            );
        }
    }

    #[test]
    fn only_opaque_secrets_travel() {
        let p = peer(true);
        let secret = |type_: Value| json!([{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": type_}]);
        assert_eq!(
            reason(&request("a", "apps", secret(json!("Opaque"))), Some(&p)),
            "Ok"
        );
        assert_eq!(
            reason(&request("a", "apps", secret(Value::Null)), Some(&p)),
            "Ok"
        );
        for type_ in [
            "kubernetes.io/service-account-token",
            "kubernetes.io/dockerconfigjson",
        ] {
            assert_eq!(
                reason(&request("a", "apps", secret(json!(type_))), Some(&p)),
                reasons::SECRET_TYPE_NOT_ALLOWED
            );
        }
    }

    #[test]
    fn checked_objects_come_in_creation_order() {
        let p = peer(true);
        let secrets = json!([{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]);
        let checked = check(&request("a", "apps", secrets), "a", Some(&p), &RULES).unwrap();
        let kinds: Vec<&str> = checked.objects.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, ["ConfigMap", "Secret", "Deployment"]);
    }

    /// The request with `dependents` beside a workload labelled `app: web`.
    fn with_dependents(dependents: Value) -> WorkloadMigration {
        let mut wm = request("a", "apps", json!([]));
        wm.spec.workload["spec"]["selector"] = json!({"matchLabels": {"app": "web"}});
        wm.spec.workload["spec"]["template"]["metadata"] = json!({"labels": {"app": "web"}});
        wm.spec.dependents = serde_json::from_value(dependents).unwrap();
        crate::migration::envelope::sign_request(&KEYS, &mut wm.spec).unwrap();
        wm
    }

    #[test]
    fn dependents_come_after_the_config_and_before_the_workload() {
        let wm = with_dependents(json!([
            {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "clusterIP": "10.1.2.3"}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web"}},
        ]));
        let checked = check(&wm, "a", Some(&peer(true)), &RULES).unwrap();
        let kinds: Vec<&str> = checked.objects.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            kinds,
            [
                "ConfigMap",
                "ServiceAccount",
                "Service",
                "HorizontalPodAutoscaler",
                "Deployment"
            ]
        );
        // The receiver sanitises what it creates too.
        assert!(checked.objects[2].1["spec"].get("clusterIP").is_none());
        // Each object, and the export a moved Service may get.
        let wanted = wanted_names(&wm);
        assert_eq!(wanted.len(), 6, "{wanted:?}");
        assert!(wanted.contains(&(SERVICE_EXPORT.to_owned(), "web".to_owned())));
    }

    #[test]
    fn a_refused_dependent_is_named_by_its_place_in_the_request() {
        let wm = with_dependents(json!([
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}}},
            {"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "web", "annotations": {"eks.amazonaws.com/role-arn": "x"}}},
        ]));
        let objection = match check(&wm, "a", Some(&peer(true)), &RULES) {
            Ok(_) => panic!("an annotated ServiceAccount passed"),
            Err(objection) => objection,
        };
        assert_eq!(objection.reason, "ServiceAccountNotAllowed");
        assert!(
            objection.message.starts_with(
                "spec.dependents[1].metadata.annotations[eks.amazonaws.com/role-arn]: "
            ),
            "{}",
            objection.message
        );
        let wm = with_dependents(json!([
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                "spec": {"selector": {"app": "web"}, "externalIPs": ["1.2.3.4"]}},
        ]));
        assert_eq!(reason(&wm, Some(&peer(true))), "ServiceNotAllowed");
    }

    #[test]
    fn the_digest_ignores_the_intent_and_sees_everything_else() {
        let wm = request("a", "apps", json!([]));
        let mut with_intent = wm.spec.clone();
        with_intent.intent = Some(Intent {
            action: IntentAction::RollBack,
            sequence: 7,
            step: None,
            signature: None,
        });
        assert_eq!(content_digest(&wm.spec), content_digest(&with_intent));
        let mut swapped = wm.spec.clone();
        swapped.workload["spec"]["template"]["spec"]["containers"][0]["image"] = "evil".into();
        assert_ne!(content_digest(&wm.spec), content_digest(&swapped));
        // The sealed data is covered by its signed digest, and is cleared.
        let mut sealed = request(
            "a",
            "apps",
            json!([{"metadata": {"name": "s"},
            "sealedData": {"ciphertext": "x"}, "sealedDigest": "sha256:1"}]),
        );
        let with_data = content_digest(&sealed.spec);
        sealed.spec.secrets[0]
            .as_object_mut()
            .unwrap()
            .remove("sealedData");
        assert_eq!(content_digest(&sealed.spec), with_data);
    }

    #[test]
    fn wanted_names_read_malformed_requests_leniently() {
        let mut wm = request(
            "a",
            "apps",
            json!([{"metadata": {}}, {"metadata": {"name": "s"}}]),
        );
        wm.spec.workload = json!("not an object");
        assert_eq!(
            wanted_names(&wm),
            [
                ("ConfigMap".to_owned(), "cm".to_owned()),
                ("Secret".to_owned(), "s".to_owned())
            ]
        );
    }
}
