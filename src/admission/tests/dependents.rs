//! `review_dependents`: each travelling kind admitted as it should be, and
//! each way of reaching beyond the moved workload refused, naming the
//! kind, the name and the field.

use super::*;
use crate::crd::{DependentsAdmission, ExposedServiceType, ResourceCaps};

fn service(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": spec})
}

fn autoscaler(target: Value, max: Value) -> Value {
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"}, "spec": {"scaleTargetRef": target, "maxReplicas": max}})
}

fn budget(spec: Value) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"}, "spec": spec})
}

fn policy(spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "web"}, "spec": spec})
}

const WEB: &str = r#"{"matchLabels": {"app": "web"}}"#;

fn web() -> Value {
    serde_json::from_str(WEB).unwrap()
}

fn target() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
}

fn judge(dependents: &[Value], spec: &AdmissionSpec) -> Result<(), Violation> {
    review_dependents(&compliant(), dependents, spec, &Usage::default())
}

fn refused(dependent: Value, spec: &AdmissionSpec) -> Violation {
    judge(&[dependent], spec).expect_err("refused")
}

#[test]
fn every_kind_that_concerns_the_workload_only_is_admitted() {
    let dependents = [
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web"}}),
        service(json!({"selector": {"app": "web"}, "ports": [{"port": 80}]})),
        service(json!({"type": "ClusterIP", "clusterIP": "None", "selector": {"app": "web"}})),
        autoscaler(target(), json!(2)),
        budget(json!({"selector": web(), "maxUnavailable": 1})),
        policy(
            json!({"podSelector": web(), "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {}}]}]}),
        ),
    ];
    judge(&dependents, &AdmissionSpec::default()).unwrap();
}

#[test]
fn a_service_never_gets_external_ips_or_an_external_name() {
    let mut open = AdmissionSpec::default();
    open.dependents.service_types = vec![
        ExposedServiceType::NodePort,
        ExposedServiceType::LoadBalancer,
    ];
    let v = refused(
        service(json!({"selector": {"app": "web"}, "externalIPs": ["10.0.0.9"]})),
        &open,
    );
    assert_eq!(v.reason, reasons::SERVICE_NOT_ALLOWED);
    assert_eq!(v.field, "dependents[0].spec.externalIPs");
    assert!(v.message.starts_with("Service web: "), "{}", v.message);
    assert!(v.message.contains("CVE-2020-8554"), "{}", v.message);
    let v = refused(
        service(json!({"type": "ExternalName", "externalName": "example.com"})),
        &open,
    );
    assert_eq!(
        (v.reason, v.field.as_str()),
        (reasons::SERVICE_NOT_ALLOWED, "dependents[0].spec.type")
    );
}

#[test]
fn exposed_service_types_need_the_receivers_opt_in() {
    for (type_, allowed) in [
        ("NodePort", ExposedServiceType::NodePort),
        ("LoadBalancer", ExposedServiceType::LoadBalancer),
    ] {
        let exposed = service(json!({"type": type_, "selector": {"app": "web"}}));
        let v = refused(exposed.clone(), &AdmissionSpec::default());
        assert_eq!(v.reason, reasons::SERVICE_NOT_ALLOWED, "{type_}");
        assert!(
            v.message.contains("spec.admission.dependents.serviceTypes"),
            "{}",
            v.message
        );
        let mut spec = AdmissionSpec::default();
        spec.dependents.service_types = vec![allowed];
        judge(&[exposed], &spec).unwrap();
    }
}

#[test]
fn selectors_that_reach_other_pods_are_refused() {
    let cases = [
        service(json!({"selector": {"tier": "front"}})),
        service(json!({})),
        budget(json!({"selector": {}, "maxUnavailable": 1})),
        budget(json!({"selector": {"matchLabels": {"app": "db"}}})),
        policy(json!({"podSelector": {}})),
        policy(
            json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
        ),
    ];
    for dependent in cases {
        let v = refused(dependent.clone(), &AdmissionSpec::default());
        assert_eq!(v.reason, reasons::SELECTOR_NOT_ALLOWED, "{dependent}");
        assert!(v.field.starts_with("dependents[0].spec."), "{}", v.field);
    }
}

#[test]
fn an_autoscaler_scales_the_moved_deployment_only() {
    for other in [
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "billing"}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"}),
        json!({"apiVersion": "example.com/v1", "kind": "Deployment", "name": "web"}),
        json!({}),
    ] {
        let v = refused(
            autoscaler(other.clone(), json!(3)),
            &AdmissionSpec::default(),
        );
        assert_eq!(v.reason, reasons::DEPENDENT_NOT_ALLOWED, "{other}");
        assert_eq!(v.field, "dependents[0].spec.scaleTargetRef");
        assert!(
            v.message
                .starts_with("HorizontalPodAutoscaler web: dependents[0].spec.scaleTargetRef"),
            "{}",
            v.message
        );
    }
    let v = refused(autoscaler(target(), json!("10")), &AdmissionSpec::default());
    assert_eq!(v.reason, reasons::INVALID_MANIFEST);
}

#[test]
fn an_autoscaler_counts_against_the_caps_at_its_max_replicas() {
    let mut spec = AdmissionSpec::default();
    spec.caps.per_request = ResourceCaps {
        replicas: Some(5),
        ..ResourceCaps::default()
    };
    judge(&[autoscaler(target(), json!(5))], &spec).unwrap();
    let v = judge(&[autoscaler(target(), json!(6))], &spec).expect_err("over the cap");
    assert_eq!(v.reason, reasons::CAP_EXCEEDED);
    assert_eq!(v.field, "dependents[0].spec.maxReplicas");
    assert!(v.message.contains("to 6 replicas"), "{}", v.message);
}

#[test]
fn a_budget_that_forbids_every_eviction_is_refused() {
    for field in [
        json!({"maxUnavailable": 0}),
        json!({"maxUnavailable": "0%"}),
        json!({"minAvailable": "100%"}),
    ] {
        let mut spec = field.clone();
        spec["selector"] = web();
        let v = refused(budget(spec), &AdmissionSpec::default());
        assert_eq!(v.reason, reasons::DEPENDENT_NOT_ALLOWED, "{field}");
    }
    judge(
        &[budget(json!({"selector": web(), "minAvailable": 1}))],
        &AdmissionSpec::default(),
    )
    .unwrap();
}

#[test]
fn network_policy_egress_rules_need_the_receivers_opt_in() {
    let egress = policy(json!({"podSelector": web(), "policyTypes": ["Egress"],
        "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}));
    let v = refused(egress.clone(), &AdmissionSpec::default());
    assert_eq!(
        (v.reason, v.field.as_str()),
        (reasons::DEPENDENT_NOT_ALLOWED, "dependents[0].spec.egress")
    );
    let spec = AdmissionSpec {
        dependents: DependentsAdmission {
            network_policy_egress: true,
            ..DependentsAdmission::default()
        },
        ..AdmissionSpec::default()
    };
    judge(&[egress], &spec).unwrap();
    // A policy type Egress without rules only closes.
    let closed = policy(json!({"podSelector": web(), "policyTypes": ["Egress"]}));
    judge(&[closed], &AdmissionSpec::default()).unwrap();
}

#[test]
fn other_kinds_namespaces_and_floods_are_refused() {
    for (api_version, kind) in [
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("autoscaling/v1", "HorizontalPodAutoscaler"),
        ("v1", "Secret"),
    ] {
        let object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
        assert_eq!(
            refused(object, &AdmissionSpec::default()).reason,
            reasons::UNSUPPORTED_KIND
        );
    }
    let elsewhere = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "kube-system"}, "spec": {"selector": {"app": "web"}}});
    let v = refused(elsewhere, &AdmissionSpec::default());
    assert_eq!(v.field, "dependents[0].metadata.namespace");
    let flood = vec![service(json!({"selector": {"app": "web"}})); MAX_DEPENDENTS + 1];
    assert_eq!(
        judge(&flood, &AdmissionSpec::default()).unwrap_err().reason,
        reasons::DEPENDENT_NOT_ALLOWED
    );
    assert_eq!(
        refused(json!("a string"), &AdmissionSpec::default()).reason,
        reasons::INVALID_MANIFEST
    );
}
