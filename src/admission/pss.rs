//! The Pod Security Standards, `baseline` and `restricted`, over a pod
//! template: the controls and allowed values of the Kubernetes page "Pod
//! Security Standards", for every container list. Stricter than the
//! standard in one place: Windows pods are not exempt from the restricted
//! Linux controls (a Windows pod needs `Baseline`). Never relaxes a
//! control the profile holds.

use super::json::{Node, Obj, object_or_empty};
use super::pod::{Container, PodTemplate, annotation_path};
use super::violation::{Violation, reasons};
use crate::crd::PodSecurityProfile;

/// Capabilities baseline lets a container add (the container runtime's
/// default set).
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Sysctls baseline allows: namespaced and isolated from other pods.
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// SELinux types baseline allows (besides unset or empty).
const SELINUX_TYPES: &[&str] = &[
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// Seccomp and AppArmor profile types baseline allows when set.
const CONFINED_PROFILES: &[&str] = &["RuntimeDefault", "Localhost"];

/// The probe and lifecycle handlers whose `host` baseline forbids.
const HANDLERS: &[(&str, &[&str])] = &[
    ("livenessProbe", &[]),
    ("readinessProbe", &[]),
    ("startupProbe", &[]),
    ("lifecycle", &["postStart", "preStop"]),
];

fn baseline(field: &str, message: String) -> Violation {
    Violation::new(reasons::POD_SECURITY_BASELINE, field, message)
}

fn restricted(field: &str, message: String) -> Violation {
    Violation::new(reasons::POD_SECURITY_RESTRICTED, field, message)
}

/// Checks the template against `profile`: nothing for `Privileged`.
pub(crate) fn check(pod: &PodTemplate<'_>, profile: PodSecurityProfile) -> Result<(), Violation> {
    if profile == PodSecurityProfile::Privileged {
        return Ok(());
    }
    let strict = profile == PodSecurityProfile::Restricted;
    let spec = object_or_empty(&pod.spec)?;
    let pod_context = spec.get("securityContext");
    let pod_context = object_or_empty(&pod_context)?;
    pod_baseline(&spec, &pod_context)?;
    annotations_baseline(&pod.annotations)?;
    let pod_level = if strict {
        pod_restricted(&pod_context)?
    } else {
        PodLevel::default()
    };
    for container in &pod.containers {
        let object = object_or_empty(&container.node)?;
        let context = object.get("securityContext");
        let context = object_or_empty(&context)?;
        container_baseline(&object, &context)?;
        if strict {
            container_restricted(container, &context, &pod_level)?;
        }
    }
    for volume in spec.get("volumes").list()? {
        let volume = object_or_empty(&volume)?;
        for kind in volume.keys().filter(|k| *k != "name") {
            let field = volume.get(kind).path;
            if kind == "hostPath" {
                return Err(baseline(
                    &field,
                    format!("{field}: the baseline profile forbids hostPath volumes"),
                ));
            }
            if strict && !RESTRICTED_VOLUMES.contains(&kind) {
                return Err(restricted(
                    &field,
                    format!(
                        "{field}: the restricted profile forbids {kind} volumes (allowed: {})",
                        RESTRICTED_VOLUMES.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Volume kinds the restricted profile allows.
pub(crate) const RESTRICTED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

fn must_not_be_true(node: &Node<'_>, what: &str) -> Result<(), Violation> {
    if node.bool()? == Some(true) {
        return Err(baseline(
            &node.path,
            format!(
                "{} is true: the baseline profile forbids {what} (allowed: false or unset)",
                node.path
            ),
        ));
    }
    Ok(())
}

fn pod_baseline(spec: &Obj<'_, '_>, context: &Obj<'_, '_>) -> Result<(), Violation> {
    for (field, what) in [
        ("hostNetwork", "the host's network namespace"),
        ("hostPID", "the host's process namespace"),
        ("hostIPC", "the host's IPC namespace"),
    ] {
        must_not_be_true(&spec.get(field), what)?;
    }
    security_context_baseline(context)?;
    for sysctl in context.get("sysctls").list()? {
        let name = object_or_empty(&sysctl)?.get("name");
        let text = name.required_str()?;
        if !SAFE_SYSCTLS.contains(&text) {
            return Err(baseline(
                &name.path,
                format!(
                    "{} is {text:?}: the baseline profile allows only the sysctls {}",
                    name.path,
                    SAFE_SYSCTLS.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The controls baseline holds on both the pod's and a container's
/// securityContext: HostProcess, SELinux, seccomp and AppArmor.
fn security_context_baseline(context: &Obj<'_, '_>) -> Result<(), Violation> {
    let windows = context.get("windowsOptions");
    must_not_be_true(
        &object_or_empty(&windows)?.get("hostProcess"),
        "Windows HostProcess containers",
    )?;
    let selinux = context.get("seLinuxOptions");
    let selinux = object_or_empty(&selinux)?;
    let kind = selinux.get("type");
    if let Some(text) = kind
        .str()?
        .filter(|t| !t.is_empty() && !SELINUX_TYPES.contains(t))
    {
        return Err(baseline(
            &kind.path,
            format!(
                "{} is {text:?}: the baseline profile allows only {} or unset",
                kind.path,
                SELINUX_TYPES.join(", ")
            ),
        ));
    }
    for field in ["user", "role"] {
        let node = selinux.get(field);
        if let Some(text) = node.str()?.filter(|t| !t.is_empty()) {
            return Err(baseline(
                &node.path,
                format!(
                    "{} is {text:?}: the baseline profile forbids a custom SELinux {field}",
                    node.path
                ),
            ));
        }
    }
    for (field, what) in [
        ("seccompProfile", "seccomp"),
        ("appArmorProfile", "AppArmor"),
    ] {
        let profile = context.get(field);
        let kind = object_or_empty(&profile)?.get("type");
        if let Some(text) = kind.str()?.filter(|t| !CONFINED_PROFILES.contains(t)) {
            return Err(baseline(
                &kind.path,
                format!(
                    "{} is {text:?}: the baseline profile allows the {what} profile types RuntimeDefault and Localhost, or unset",
                    kind.path
                ),
            ));
        }
    }
    Ok(())
}

fn annotations_baseline(annotations: &Node<'_>) -> Result<(), Violation> {
    let Some(object) = annotations.object()? else {
        return Ok(());
    };
    for key in object.keys() {
        let apparmor = key.starts_with("container.apparmor.security.beta.kubernetes.io/");
        let seccomp = key == "seccomp.security.alpha.kubernetes.io/pod"
            || key.starts_with("container.seccomp.security.alpha.kubernetes.io/");
        if !apparmor && !seccomp {
            continue;
        }
        let field = annotation_path(annotations, key);
        let value = Node {
            value: object.map.get(key),
            path: field.clone(),
        }
        .str()?
        .unwrap_or("");
        let confined = value == "runtime/default"
            || value.starts_with("localhost/")
            || (seccomp && value == "docker/default");
        if !confined {
            return Err(baseline(
                &field,
                format!(
                    "{field} is {value:?}: the baseline profile allows runtime/default or localhost/<profile>"
                ),
            ));
        }
    }
    Ok(())
}

fn container_baseline(container: &Obj<'_, '_>, context: &Obj<'_, '_>) -> Result<(), Violation> {
    must_not_be_true(&context.get("privileged"), "privileged containers")?;
    let capabilities = context.get("capabilities");
    for added in object_or_empty(&capabilities)?.get("add").list()? {
        let name = added.required_str()?;
        if !BASELINE_CAPABILITIES.contains(&name) {
            return Err(baseline(
                &added.path,
                format!(
                    "{} adds {name}: the baseline profile allows adding only {}",
                    added.path,
                    BASELINE_CAPABILITIES.join(", ")
                ),
            ));
        }
    }
    let proc_mount = context.get("procMount");
    if let Some(text) = proc_mount.str()?.filter(|t| *t != "Default") {
        return Err(baseline(
            &proc_mount.path,
            format!(
                "{} is {text:?}: the baseline profile allows only Default or unset",
                proc_mount.path
            ),
        ));
    }
    security_context_baseline(context)?;
    for port in container.get("ports").list()? {
        let host_port = object_or_empty(&port)?.get("hostPort");
        if let Some(number) = host_port.int()?.filter(|n| *n != 0) {
            return Err(baseline(
                &host_port.path,
                format!(
                    "{} is {number}: the baseline profile forbids host ports (allowed: 0 or unset)",
                    host_port.path
                ),
            ));
        }
    }
    for (field, nested) in HANDLERS {
        let node = container.get(field);
        let handler = object_or_empty(&node)?;
        if nested.is_empty() {
            no_other_host(&handler)?;
        }
        for inner in *nested {
            let inner = handler.get(inner);
            no_other_host(&object_or_empty(&inner)?)?;
        }
    }
    Ok(())
}

/// A probe or hook handler may not aim at another host.
fn no_other_host(handler: &Obj<'_, '_>) -> Result<(), Violation> {
    for action in ["httpGet", "tcpSocket"] {
        let action = handler.get(action);
        let host = object_or_empty(&action)?.get("host");
        if let Some(text) = host.str()?.filter(|t| !t.is_empty()) {
            return Err(baseline(
                &host.path,
                format!(
                    "{} is {text:?}: the baseline profile forbids probes and hooks aimed at another host (allowed: empty or unset)",
                    host.path
                ),
            ));
        }
    }
    Ok(())
}

/// What the pod's securityContext sets that containers may inherit.
#[derive(Default)]
struct PodLevel {
    run_as_non_root: bool,
    seccomp: bool,
}

fn pod_restricted(context: &Obj<'_, '_>) -> Result<PodLevel, Violation> {
    let non_root = context.get("runAsNonRoot");
    let run_as_non_root = non_root.bool()?;
    if run_as_non_root == Some(false) {
        return Err(restricted(
            &non_root.path,
            format!(
                "{} is false: the restricted profile requires true",
                non_root.path
            ),
        ));
    }
    run_as_user(&context.get("runAsUser"))?;
    let seccomp = context.get("seccompProfile");
    let seccomp = object_or_empty(&seccomp)?.get("type").str()?.is_some();
    Ok(PodLevel {
        run_as_non_root: run_as_non_root == Some(true),
        seccomp,
    })
}

fn run_as_user(node: &Node<'_>) -> Result<(), Violation> {
    if node.int()? == Some(0) {
        return Err(restricted(
            &node.path,
            format!(
                "{} is 0 (root): the restricted profile allows any other user id, or unset",
                node.path
            ),
        ));
    }
    Ok(())
}

fn container_restricted(
    container: &Container<'_>,
    context: &Obj<'_, '_>,
    pod: &PodLevel,
) -> Result<(), Violation> {
    let escalation = context.get("allowPrivilegeEscalation");
    if escalation.bool()? != Some(false) {
        return Err(restricted(
            &escalation.path,
            format!(
                "{} must be false under the restricted profile, and it is {}",
                escalation.path,
                shown(&escalation)
            ),
        ));
    }
    let non_root = context.get("runAsNonRoot");
    match non_root.bool()? {
        Some(true) => {}
        Some(false) => {
            return Err(restricted(
                &non_root.path,
                format!(
                    "{} is false: the restricted profile requires true",
                    non_root.path
                ),
            ));
        }
        None if pod.run_as_non_root => {}
        None => {
            return Err(restricted(
                &non_root.path,
                format!(
                    "{} is unset and so is the pod's: the restricted profile requires runAsNonRoot true on the pod or on every container",
                    non_root.path
                ),
            ));
        }
    }
    run_as_user(&context.get("runAsUser"))?;
    let seccomp = context.get("seccompProfile");
    let kind = object_or_empty(&seccomp)?.get("type");
    if kind.str()?.is_none() && !pod.seccomp {
        return Err(restricted(
            &kind.path,
            format!(
                "{} is unset and so is the pod's: the restricted profile requires RuntimeDefault or Localhost",
                kind.path
            ),
        ));
    }
    let capabilities = context.get("capabilities");
    let capabilities = object_or_empty(&capabilities)?;
    let drop = capabilities.get("drop");
    let mut drops_all = false;
    for dropped in drop.list()? {
        drops_all |= dropped.str()? == Some("ALL");
    }
    if !drops_all {
        return Err(restricted(
            &drop.path,
            format!(
                "{} of {} {:?} must include ALL under the restricted profile",
                drop.path,
                container.list,
                name(container)
            ),
        ));
    }
    for added in capabilities.get("add").list()? {
        let added_name = added.required_str()?;
        if added_name != "NET_BIND_SERVICE" {
            return Err(restricted(
                &added.path,
                format!(
                    "{} adds {added_name}: the restricted profile allows adding only NET_BIND_SERVICE",
                    added.path
                ),
            ));
        }
    }
    Ok(())
}

fn shown(node: &Node<'_>) -> String {
    node.value
        .map_or_else(|| "unset".to_owned(), |v| v.to_string())
}

fn name<'a>(container: &Container<'a>) -> &'a str {
    container
        .node
        .value
        .and_then(|v| v.get("name"))
        .and_then(|v| v.as_str())
        .unwrap_or("")
}
