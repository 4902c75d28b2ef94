//! The ConfigMaps, Secrets, ServiceAccounts and claims travelling with a
//! workload:
//! each must be a named object of its kind in the workload's namespace; a
//! Secret must be `Opaque`; a ServiceAccount must carry nothing that grants
//! more than a fresh, unbound account (no annotations, which cloud workload
//! identities read, and no token Secrets). Yields the names pods may then
//! reference. Never trusts a name it has not read as a string.

use std::collections::BTreeSet;

use serde_json::Value;

use super::json::{Node, object_or_empty};
use super::violation::{Violation, reasons};

/// The names of what travels in the request, which pods may reference.
#[derive(Debug, Default)]
pub(crate) struct Travelling<'a> {
    pub(crate) secrets: BTreeSet<&'a str>,
    pub(crate) config_maps: BTreeSet<&'a str>,
    pub(crate) service_accounts: BTreeSet<&'a str>,
    pub(crate) claims: BTreeSet<&'a str>,
}

/// Reads every travelling object; `namespace` is the workload's, if it
/// names one. `allowed_secrets` are the receiver's allow-listed Secret
/// names, which a travelling ServiceAccount's `imagePullSecrets` may name.
pub(crate) fn read<'a>(
    config_maps: &'a [Value],
    secrets: &'a [Value],
    service_accounts: &'a [Value],
    claims: &'a [Value],
    namespace: Option<&str>,
    allowed_secrets: &[String],
) -> Result<Travelling<'a>, Violation> {
    let mut travelling = Travelling::default();
    for (i, object) in config_maps.iter().enumerate() {
        let node = Node::new(object, format!("configMaps[{i}]"));
        travelling
            .config_maps
            .insert(name(&node, "ConfigMap", namespace)?);
    }
    for (i, object) in secrets.iter().enumerate() {
        let node = Node::new(object, format!("secrets[{i}]"));
        travelling.secrets.insert(name(&node, "Secret", namespace)?);
        let kind = object_or_empty(&node)?.get("type");
        if let Some(text) = kind.str()?.filter(|t| *t != "Opaque") {
            return Err(Violation::new(
                reasons::SECRET_TYPE_NOT_ALLOWED,
                &kind.path,
                format!(
                    "{} is {text:?}: only Opaque Secrets travel (ServiceAccount tokens, registry credentials and TLS keys of another cluster are never applied here)",
                    kind.path
                ),
            ));
        }
    }
    for (i, object) in service_accounts.iter().enumerate() {
        let node = Node::new(object, format!("serviceAccounts[{i}]"));
        travelling
            .service_accounts
            .insert(name(&node, "ServiceAccount", namespace)?);
    }
    for (i, object) in service_accounts.iter().enumerate() {
        let node = Node::new(object, format!("serviceAccounts[{i}]"));
        service_account_is_bare(&node, &travelling, allowed_secrets)?;
    }
    for (i, object) in claims.iter().enumerate() {
        let node = Node::new(object, format!("claims[{i}]"));
        travelling
            .claims
            .insert(name(&node, "PersistentVolumeClaim", namespace)?);
    }
    Ok(travelling)
}

/// The object's `metadata.name`, after checking its kind and namespace.
pub(crate) fn name<'a>(
    node: &Node<'a>,
    kind: &str,
    namespace: Option<&str>,
) -> Result<&'a str, Violation> {
    let object = node.object()?.ok_or_else(|| {
        Violation::new(
            reasons::INVALID_MANIFEST,
            &node.path,
            format!("{} must be a {kind} object", node.path),
        )
    })?;
    let found = object.get("kind");
    if let Some(text) = found.str()?.filter(|t| *t != kind) {
        return Err(Violation::new(
            reasons::INVALID_MANIFEST,
            &found.path,
            format!("{} is {text:?} in the list of {kind}s", found.path),
        ));
    }
    let metadata = object.get("metadata");
    let metadata = object_or_empty(&metadata)?;
    let object_namespace = metadata.get("namespace");
    if let (Some(text), Some(expected)) = (object_namespace.str()?, namespace)
        && text != expected
    {
        return Err(Violation::new(
            reasons::INVALID_MANIFEST,
            &object_namespace.path,
            format!(
                "{} is {text:?}: objects travel only into the workload's namespace {expected:?}",
                object_namespace.path
            ),
        ));
    }
    metadata.get("name").required_str()
}

/// A travelling ServiceAccount is created fresh with no RBAC; it must not
/// bring anything that grants more.
fn service_account_is_bare(
    node: &Node<'_>,
    travelling: &Travelling<'_>,
    allowed_secrets: &[String],
) -> Result<(), Violation> {
    let object = object_or_empty(node)?;
    let metadata = object.get("metadata");
    let annotations = object_or_empty(&metadata)?.get("annotations");
    if let Some(key) = annotations.object()?.and_then(|a| a.keys().next()) {
        let field = format!("{}[{key}]", annotations.path);
        return Err(Violation::new(
            reasons::SERVICE_ACCOUNT_NOT_ALLOWED,
            &field,
            format!(
                "{field}: a travelling ServiceAccount may carry no annotations (cloud workload identities such as eks.amazonaws.com/role-arn are granted through them)"
            ),
        ));
    }
    if let Some(first) = object.get("secrets").list()?.into_iter().next() {
        return Err(Violation::new(
            reasons::SERVICE_ACCOUNT_NOT_ALLOWED,
            &first.path,
            format!(
                "{}: a travelling ServiceAccount may not list token Secrets",
                first.path
            ),
        ));
    }
    for pull in object.get("imagePullSecrets").list()? {
        let name = object_or_empty(&pull)?.get("name");
        let text = name.required_str()?;
        if !travelling.secrets.contains(text) && !allowed_secrets.iter().any(|s| s == text) {
            return Err(Violation::new(
                reasons::REFERENCE_NOT_ALLOWED,
                &name.path,
                format!(
                    "{} names Secret {text:?}, which neither travels in this request nor is in spec.admission.secrets",
                    name.path
                ),
            ));
        }
    }
    Ok(())
}
