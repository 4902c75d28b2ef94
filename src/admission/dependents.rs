//! The objects that travel beside a workload (`dependents` of a request):
//! Services, HorizontalPodAutoscalers, PodDisruptionBudgets and
//! NetworkPolicies (ServiceAccounts are read with the other travelling
//! objects, in `objects.rs`). Each must concern the moved workload only:
//! its selector holds the Deployment's own and picks the workload's pods,
//! an autoscaler targets the Deployment by name. Beyond that a Service may
//! not expose pods outside the cluster network unless the receiver allows
//! its type, never gets `externalIPs` (CVE-2020-8554) and is never an
//! `ExternalName`; a disruption budget may not forbid every eviction; a
//! NetworkPolicy carries egress rules only where the receiver allows them.
//! Every refusal names the kind, the name and the field.

use serde_json::Value;

use super::json::{Node, object_or_empty};
use super::objects;
use super::selector::{Owner, Selector};
use super::violation::{Violation, reasons};
use crate::crd::{DependentsAdmission, ExposedServiceType};

/// Every kind that may travel beside a workload, as `(apiVersion, kind)`.
pub const DEPENDENT_KINDS: &[(&str, &str)] = &[
    ("v1", "ServiceAccount"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "Service"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
];

/// The most objects one request may carry beside its workload.
pub const MAX_DEPENDENTS: usize = 64;

/// An autoscaler that may scale the workload above its replicas, for the
/// caps: where it is and how far it scales.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Scaling {
    pub(crate) path: String,
    pub(crate) name: String,
    pub(crate) max_replicas: i64,
}

/// Checks every dependent but ServiceAccounts against the Deployment
/// `workload` (in `namespace`); returns the autoscaler that scales furthest.
pub(crate) fn check(
    workload: &Value,
    namespace: Option<&str>,
    dependents: &[Value],
    spec: &DependentsAdmission,
) -> Result<Option<Scaling>, Violation> {
    if dependents.len() > MAX_DEPENDENTS {
        return Err(Violation::new(
            reasons::DEPENDENT_NOT_ALLOWED,
            "dependents",
            format!(
                "dependents holds {} objects; at most {MAX_DEPENDENTS} travel with one workload",
                dependents.len()
            ),
        ));
    }
    let owner = Owner::read(workload);
    let mut scaling: Option<Scaling> = None;
    for (i, object) in dependents.iter().enumerate() {
        let node = Node::new(object, format!("dependents[{i}]"));
        let obj = node.object()?.ok_or_else(|| {
            Violation::new(
                reasons::INVALID_MANIFEST,
                &node.path,
                format!("{} must be an object", node.path),
            )
        })?;
        let api_version = obj.get("apiVersion").str()?.unwrap_or("");
        let kind = obj.get("kind").str()?.unwrap_or("");
        if !DEPENDENT_KINDS.contains(&(api_version, kind)) {
            return Err(Violation::new(
                reasons::UNSUPPORTED_KIND,
                format!("{}.kind", node.path),
                format!(
                    "{} is {api_version} {kind}; only ServiceAccounts, Services, autoscaling/v2 HorizontalPodAutoscalers, policy/v1 PodDisruptionBudgets and networking.k8s.io/v1 NetworkPolicies travel beside a workload",
                    node.path
                ),
            ));
        }
        let name = objects::name(&node, kind, namespace)?;
        if kind == "ServiceAccount" {
            continue;
        }
        let Some(owner) = owner.as_ref() else {
            return Err(Violation::new(
                reasons::INVALID_MANIFEST,
                "spec.selector",
                "the workload's name, selector or pod labels cannot be read, so no object can travel beside it",
            ));
        };
        let one = One { kind, name, owner };
        let spec_node = obj.get("spec");
        let object_spec = object_or_empty(&spec_node)?;
        match kind {
            "Service" => one.service(&object_spec, spec)?,
            "HorizontalPodAutoscaler" => {
                let found = one.autoscaler(&object_spec)?;
                if scaling
                    .as_ref()
                    .is_none_or(|s| s.max_replicas < found.max_replicas)
                {
                    scaling = Some(found);
                }
            }
            "PodDisruptionBudget" => one.disruption_budget(&object_spec)?,
            _ => one.network_policy(&object_spec, spec)?,
        }
    }
    Ok(scaling)
}

/// One dependent under review.
struct One<'n, 'a> {
    kind: &'a str,
    name: &'a str,
    owner: &'n Owner<'a>,
}

impl<'a> One<'_, 'a> {
    fn refuse(
        &self,
        reason: &'static str,
        field: &Node<'_>,
        why: impl std::fmt::Display,
    ) -> Violation {
        Violation::new(
            reason,
            &field.path,
            format!("{} {}: {}: {why}", self.kind, self.name, field.path),
        )
    }

    /// The selector at `field` must concern the moved workload only.
    fn selector(&self, field: &Node<'a>, service: bool) -> Result<(), Violation> {
        let Some(value) = field.value.filter(|v| !v.is_null()) else {
            return Err(self.refuse(
                reasons::SELECTOR_NOT_ALLOWED,
                field,
                "is missing; only objects that select the moved workload's pods travel",
            ));
        };
        let selector = if service {
            Selector::service(value)
        } else {
            Selector::label_selector(value)
        };
        let Some(selector) = selector else {
            return Err(self.refuse(
                reasons::INVALID_MANIFEST,
                field,
                "is not a label selector of strings",
            ));
        };
        match self.owner.stray(&selector) {
            None => Ok(()),
            Some(why) => Err(self.refuse(reasons::SELECTOR_NOT_ALLOWED, field, why)),
        }
    }

    fn service(
        &self,
        spec: &super::json::Obj<'a, '_>,
        allowed: &DependentsAdmission,
    ) -> Result<(), Violation> {
        let external_ips = spec.get("externalIPs");
        if !external_ips.list()?.is_empty() {
            return Err(self.refuse(
                reasons::SERVICE_NOT_ALLOWED,
                &external_ips,
                "a travelling Service may not set externalIPs: they capture traffic to any address in this cluster (CVE-2020-8554)",
            ));
        }
        let type_ = spec.get("type");
        let exposed = match type_.str()?.unwrap_or("ClusterIP") {
            "ClusterIP" => None,
            "NodePort" => Some(ExposedServiceType::NodePort),
            "LoadBalancer" => Some(ExposedServiceType::LoadBalancer),
            "ExternalName" => {
                return Err(self.refuse(
                    reasons::SERVICE_NOT_ALLOWED,
                    &type_,
                    "is ExternalName: a name in this cluster pointing at any host never travels",
                ));
            }
            other => {
                return Err(self.refuse(
                    reasons::SERVICE_NOT_ALLOWED,
                    &type_,
                    format!("is {other:?}, not a Service type"),
                ));
            }
        };
        if let Some(exposed) = exposed
            && !allowed.service_types.contains(&exposed)
        {
            return Err(self.refuse(
                reasons::SERVICE_NOT_ALLOWED,
                &type_,
                format!(
                    "is {exposed:?}, which exposes pods outside this cluster's network; allowed only with {exposed:?} in spec.admission.dependents.serviceTypes"
                ),
            ));
        }
        self.selector(&spec.get("selector"), true)
    }

    fn autoscaler(&self, spec: &super::json::Obj<'a, '_>) -> Result<Scaling, Violation> {
        let target = spec.get("scaleTargetRef");
        let target_obj = object_or_empty(&target)?;
        let kind = target_obj.get("kind");
        let name = target_obj.get("name");
        let api_version = target_obj.get("apiVersion");
        let wanted = (Some("apps/v1"), Some("Deployment"), Some(self.owner.name));
        let found = (
            Some(api_version.str()?.unwrap_or("apps/v1")),
            kind.str()?,
            name.str()?,
        );
        if found != wanted {
            return Err(self.refuse(
                reasons::DEPENDENT_NOT_ALLOWED,
                &target,
                format!(
                    "targets {} {} {}; a travelling autoscaler may scale only the moved Deployment {}",
                    found.0.unwrap_or("?"),
                    found.1.unwrap_or("?"),
                    found.2.unwrap_or("?"),
                    self.owner.name
                ),
            ));
        }
        let max = spec.get("maxReplicas");
        let max_replicas = max.int()?.filter(|n| *n >= 1).ok_or_else(|| {
            self.refuse(
                reasons::INVALID_MANIFEST,
                &max,
                "must be a whole number of at least 1",
            )
        })?;
        Ok(Scaling {
            path: max.path.clone(),
            name: self.name.to_owned(),
            max_replicas,
        })
    }

    fn disruption_budget(&self, spec: &super::json::Obj<'a, '_>) -> Result<(), Violation> {
        self.selector(&spec.get("selector"), false)?;
        let max_unavailable = spec.get("maxUnavailable");
        let min_available = spec.get("minAvailable");
        let blocks = matches!(max_unavailable.value, Some(v) if *v == 0 || *v == "0" || *v == "0%")
            || matches!(min_available.value, Some(v) if *v == "100%");
        if blocks {
            let field = if max_unavailable.value.is_some_and(|v| !v.is_null()) {
                &max_unavailable
            } else {
                &min_available
            };
            return Err(self.refuse(
                reasons::DEPENDENT_NOT_ALLOWED,
                field,
                "forbids every voluntary eviction, which would block node drains in this cluster",
            ));
        }
        Ok(())
    }

    fn network_policy(
        &self,
        spec: &super::json::Obj<'a, '_>,
        allowed: &DependentsAdmission,
    ) -> Result<(), Violation> {
        self.selector(&spec.get("podSelector"), false)?;
        let egress = spec.get("egress");
        if !egress.list()?.is_empty() && !allowed.network_policy_egress {
            return Err(self.refuse(
                reasons::DEPENDENT_NOT_ALLOWED,
                &egress,
                "egress rules let the moved pods reach what this cluster's own policies may deny them; allowed only with spec.admission.dependents.networkPolicyEgress",
            ));
        }
        Ok(())
    }
}
