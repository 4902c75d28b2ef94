//! Caps on replicas, CPU and memory, per request and in total.

use serde_json::json;

use super::*;
use crate::crd::ResourceCaps;

fn capped(per_request: ResourceCaps, total: ResourceCaps) -> AdmissionSpec {
    let mut spec = AdmissionSpec::default();
    spec.caps.per_request = per_request;
    spec.caps.total = total;
    spec
}

fn cpu(text: &str) -> ResourceCaps {
    ResourceCaps {
        cpu: Some(text.into()),
        ..Default::default()
    }
}

#[test]
fn no_caps_means_no_counting() {
    // The compliant Deployment's container has no CPU limit; without caps
    // nothing needs one.
    let mut workload = compliant();
    remove(&mut workload, &format!("{C0}.resources"));
    assert_eq!(check(&workload, &AdmissionSpec::default()), Ok(()));
}

#[test]
fn replicas_are_capped_per_request_and_in_total() {
    let workload = with(&[("spec.replicas", json!(5))]);
    let spec = capped(
        ResourceCaps {
            replicas: Some(4),
            ..Default::default()
        },
        ResourceCaps::default(),
    );
    let refused = refusal(&workload, &spec);
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (reasons::CAP_EXCEEDED, "spec.replicas")
    );
    assert!(
        refused.message.contains('5')
            && refused.message.contains('4')
            && refused.message.contains("perRequest"),
        "{}",
        refused.message
    );
    let spec = capped(
        ResourceCaps::default(),
        ResourceCaps {
            replicas: Some(10),
            ..Default::default()
        },
    );
    let usage = Usage {
        replicas: 6,
        ..Usage::default()
    };
    let refused = review(&alone(&workload), &spec, &usage).unwrap_err();
    assert_eq!(refused.reason, reasons::CAP_EXCEEDED);
    assert!(
        refused.message.contains("(6)")
            && refused.message.contains("11")
            && refused.message.contains("total"),
        "{}",
        refused.message
    );
    let usage = Usage {
        replicas: 5,
        ..Usage::default()
    };
    assert_eq!(review(&alone(&workload), &spec, &usage), Ok(()));
}

#[test]
fn an_absent_replica_count_is_one() {
    let mut workload = compliant();
    remove(&mut workload, "spec.replicas");
    let spec = capped(
        ResourceCaps {
            replicas: Some(1),
            ..Default::default()
        },
        ResourceCaps::default(),
    );
    assert_eq!(check(&workload, &spec), Ok(()));
}

#[test]
fn cpu_is_requests_times_replicas_against_the_cap() {
    // 2 replicas × 100m = 200m.
    assert_eq!(
        check(&compliant(), &capped(cpu("200m"), ResourceCaps::default())),
        Ok(())
    );
    let refused = refusal(&compliant(), &capped(cpu("199m"), ResourceCaps::default()));
    assert_eq!(refused.reason, reasons::CAP_EXCEEDED);
    assert_eq!(
        refused.field,
        "spec.template.spec.containers[*].resources.requests.cpu"
    );
    assert!(
        refused.message.contains("2 replicas × 100m CPU = 200") && refused.message.contains("199m"),
        "{}",
        refused.message
    );
    let total = capped(ResourceCaps::default(), cpu("1"));
    let usage = Usage {
        cpu_millis: 900,
        ..Usage::default()
    };
    let refused = review(&alone(&compliant()), &total, &usage).unwrap_err();
    assert!(
        refused.message.contains("(900)") && refused.message.contains("1100"),
        "{}",
        refused.message
    );
}

#[test]
fn memory_falls_back_to_the_limit_and_is_counted_in_bytes() {
    let mut workload = compliant();
    remove(&mut workload, &format!("{C0}.resources.requests"));
    // Limit 128Mi × 2 replicas = 256Mi.
    let spec = capped(
        ResourceCaps {
            memory: Some("256Mi".into()),
            ..Default::default()
        },
        ResourceCaps::default(),
    );
    assert_eq!(check(&workload, &spec), Ok(()));
    let spec = capped(
        ResourceCaps {
            memory: Some("255Mi".into()),
            ..Default::default()
        },
        ResourceCaps::default(),
    );
    assert_eq!(refusal(&workload, &spec).reason, reasons::CAP_EXCEEDED);
}

#[test]
fn a_container_without_requests_is_refused_while_a_cap_is_set() {
    let mut workload = compliant();
    remove(&mut workload, &format!("{C0}.resources"));
    let refused = refusal(&workload, &capped(ResourceCaps::default(), cpu("100")));
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (
            reasons::RESOURCES_MISSING,
            "spec.template.spec.containers[0].resources.requests.cpu"
        )
    );
}

#[test]
fn init_containers_and_sidecars_count_as_the_scheduler_counts_them() {
    let init = |restart: Option<&str>, millis: &str| {
        let mut c = json!({"name": "i", "image": "busybox", "resources": {"requests": {"cpu": millis}},
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}});
        if let Some(policy) = restart {
            c["restartPolicy"] = json!(policy);
        }
        c
    };
    // A regular init container of 1 CPU outweighs the 100m app: 1 CPU a pod.
    let workload = with(&[
        ("spec.replicas", json!(1)),
        ("spec.template.spec.initContainers.0", init(None, "1")),
    ]);
    assert_eq!(
        check(&workload, &capped(cpu("1"), ResourceCaps::default())),
        Ok(())
    );
    assert!(check(&workload, &capped(cpu("999m"), ResourceCaps::default())).is_err());
    // A sidecar adds to the app: 100m + 300m.
    let workload = with(&[
        ("spec.replicas", json!(1)),
        (
            "spec.template.spec.initContainers.0",
            init(Some("Always"), "300m"),
        ),
    ]);
    assert_eq!(
        check(&workload, &capped(cpu("400m"), ResourceCaps::default())),
        Ok(())
    );
    assert!(check(&workload, &capped(cpu("399m"), ResourceCaps::default())).is_err());
}

#[test]
fn pod_level_resources_win() {
    let workload = with(&[
        ("spec.replicas", json!(1)),
        (
            "spec.template.spec.resources",
            json!({"requests": {"cpu": "2"}}),
        ),
    ]);
    let refused = refusal(&workload, &capped(cpu("1"), ResourceCaps::default()));
    assert!(refused.message.contains("2000m"), "{}", refused.message);
}

#[test]
fn a_cap_that_does_not_parse_refuses_everything() {
    let refused = refusal(&compliant(), &capped(cpu("lots"), ResourceCaps::default()));
    assert_eq!(
        (refused.reason, refused.field.as_str()),
        (
            reasons::INVALID_ADMISSION_CONFIG,
            "spec.admission.caps.perRequest.cpu"
        )
    );
}

#[test]
fn huge_numbers_saturate_instead_of_wrapping() {
    let workload = with(&[
        ("spec.replicas", json!(i64::MAX)),
        (&format!("{C0}.resources.requests.cpu"), json!("1e300")),
    ]);
    let spec = capped(ResourceCaps::default(), cpu("1000000"));
    let usage = Usage {
        cpu_millis: u64::MAX,
        ..Usage::default()
    };
    assert_eq!(
        review(&alone(&workload), &spec, &usage).unwrap_err().reason,
        reasons::CAP_EXCEEDED
    );
}

#[test]
fn demand_is_what_the_caps_count_times_replicas() {
    // The compliant Deployment: 2 replicas of 100m CPU and 64Mi memory.
    let usage = crate::admission::demand(&compliant());
    assert_eq!(usage.replicas, 2);
    assert_eq!(usage.cpu_millis, 200);
    assert_eq!(usage.memory_bytes, 2 * 64 * 1024 * 1024);
    // An unreadable manifest still counts its replicas.
    let odd = json!({"spec": {"replicas": 3, "template": 7}});
    assert_eq!(crate::admission::demand(&odd).replicas, 3);
}
