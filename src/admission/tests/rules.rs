//! Ferry's own rules, each refused by default and relaxed by exactly its
//! allow-list.

use serde_json::{Value, json};

use super::*;
use crate::crd::AllowedToleration;

fn spec_with(change: impl FnOnce(&mut AdmissionSpec)) -> AdmissionSpec {
    let mut spec = AdmissionSpec::default();
    change(&mut spec);
    spec
}

fn assert_refused(workload: &Value, spec: &AdmissionSpec, reason: &str, at: &str) -> Violation {
    let refused = refusal(workload, spec);
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (reason, field(at).as_str()),
        "{}",
        refused.message
    );
    refused
}

fn secret(name: &str, kind: Option<&str>) -> Value {
    let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "apps"}, "data": {}});
    if let Some(kind) = kind {
        secret["type"] = json!(kind);
    }
    secret
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn account(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
}

#[test]
fn another_service_account_needs_the_allow_list_or_to_travel() {
    let workload = with(&[(
        &format!("{POD}.serviceAccountName"),
        json!("cluster-admin-sa"),
    )]);
    let refused = assert_refused(
        &workload,
        &AdmissionSpec::default(),
        reasons::SERVICE_ACCOUNT_NOT_ALLOWED,
        &format!("{POD}.serviceAccountName"),
    );
    assert!(refused.message.contains("cluster-admin-sa"));
    let listed = spec_with(|s| s.service_accounts = vec!["cluster-admin-sa".into()]);
    assert_eq!(check(&workload, &listed), Ok(()));
    let accounts = [account("cluster-admin-sa")];
    let incoming = Incoming {
        service_accounts: &accounts,
        claims: &[],
        hook_image: None,
        ..alone(&workload)
    };
    assert_eq!(
        review(&incoming, &AdmissionSpec::default(), &Usage::default()),
        Ok(())
    );
}

#[test]
fn the_legacy_service_account_field_is_read_too() {
    let workload = with(&[(&format!("{POD}.serviceAccount"), json!("admin"))]);
    assert_refused(
        &workload,
        &AdmissionSpec::default(),
        reasons::SERVICE_ACCOUNT_NOT_ALLOWED,
        &format!("{POD}.serviceAccount"),
    );
    let both = with(&[
        (&format!("{POD}.serviceAccount"), json!("admin")),
        (&format!("{POD}.serviceAccountName"), json!("web")),
    ]);
    let accounts = [account("web")];
    let incoming = Incoming {
        service_accounts: &accounts,
        claims: &[],
        hook_image: None,
        ..alone(&both)
    };
    let refused = review(&incoming, &AdmissionSpec::default(), &Usage::default()).unwrap_err();
    assert_eq!(refused.field, format!("{POD}.serviceAccount"));
}

#[test]
fn the_default_service_account_runs_without_a_token_unless_listed() {
    let at = format!("{POD}.automountServiceAccountToken");
    let mut unset = compliant();
    remove(&mut unset, &at);
    let refused = assert_refused(
        &unset,
        &AdmissionSpec::default(),
        reasons::SERVICE_ACCOUNT_NOT_ALLOWED,
        &at,
    );
    assert!(refused.message.contains("unset"), "{}", refused.message);
    let mounted = with(&[(&at, json!(true))]);
    assert_refused(
        &mounted,
        &AdmissionSpec::default(),
        reasons::SERVICE_ACCOUNT_NOT_ALLOWED,
        &at,
    );
    let listed = spec_with(|s| s.service_accounts = vec!["default".into()]);
    assert_eq!(check(&mounted, &listed), Ok(()));
}

#[test]
fn a_node_name_is_refused_whatever_the_allow_lists() {
    let workload = with(&[(&format!("{POD}.nodeName"), json!("control-plane-1"))]);
    let everything = spec_with(|s| {
        s.service_accounts = vec!["default".into()];
        s.tolerations = vec![AllowedToleration {
            operator: Some("Exists".into()),
            ..Default::default()
        }];
    });
    assert_refused(
        &workload,
        &everything,
        reasons::SCHEDULING_NOT_ALLOWED,
        &format!("{POD}.nodeName"),
    );
}

#[test]
fn tolerations_must_match_an_allowed_one_exactly() {
    let everything = with(&[(
        &format!("{POD}.tolerations"),
        json!([{"operator": "Exists"}]),
    )]);
    assert_refused(
        &everything,
        &AdmissionSpec::default(),
        reasons::SCHEDULING_NOT_ALLOWED,
        &format!("{POD}.tolerations.0"),
    );
    let spot = AllowedToleration {
        key: Some("pool".into()),
        operator: None,
        value: Some("spot".into()),
        effect: Some("NoSchedule".into()),
    };
    let listed = spec_with(|s| s.tolerations = vec![spot.clone()]);
    let matching = with(&[(
        &format!("{POD}.tolerations"),
        json!([{"key": "pool", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}]),
    )]);
    assert_eq!(check(&matching, &listed), Ok(()));
    // The allowed toleration does not stretch to other effects, nor to
    // "every taint".
    let other_effect = with(&[(
        &format!("{POD}.tolerations"),
        json!([{"key": "pool", "value": "spot", "effect": "NoExecute"}]),
    )]);
    assert_refused(
        &other_effect,
        &listed,
        reasons::SCHEDULING_NOT_ALLOWED,
        &format!("{POD}.tolerations.0"),
    );
    assert_refused(
        &everything,
        &listed,
        reasons::SCHEDULING_NOT_ALLOWED,
        &format!("{POD}.tolerations.0"),
    );
}

#[test]
fn priority_and_runtime_classes_are_refused_unless_listed() {
    let urgent = with(&[(
        &format!("{POD}.priorityClassName"),
        json!("system-cluster-critical"),
    )]);
    assert_refused(
        &urgent,
        &AdmissionSpec::default(),
        reasons::SCHEDULING_NOT_ALLOWED,
        &format!("{POD}.priorityClassName"),
    );
    let listed = spec_with(|s| s.priority_classes = vec!["system-cluster-critical".into()]);
    assert_eq!(check(&urgent, &listed), Ok(()));
    let runtime = with(&[(&format!("{POD}.runtimeClassName"), json!("unsandboxed"))]);
    assert_refused(
        &runtime,
        &AdmissionSpec::default(),
        reasons::SCHEDULING_NOT_ALLOWED,
        &format!("{POD}.runtimeClassName"),
    );
}

#[test]
fn resource_claims_are_refused() {
    let workload = with(&[(
        &format!("{POD}.resourceClaims"),
        json!([{"name": "gpu", "resourceClaimName": "their-gpu"}]),
    )]);
    assert_refused(
        &workload,
        &AdmissionSpec::default(),
        reasons::RESOURCE_CLAIM_NOT_ALLOWED,
        &format!("{POD}.resourceClaims.0"),
    );
}

#[test]
fn claims_and_ephemeral_volumes_are_refused_under_every_profile() {
    for (volume, at) in [
        (
            json!({"name": "data", "persistentVolumeClaim": {"claimName": "their-data"}}),
            "persistentVolumeClaim.claimName",
        ),
        (
            json!({"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": {"dataSource": {"kind": "PersistentVolumeClaim", "name": "their-data"}}}}}),
            "ephemeral",
        ),
        (
            json!({"name": "root", "hostPath": {"path": "/"}}),
            "hostPath",
        ),
    ] {
        let workload = with(&[(&format!("{POD}.volumes.1"), volume)]);
        let spec = profile(PodSecurityProfile::Privileged);
        assert_refused(
            &workload,
            &spec,
            reasons::VOLUME_NOT_ALLOWED,
            &format!("{POD}.volumes.1.{at}"),
        );
    }
}

fn claim(name: &str, storage: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}})
}

#[test]
fn a_pod_mounts_a_claim_only_when_it_travels_and_the_peer_may_send_claims() {
    let workload = with(&[(
        &format!("{POD}.volumes.1"),
        json!({"name": "data", "persistentVolumeClaim": {"claimName": "data"}}),
    )]);
    let claims = [claim("data", "5Gi")];
    let incoming = Incoming {
        claims: &claims,
        ..alone(&workload)
    };
    let closed = AdmissionSpec::default();
    let refused = review(&incoming, &closed, &Usage::default()).unwrap_err();
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (reasons::CLAIMS_NOT_ALLOWED, "claims[0]")
    );
    let open = spec_with(|s| s.claims.allow = true);
    assert_eq!(review(&incoming, &open, &Usage::default()), Ok(()));
    // Another name than the travelling claim's is one of this cluster's.
    let other = with(&[(
        &format!("{POD}.volumes.1"),
        json!({"name": "data", "persistentVolumeClaim": {"claimName": "billing"}}),
    )]);
    let refused = review(
        &Incoming {
            workload: &other,
            ..incoming
        },
        &open,
        &Usage::default(),
    )
    .unwrap_err();
    assert_eq!(refused.reason, reasons::VOLUME_NOT_ALLOWED);
    // Travelling claims count against the storage cap, in all.
    let capped = spec_with(|s| {
        s.claims.allow = true;
        s.claims.max_storage = Some(crate::crd::Quantity::new("8Gi"));
    });
    let two = [claim("data", "5Gi"), claim("logs", "5Gi")];
    let refused = review(
        &Incoming {
            claims: &two,
            ..incoming
        },
        &capped,
        &Usage::default(),
    )
    .unwrap_err();
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (
            reasons::CAP_EXCEEDED,
            "claims[1].spec.resources.requests.storage"
        )
    );
    let no_size = [json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"}, "spec": {}})];
    let refused = review(
        &Incoming {
            claims: &no_size,
            ..incoming
        },
        &capped,
        &Usage::default(),
    )
    .unwrap_err();
    assert_eq!(refused.reason, reasons::RESOURCES_MISSING);
}

#[test]
fn a_stateful_set_and_an_import_hook_need_the_peer_to_send_claims() {
    let mut set = compliant();
    set["kind"] = json!("StatefulSet");
    let closed = AdmissionSpec::default();
    let refused = refusal(&set, &closed);
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (reasons::CLAIMS_NOT_ALLOWED, "kind")
    );
    let open = spec_with(|s| s.claims.allow = true);
    assert_eq!(review(&alone(&set), &open, &Usage::default()), Ok(()));
    // The hook's image is judged like the workload's own.
    let workload = compliant();
    let hooked = Incoming {
        hook_image: Some("evil.example/miner:1"),
        ..alone(&workload)
    };
    let refused = review(&hooked, &closed, &Usage::default()).unwrap_err();
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (reasons::CLAIMS_NOT_ALLOWED, "hooks.import")
    );
    let registries = spec_with(|s| {
        s.claims.allow = true;
        s.image_registries = vec!["registry.example".into()];
    });
    let pulled = with(&[(&format!("{C0}.image"), json!("registry.example/app:1"))]);
    let hooked = Incoming {
        hook_image: Some("evil.example/miner:1"),
        ..alone(&pulled)
    };
    let refused = review(&hooked, &registries, &Usage::default()).unwrap_err();
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (reasons::IMAGE_NOT_ALLOWED, "hooks.import.image")
    );
}

#[test]
fn csi_volumes_need_a_listed_driver_and_an_allowed_publish_secret() {
    let at = format!("{POD}.volumes.1");
    let workload = with(&[(
        &at,
        json!({"name": "vault", "csi": {"driver": "secrets-store.csi.k8s.io"}}),
    )]);
    assert_refused(
        &workload,
        &AdmissionSpec::default(),
        reasons::VOLUME_NOT_ALLOWED,
        &format!("{at}.csi.driver"),
    );
    let listed = spec_with(|s| s.csi_drivers = vec!["secrets-store.csi.k8s.io".into()]);
    assert_eq!(check(&workload, &listed), Ok(()));
    let with_secret = with(&[(
        &at,
        json!({"name": "vault", "csi": {"driver": "secrets-store.csi.k8s.io", "nodePublishSecretRef": {"name": "vault-creds"}}}),
    )]);
    assert_refused(
        &with_secret,
        &listed,
        reasons::REFERENCE_NOT_ALLOWED,
        &format!("{at}.csi.nodePublishSecretRef.name"),
    );
}

/// Every place a pod names a Secret or ConfigMap, refused when the object
/// neither travels nor is listed, and passed by each of those.
#[test]
fn references_need_the_object_to_travel_or_be_listed() {
    let cases: Vec<(&str, Value, &str, bool)> = vec![
        (
            "spec.template.spec.volumes.1",
            json!({"name": "s", "secret": {"secretName": "db"}}),
            "spec.template.spec.volumes.1.secret.secretName",
            true,
        ),
        (
            "spec.template.spec.volumes.1",
            json!({"name": "c", "configMap": {"name": "db"}}),
            "spec.template.spec.volumes.1.configMap.name",
            false,
        ),
        (
            "spec.template.spec.volumes.1",
            json!({"name": "p", "projected": {"sources": [{"downwardAPI": {}}, {"secret": {"name": "db"}}]}}),
            "spec.template.spec.volumes.1.projected.sources.1.secret.name",
            true,
        ),
        (
            "spec.template.spec.volumes.1",
            json!({"name": "p", "projected": {"sources": [{"configMap": {"name": "db"}}]}}),
            "spec.template.spec.volumes.1.projected.sources.0.configMap.name",
            false,
        ),
        (
            "spec.template.spec.containers.0.env",
            json!([{"name": "A", "value": "1"}, {"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "p"}}}]),
            "spec.template.spec.containers.0.env.1.valueFrom.secretKeyRef.name",
            true,
        ),
        (
            "spec.template.spec.containers.0.env",
            json!([{"name": "P", "valueFrom": {"configMapKeyRef": {"name": "db", "key": "p"}}}]),
            "spec.template.spec.containers.0.env.0.valueFrom.configMapKeyRef.name",
            false,
        ),
        (
            "spec.template.spec.containers.0.envFrom",
            json!([{"secretRef": {"name": "db"}}]),
            "spec.template.spec.containers.0.envFrom.0.secretRef.name",
            true,
        ),
        (
            "spec.template.spec.containers.0.envFrom",
            json!([{"configMapRef": {"name": "db"}}]),
            "spec.template.spec.containers.0.envFrom.0.configMapRef.name",
            false,
        ),
        (
            "spec.template.spec.imagePullSecrets",
            json!([{"name": "db"}]),
            "spec.template.spec.imagePullSecrets.0.name",
            true,
        ),
        (
            "spec.template.spec.initContainers.0",
            json!({"name": "i", "image": "busybox", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}, "envFrom": [{"secretRef": {"name": "db"}}]}),
            "spec.template.spec.initContainers.0.envFrom.0.secretRef.name",
            true,
        ),
    ];
    for (path, value, at, is_secret) in cases {
        let workload = with(&[(path, value)]);
        let refused = assert_refused(
            &workload,
            &AdmissionSpec::default(),
            reasons::REFERENCE_NOT_ALLOWED,
            at,
        );
        assert!(refused.message.contains("\"db\""), "{}", refused.message);
        let listed = spec_with(|s| {
            if is_secret {
                s.secrets = vec!["db".into()]
            } else {
                s.config_maps = vec!["db".into()]
            }
        });
        assert_eq!(check(&workload, &listed), Ok(()), "{at}");
        // The other kind's list does not help.
        let wrong_list = spec_with(|s| {
            if is_secret {
                s.config_maps = vec!["db".into()]
            } else {
                s.secrets = vec!["db".into()]
            }
        });
        assert!(check(&workload, &wrong_list).is_err(), "{at}");
        let (secrets, config_maps) = if is_secret {
            (vec![secret("db", None)], vec![])
        } else {
            (vec![], vec![config_map("db")])
        };
        let incoming = Incoming {
            secrets: &secrets,
            config_maps: &config_maps,
            ..alone(&workload)
        };
        assert_eq!(
            review(&incoming, &AdmissionSpec::default(), &Usage::default()),
            Ok(()),
            "{at}"
        );
    }
}

#[test]
fn a_projected_token_needs_an_allowed_service_account() {
    let at = format!("{POD}.volumes.1");
    let workload = with(&[(
        &at,
        json!({"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "audience": "vault"}}]}}),
    )]);
    assert_refused(
        &workload,
        &AdmissionSpec::default(),
        reasons::VOLUME_NOT_ALLOWED,
        &format!("{at}.projected.sources.0.serviceAccountToken"),
    );
    let listed = spec_with(|s| s.service_accounts = vec!["default".into()]);
    assert_eq!(check(&workload, &listed), Ok(()));
}

#[test]
fn only_opaque_secrets_travel() {
    let workload = compliant();
    for kind in [
        "kubernetes.io/service-account-token",
        "kubernetes.io/dockerconfigjson",
        "kubernetes.io/tls",
    ] {
        let secrets = [secret("ok", Some("Opaque")), secret("bad", Some(kind))];
        let incoming = Incoming {
            secrets: &secrets,
            ..alone(&workload)
        };
        let refused = review(&incoming, &AdmissionSpec::default(), &Usage::default()).unwrap_err();
        assert_eq!(
            (refused.reason, refused.field.as_str()),
            (reasons::SECRET_TYPE_NOT_ALLOWED, "secrets[1].type")
        );
        assert!(refused.message.contains(kind));
    }
    let secrets = [secret("untyped", None)];
    let incoming = Incoming {
        secrets: &secrets,
        ..alone(&workload)
    };
    assert_eq!(
        review(&incoming, &AdmissionSpec::default(), &Usage::default()),
        Ok(())
    );
}

#[test]
fn a_travelling_service_account_brings_nothing_but_its_name() {
    let workload = compliant();
    let annotated = json!({"kind": "ServiceAccount", "metadata": {"name": "web", "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/admin"}}});
    let with_tokens = json!({"kind": "ServiceAccount", "metadata": {"name": "web"}, "secrets": [{"name": "old-token"}]});
    for (object, at) in [
        (
            annotated,
            "serviceAccounts[0].metadata.annotations[eks.amazonaws.com/role-arn]",
        ),
        (with_tokens, "serviceAccounts[0].secrets[0]"),
    ] {
        let accounts = [object];
        let incoming = Incoming {
            service_accounts: &accounts,
            claims: &[],
            hook_image: None,
            ..alone(&workload)
        };
        let refused = review(&incoming, &AdmissionSpec::default(), &Usage::default()).unwrap_err();
        assert_eq!(
            (refused.reason, refused.field.as_str()),
            (reasons::SERVICE_ACCOUNT_NOT_ALLOWED, at)
        );
    }
}

#[test]
fn travelling_objects_stay_in_the_workload_namespace_and_kind() {
    let workload = compliant();
    let elsewhere =
        [json!({"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}})];
    let incoming = Incoming {
        config_maps: &elsewhere,
        ..alone(&workload)
    };
    let refused = review(&incoming, &AdmissionSpec::default(), &Usage::default()).unwrap_err();
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (
            reasons::INVALID_MANIFEST,
            "configMaps[0].metadata.namespace"
        )
    );
    let disguised = [json!({"kind": "Secret", "metadata": {"name": "c"}})];
    let incoming = Incoming {
        config_maps: &disguised,
        ..alone(&workload)
    };
    let refused = review(&incoming, &AdmissionSpec::default(), &Usage::default()).unwrap_err();
    assert_eq!(refused.field, "configMaps[0].kind");
}

#[test]
fn images_come_only_from_listed_registries_when_there_is_a_list() {
    let at = format!("{C0}.image");
    assert_eq!(
        check(&with(&[(&at, json!("nginx"))]), &AdmissionSpec::default()),
        Ok(())
    );
    let listed = spec_with(|s| s.image_registries = vec!["ghcr.io/acme".into()]);
    let refused = assert_refused(
        &with(&[(&at, json!("nginx"))]),
        &listed,
        reasons::IMAGE_NOT_ALLOWED,
        &at,
    );
    assert!(
        refused.message.contains("docker.io/library/nginx"),
        "{}",
        refused.message
    );
    assert_eq!(
        check(&with(&[(&at, json!("ghcr.io/acme/web:1"))]), &listed),
        Ok(())
    );
    assert_refused(
        &with(&[(&at, json!("ghcr.io/acme-evil/web:1"))]),
        &listed,
        reasons::IMAGE_NOT_ALLOWED,
        &at,
    );
    assert_refused(
        &with(&[(&at, json!("ghcr.io/acme/../x"))]),
        &listed,
        reasons::IMAGE_NOT_ALLOWED,
        &at,
    );
    let init = with(&[
        (&at, json!("ghcr.io/acme/web:1")),
        (
            "spec.template.spec.initContainers.0",
            json!({"name": "i", "image": "evil.io/x", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}),
        ),
    ]);
    assert_refused(
        &init,
        &listed,
        reasons::IMAGE_NOT_ALLOWED,
        "spec.template.spec.initContainers.0.image",
    );
}

#[test]
fn the_rich_deployment_passes_with_its_objects_and_allow_lists() {
    let (workload, spec, config_maps, secrets) = rich();
    let incoming = Incoming {
        workload: &workload,
        config_maps: &config_maps,
        secrets: &secrets,
        service_accounts: &[],
        claims: &[],
        hook_image: None,
    };
    assert_eq!(review(&incoming, &spec, &Usage::default()), Ok(()));
    // Without its Secrets the references are refused.
    let incoming = Incoming {
        secrets: &[],
        ..incoming
    };
    assert_eq!(
        review(&incoming, &spec, &Usage::default())
            .unwrap_err()
            .reason,
        reasons::REFERENCE_NOT_ALLOWED
    );
}

/// The bench's Deployment (3 containers and an init container, 4 volumes),
/// its travelling objects and a spec that admits it.
pub(super) fn rich() -> (Value, AdmissionSpec, Vec<Value>, Vec<Value>) {
    let workload: Value = serde_json::from_str(RICH).unwrap();
    let spec = spec_with(|s| {
        s.tolerations = vec![AllowedToleration {
            key: Some("pool".into()),
            operator: Some("Equal".into()),
            value: Some("spot".into()),
            effect: Some("NoSchedule".into()),
        }];
        s.image_registries = vec![
            "ghcr.io/acme".into(),
            "docker.io/envoyproxy".into(),
            "quay.io/prometheus".into(),
        ];
        s.caps.per_request.cpu = Some("4".into());
        s.caps.total.memory = Some("64Gi".into());
    });
    (
        workload,
        spec,
        vec![config_map("shop-config")],
        vec![secret("shop-db", Some("Opaque")), secret("shop-tls", None)],
    )
}
