//! Ferry's own rules over a pod template, under every profile: the
//! ServiceAccount and its token, scheduling (`nodeName`, tolerations,
//! PriorityClass, RuntimeClass), resource claims, volumes, references to
//! Secrets and ConfigMaps, and image registries. Only the receiver's
//! allow-lists relax them; nothing the sender writes does.

use super::image;
use super::json::{Node, Obj, object_or_empty};
use super::objects::Travelling;
use super::pod::PodTemplate;
use super::violation::{Violation, reasons};
use crate::crd::{AdmissionSpec, AllowedToleration};

/// What a reference may name: what travels, plus the receiver's allow-list.
pub(crate) struct Allowed<'a> {
    pub(crate) spec: &'a AdmissionSpec,
    pub(crate) travelling: &'a Travelling<'a>,
    /// The ServiceAccount the pod runs as (`default` when unset).
    pub(crate) pod_service_account: &'a str,
}

/// The kinds of object a pod may reference by name.
#[derive(Clone, Copy)]
enum Kind {
    Secret,
    ConfigMap,
}

impl Allowed<'_> {
    fn reference(&self, kind: Kind, node: &Node<'_>) -> Result<(), Violation> {
        let name = node.required_str()?;
        let (travels, listed, label, list) = match kind {
            Kind::Secret => (
                self.travelling.secrets.contains(name),
                &self.spec.secrets,
                "Secret",
                "secrets",
            ),
            Kind::ConfigMap => (
                self.travelling.config_maps.contains(name),
                &self.spec.config_maps,
                "ConfigMap",
                "configMaps",
            ),
        };
        if travels || listed.iter().any(|n| n == name) {
            return Ok(());
        }
        Err(Violation::new(
            reasons::REFERENCE_NOT_ALLOWED,
            &node.path,
            format!(
                "{} names {label} {name:?}, which neither travels in this request nor is in spec.admission.{list}",
                node.path
            ),
        ))
    }

    /// Whether the pod's ServiceAccount may have a token: it travels, or
    /// the receiver listed it.
    pub(crate) fn token_allowed(&self) -> bool {
        allowed_account(self.spec, self.travelling, self.pod_service_account)
    }
}

fn allowed_account(spec: &AdmissionSpec, travelling: &Travelling<'_>, name: &str) -> bool {
    travelling.service_accounts.contains(name) || spec.service_accounts.iter().any(|n| n == name)
}

/// Checks every rule in a stable order; the first problem is returned.
pub(crate) fn check(
    pod: &PodTemplate<'_>,
    admission: &AdmissionSpec,
    travelling: &Travelling<'_>,
) -> Result<(), Violation> {
    let spec = object_or_empty(&pod.spec)?;
    let pod_service_account = service_account(&spec, admission, travelling)?;
    let allowed = &Allowed {
        spec: admission,
        travelling,
        pod_service_account,
    };
    scheduling(&spec, admission)?;
    if let Some(first) = spec.get("resourceClaims").list()?.into_iter().next() {
        return Err(Violation::new(
            reasons::RESOURCE_CLAIM_NOT_ALLOWED,
            &first.path,
            format!(
                "{}: resource claims reach devices and claims of this cluster; no incoming pod may set them",
                first.path
            ),
        ));
    }
    for volume in spec.get("volumes").list()? {
        super::volumes::check(&volume, allowed)?;
    }
    for pull in spec.get("imagePullSecrets").list()? {
        allowed.reference(Kind::Secret, &object_or_empty(&pull)?.get("name"))?;
    }
    for container in &pod.containers {
        let container = object_or_empty(&container.node)?;
        references(&container, allowed)?;
        image(&container, allowed.spec)?;
    }
    Ok(())
}

/// The pod's ServiceAccount, once it is allowed.
fn service_account<'a>(
    spec: &Obj<'a, '_>,
    admission: &AdmissionSpec,
    travelling: &Travelling<'_>,
) -> Result<&'a str, Violation> {
    let name_node = spec.get("serviceAccountName");
    let legacy = spec.get("serviceAccount");
    let name = name_node.str()?.filter(|n| !n.is_empty());
    let legacy_name = legacy.str()?.filter(|n| !n.is_empty());
    if let (Some(a), Some(b)) = (name, legacy_name)
        && a != b
    {
        return Err(Violation::new(
            reasons::SERVICE_ACCOUNT_NOT_ALLOWED,
            &legacy.path,
            format!(
                "{} is {b:?} but serviceAccountName is {a:?}; they must agree",
                legacy.path
            ),
        ));
    }
    let (name, field) = match (name, legacy_name) {
        (Some(n), _) => (n, name_node.path.as_str()),
        (None, Some(n)) => (n, legacy.path.as_str()),
        (None, None) => ("default", name_node.path.as_str()),
    };
    if allowed_account(admission, travelling, name) {
        return Ok(name);
    }
    if name != "default" {
        return Err(Violation::new(
            reasons::SERVICE_ACCOUNT_NOT_ALLOWED,
            field,
            format!(
                "{field} is {name:?}: pods run as default (without a token), as a ServiceAccount travelling in this request, or as one in spec.admission.serviceAccounts"
            ),
        ));
    }
    let automount = spec.get("automountServiceAccountToken");
    if automount.bool()? != Some(false) {
        return Err(Violation::new(
            reasons::SERVICE_ACCOUNT_NOT_ALLOWED,
            &automount.path,
            format!(
                "{} must be false for a pod running as the default ServiceAccount (it is {}), unless default is in spec.admission.serviceAccounts",
                automount.path,
                automount
                    .value
                    .map_or_else(|| "unset".to_owned(), ToString::to_string)
            ),
        ));
    }
    Ok(name)
}

fn scheduling(spec: &Obj<'_, '_>, admission: &AdmissionSpec) -> Result<(), Violation> {
    let node_name = spec.get("nodeName");
    if let Some(name) = node_name.str()?.filter(|n| !n.is_empty()) {
        return Err(Violation::new(
            reasons::SCHEDULING_NOT_ALLOWED,
            &node_name.path,
            format!(
                "{} is {name:?}: incoming pods may not bypass the scheduler by naming a node",
                node_name.path
            ),
        ));
    }
    for toleration in spec.get("tolerations").list()? {
        let object = object_or_empty(&toleration)?;
        let read = |field: &str| object.get(field).str().map(|v| v.unwrap_or(""));
        let (key, operator, value, effect) = (
            read("key")?,
            read("operator")?,
            read("value")?,
            read("effect")?,
        );
        let operator = if operator.is_empty() {
            "Equal"
        } else {
            operator
        };
        let matches = |a: &AllowedToleration| {
            a.key.as_deref().unwrap_or("") == key
                && a.operator
                    .as_deref()
                    .filter(|o| !o.is_empty())
                    .unwrap_or("Equal")
                    == operator
                && a.value.as_deref().unwrap_or("") == value
                && a.effect.as_deref().unwrap_or("") == effect
        };
        if !admission.tolerations.iter().any(matches) {
            return Err(Violation::new(
                reasons::SCHEDULING_NOT_ALLOWED,
                &toleration.path,
                format!(
                    "{} (key {key:?}, operator {operator}, value {value:?}, effect {effect:?}) is not in spec.admission.tolerations",
                    toleration.path
                ),
            ));
        }
    }
    let priority = spec.get("priorityClassName");
    if let Some(name) = priority.str()?.filter(|n| !n.is_empty())
        && !admission.priority_classes.iter().any(|p| p == name)
    {
        return Err(Violation::new(
            reasons::SCHEDULING_NOT_ALLOWED,
            &priority.path,
            format!(
                "{} is {name:?}, which is not in spec.admission.priorityClasses (a priority could preempt this cluster's own pods)",
                priority.path
            ),
        ));
    }
    let runtime = spec.get("runtimeClassName");
    if let Some(name) = runtime.str()?.filter(|n| !n.is_empty()) {
        return Err(Violation::new(
            reasons::SCHEDULING_NOT_ALLOWED,
            &runtime.path,
            format!(
                "{} is {name:?}: incoming pods run in the default runtime (a RuntimeClass adds its own tolerations and overhead)",
                runtime.path
            ),
        ));
    }
    Ok(())
}

/// `env[*].valueFrom.{secretKeyRef,configMapKeyRef}` and
/// `envFrom[*].{secretRef,configMapRef}` of one container.
fn references(container: &Obj<'_, '_>, allowed: &Allowed<'_>) -> Result<(), Violation> {
    for variable in container.get("env").list()? {
        let variable = object_or_empty(&variable)?;
        let from = variable.get("valueFrom");
        let from = object_or_empty(&from)?;
        for (field, kind) in [
            ("secretKeyRef", Kind::Secret),
            ("configMapKeyRef", Kind::ConfigMap),
        ] {
            let reference = from.get(field);
            if let Some(reference) = reference.object()? {
                allowed.reference(kind, &reference.get("name"))?;
            }
        }
    }
    for source in container.get("envFrom").list()? {
        let source = object_or_empty(&source)?;
        for (field, kind) in [
            ("secretRef", Kind::Secret),
            ("configMapRef", Kind::ConfigMap),
        ] {
            let reference = source.get(field);
            if let Some(reference) = reference.object()? {
                allowed.reference(kind, &reference.get("name"))?;
            }
        }
    }
    Ok(())
}

pub(crate) fn secret(allowed: &Allowed<'_>, node: &Node<'_>) -> Result<(), Violation> {
    allowed.reference(Kind::Secret, node)
}

pub(crate) fn config_map(allowed: &Allowed<'_>, node: &Node<'_>) -> Result<(), Violation> {
    allowed.reference(Kind::ConfigMap, node)
}

fn image(container: &Obj<'_, '_>, admission: &AdmissionSpec) -> Result<(), Violation> {
    let node = container.get("image");
    check_image(&node.path, node.required_str()?, admission)
}

/// Whether the image `reference` at `path` comes from a registry the
/// receiver allows.
pub(crate) fn check_image(
    path: &str,
    reference: &str,
    admission: &AdmissionSpec,
) -> Result<(), Violation> {
    if admission.image_registries.is_empty() {
        return Ok(());
    }
    let Some(parsed) = image::parse(reference) else {
        return Err(Violation::new(
            reasons::IMAGE_NOT_ALLOWED,
            path,
            format!("{path} is {reference:?}, which is not a valid image reference"),
        ));
    };
    if admission
        .image_registries
        .iter()
        .any(|allowed| image::allowed_by(&parsed, allowed))
    {
        return Ok(());
    }
    Err(Violation::new(
        reasons::IMAGE_NOT_ALLOWED,
        path,
        format!(
            "{path} is {reference:?} from {}/{}, which is not under spec.admission.imageRegistries ({})",
            parsed.registry,
            parsed.repository,
            admission.image_registries.join(", ")
        ),
    ))
}
