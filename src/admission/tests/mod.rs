//! `review` against the compliant Deployment of `tests/data/admission`,
//! changed one field at a time.

use serde_json::{Value, json};

use super::*;
use crate::crd::PodSecurityProfile;

mod caps;
mod dependents;
mod hostile;
mod rules;

const COMPLIANT: &str = include_str!("../../../tests/data/admission/compliant-deployment.json");
const RICH: &str = include_str!("../../../tests/data/admission/bench-deployment.json");

fn compliant() -> Value {
    serde_json::from_str(COMPLIANT).unwrap()
}

/// Sets `value` at a dotted path (numbers index lists), creating objects
/// and growing lists on the way.
fn set(root: &mut Value, path: &str, value: Value) {
    let mut node = root;
    for key in path.split('.') {
        node = match key.parse::<usize>() {
            Ok(i) => {
                if !node.is_array() {
                    *node = json!([]);
                }
                let list = node.as_array_mut().unwrap();
                while list.len() <= i {
                    list.push(json!({}));
                }
                &mut list[i]
            }
            Err(_) => {
                if !node.is_object() {
                    *node = json!({});
                }
                node.as_object_mut()
                    .unwrap()
                    .entry(key)
                    .or_insert(Value::Null)
            }
        };
    }
    *node = value;
}

fn remove(root: &mut Value, path: &str) {
    let (parent, key) = path.rsplit_once('.').unwrap();
    let mut node = root;
    for part in parent.split('.') {
        node = match part.parse::<usize>() {
            Ok(i) => &mut node[i],
            Err(_) => &mut node[part],
        };
    }
    node.as_object_mut().unwrap().remove(key);
}

const POD: &str = "spec.template.spec";
const C0: &str = "spec.template.spec.containers.0";

fn with(changes: &[(&str, Value)]) -> Value {
    let mut workload = compliant();
    for (path, value) in changes {
        set(&mut workload, path, value.clone());
    }
    workload
}

fn alone(workload: &Value) -> Incoming<'_> {
    Incoming {
        workload,
        config_maps: &[],
        secrets: &[],
        service_accounts: &[],
        claims: &[],
        hook_image: None,
    }
}

fn check(workload: &Value, spec: &AdmissionSpec) -> Result<(), Violation> {
    review(&alone(workload), spec, &Usage::default())
}

fn refusal(workload: &Value, spec: &AdmissionSpec) -> Violation {
    check(workload, spec).expect_err("refused")
}

fn profile(profile: PodSecurityProfile) -> AdmissionSpec {
    AdmissionSpec {
        profile,
        ..AdmissionSpec::default()
    }
}

/// Dotted test paths as `review` writes them: `containers.0` → `containers[0]`.
fn field(path: &str) -> String {
    let mut out = String::new();
    for part in path.split('.') {
        if part.parse::<usize>().is_ok() {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
    }
    out
}

#[test]
fn the_compliant_deployment_passes_every_profile() {
    for p in [
        PodSecurityProfile::Restricted,
        PodSecurityProfile::Baseline,
        PodSecurityProfile::Privileged,
    ] {
        assert_eq!(check(&compliant(), &profile(p)), Ok(()), "{p:?}");
    }
}

/// One forbidden field of the Pod Security Standards: the change, the
/// reason under `restricted`, and the field the refusal must name.
struct Forbidden {
    set: Option<(&'static str, Value)>,
    remove: Option<&'static str>,
    reason: &'static str,
    field: &'static str,
}

fn forbidden_cases() -> Vec<Forbidden> {
    const B: &str = reasons::POD_SECURITY_BASELINE;
    const R: &str = reasons::POD_SECURITY_RESTRICTED;
    let f = |path, value, reason, field| Forbidden {
        set: Some((path, value)),
        remove: None,
        reason,
        field,
    };
    vec![
        f(
            "spec.template.spec.hostNetwork",
            json!(true),
            B,
            "spec.template.spec.hostNetwork",
        ),
        f(
            "spec.template.spec.hostPID",
            json!(true),
            B,
            "spec.template.spec.hostPID",
        ),
        f(
            "spec.template.spec.hostIPC",
            json!(true),
            B,
            "spec.template.spec.hostIPC",
        ),
        f(
            "spec.template.spec.containers.0.securityContext.privileged",
            json!(true),
            B,
            "spec.template.spec.containers.0.securityContext.privileged",
        ),
        f(
            "spec.template.spec.containers.0.securityContext.capabilities.add",
            json!(["NET_BIND_SERVICE", "SYS_ADMIN"]),
            B,
            "spec.template.spec.containers.0.securityContext.capabilities.add.1",
        ),
        f(
            "spec.template.spec.containers.0.ports.0.hostPort",
            json!(8080),
            B,
            "spec.template.spec.containers.0.ports.0.hostPort",
        ),
        f(
            "spec.template.spec.volumes.0",
            json!({"name": "root", "hostPath": {"path": "/"}}),
            B,
            "spec.template.spec.volumes.0.hostPath",
        ),
        f(
            "spec.template.spec.securityContext.seLinuxOptions.type",
            json!("spc_t"),
            B,
            "spec.template.spec.securityContext.seLinuxOptions.type",
        ),
        f(
            "spec.template.spec.containers.0.securityContext.seLinuxOptions.user",
            json!("system_u"),
            B,
            "spec.template.spec.containers.0.securityContext.seLinuxOptions.user",
        ),
        f(
            "spec.template.spec.containers.0.securityContext.procMount",
            json!("Unmasked"),
            B,
            "spec.template.spec.containers.0.securityContext.procMount",
        ),
        f(
            "spec.template.spec.securityContext.seccompProfile.type",
            json!("Unconfined"),
            B,
            "spec.template.spec.securityContext.seccompProfile.type",
        ),
        f(
            "spec.template.spec.containers.0.securityContext.appArmorProfile.type",
            json!("Unconfined"),
            B,
            "spec.template.spec.containers.0.securityContext.appArmorProfile.type",
        ),
        f(
            "spec.template.metadata.annotations",
            json!({"container.apparmor.security.beta.kubernetes.io/web": "unconfined"}),
            B,
            "spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]",
        ),
        f(
            "spec.template.spec.securityContext.sysctls",
            json!([{"name": "kernel.msgmax", "value": "1"}]),
            B,
            "spec.template.spec.securityContext.sysctls.0.name",
        ),
        f(
            "spec.template.spec.securityContext.windowsOptions.hostProcess",
            json!(true),
            B,
            "spec.template.spec.securityContext.windowsOptions.hostProcess",
        ),
        f(
            "spec.template.spec.containers.0.readinessProbe.httpGet.host",
            json!("169.254.169.254"),
            B,
            "spec.template.spec.containers.0.readinessProbe.httpGet.host",
        ),
        f(
            "spec.template.spec.containers.0.lifecycle.preStop.tcpSocket",
            json!({"host": "10.0.0.1", "port": 22}),
            B,
            "spec.template.spec.containers.0.lifecycle.preStop.tcpSocket.host",
        ),
        f(
            "spec.template.spec.initContainers.0",
            json!({"name": "init", "image": "busybox", "securityContext": {"privileged": true}}),
            B,
            "spec.template.spec.initContainers.0.securityContext.privileged",
        ),
        f(
            "spec.template.spec.ephemeralContainers.0",
            json!({"name": "debug", "image": "busybox", "ports": [{"containerPort": 1, "hostPort": 1}]}),
            B,
            "spec.template.spec.ephemeralContainers.0.ports.0.hostPort",
        ),
        f(
            "spec.template.spec.containers.0.securityContext.allowPrivilegeEscalation",
            json!(true),
            R,
            "spec.template.spec.containers.0.securityContext.allowPrivilegeEscalation",
        ),
        f(
            "spec.template.spec.securityContext.runAsNonRoot",
            json!(false),
            R,
            "spec.template.spec.securityContext.runAsNonRoot",
        ),
        f(
            "spec.template.spec.containers.0.securityContext.runAsUser",
            json!(0),
            R,
            "spec.template.spec.containers.0.securityContext.runAsUser",
        ),
        f(
            "spec.template.spec.securityContext.runAsUser",
            json!(0),
            R,
            "spec.template.spec.securityContext.runAsUser",
        ),
        f(
            "spec.template.spec.containers.0.securityContext.capabilities.drop",
            json!(["NET_RAW"]),
            R,
            "spec.template.spec.containers.0.securityContext.capabilities.drop",
        ),
        f(
            "spec.template.spec.containers.0.securityContext.capabilities.add",
            json!(["CHOWN"]),
            R,
            "spec.template.spec.containers.0.securityContext.capabilities.add.0",
        ),
        f(
            "spec.template.spec.volumes.0",
            json!({"name": "nfs", "nfs": {"server": "x", "path": "/"}}),
            R,
            "spec.template.spec.volumes.0.nfs",
        ),
        Forbidden {
            set: None,
            remove: Some(
                "spec.template.spec.containers.0.securityContext.allowPrivilegeEscalation",
            ),
            reason: R,
            field: "spec.template.spec.containers.0.securityContext.allowPrivilegeEscalation",
        },
        Forbidden {
            set: None,
            remove: Some("spec.template.spec.securityContext.runAsNonRoot"),
            reason: R,
            field: "spec.template.spec.containers.0.securityContext.runAsNonRoot",
        },
        Forbidden {
            set: None,
            remove: Some("spec.template.spec.securityContext.seccompProfile"),
            reason: R,
            field: "spec.template.spec.containers.0.securityContext.seccompProfile.type",
        },
    ]
}

fn apply(case: &Forbidden) -> Value {
    let mut workload = compliant();
    if let Some((path, value)) = &case.set {
        set(&mut workload, path, value.clone());
    }
    if let Some(path) = case.remove {
        remove(&mut workload, path);
    }
    workload
}

#[test]
fn every_forbidden_field_of_restricted_is_refused_by_name() {
    let cases = forbidden_cases();
    assert!(cases.len() >= 15);
    for case in &cases {
        let refused = refusal(&apply(case), &AdmissionSpec::default());
        assert_eq!(
            (refused.reason, refused.field.as_str()),
            (case.reason, field(case.field).as_str()),
            "{}",
            refused.message
        );
        assert!(
            refused.message.contains(&refused.field),
            "the message names the field: {}",
            refused.message
        );
    }
}

#[test]
fn baseline_relaxes_exactly_the_restricted_only_rules() {
    for case in forbidden_cases() {
        let result = check(&apply(&case), &profile(PodSecurityProfile::Baseline));
        if case.reason == reasons::POD_SECURITY_RESTRICTED {
            // nfs stays refused: Ferry's volume rule holds under every profile.
            match result {
                Ok(()) => {}
                Err(r) => assert_eq!(
                    (r.reason, case.field),
                    (
                        reasons::VOLUME_NOT_ALLOWED,
                        "spec.template.spec.volumes.0.nfs"
                    )
                ),
            }
        } else {
            let refused = result.expect_err(case.field);
            assert_eq!(
                (refused.reason, refused.field),
                (case.reason, field(case.field))
            );
        }
    }
}

#[test]
fn privileged_relaxes_every_pod_security_rule_and_no_ferry_rule() {
    for case in forbidden_cases() {
        match check(&apply(&case), &profile(PodSecurityProfile::Privileged)) {
            Ok(()) => {}
            // hostPath and nfs: Ferry's volume rule.
            Err(r) => assert_eq!(
                r.reason,
                reasons::VOLUME_NOT_ALLOWED,
                "{}: {}",
                case.field,
                r.message
            ),
        }
    }
    let pinned = with(&[("spec.template.spec.nodeName", json!("node-1"))]);
    assert_eq!(
        refusal(&pinned, &profile(PodSecurityProfile::Privileged)).reason,
        reasons::SCHEDULING_NOT_ALLOWED
    );
}

#[test]
fn the_messages_say_what_is_allowed() {
    let workload = with(&[(
        &format!("{C0}.securityContext.capabilities.add"),
        json!(["SYS_ADMIN"]),
    )]);
    let refused = refusal(&workload, &AdmissionSpec::default());
    assert!(
        refused.message.contains("SYS_ADMIN") && refused.message.contains("NET_BIND_SERVICE"),
        "{}",
        refused.message
    );
    let refused = refusal(
        &with(&[(&format!("{POD}.securityContext.runAsUser"), json!(0))]),
        &AdmissionSpec::default(),
    );
    assert!(
        refused.message.contains("non-zero") || refused.message.contains("any other user id"),
        "{}",
        refused.message
    );
}

#[test]
fn container_level_settings_satisfy_restricted_without_pod_level_ones() {
    let mut workload = compliant();
    remove(&mut workload, &format!("{POD}.securityContext"));
    set(
        &mut workload,
        &format!("{C0}.securityContext.runAsNonRoot"),
        json!(true),
    );
    set(
        &mut workload,
        &format!("{C0}.securityContext.seccompProfile.type"),
        json!("Localhost"),
    );
    set(
        &mut workload,
        &format!("{C0}.securityContext.seccompProfile.localhostProfile"),
        json!("profiles/web.json"),
    );
    assert_eq!(check(&workload, &AdmissionSpec::default()), Ok(()));
}
