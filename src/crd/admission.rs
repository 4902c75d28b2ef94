//! `ClusterPeer.spec.admission`: what this cluster agrees to run for one
//! peer. Configured only on the receiving side; the sender has no say in it.
//! The rules that read it live in `crate::admission`. Types only: no
//! client, and never a default that admits more than the restricted profile.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::quantity::Quantity;

/// What a peer's workloads may do in this cluster. Every list is an
/// allow-list: empty allows nothing, except `imageRegistries`, where empty
/// allows every registry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionSpec {
    /// The Pod Security Standards profile incoming pod templates must meet:
    /// `Restricted` (the default), or the explicit opt-ins `Baseline` and
    /// `Privileged`. Ferry's own rules (service accounts, node names,
    /// tolerations, volumes, references, images, caps) apply under every
    /// profile.
    #[serde(default)]
    pub profile: PodSecurityProfile,
    /// ServiceAccounts that already exist here and that incoming pods may
    /// run as (token mounts allowed). `default` without a mounted token, and
    /// a ServiceAccount travelling in the same request, need no entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
    /// Tolerations incoming pods may carry; each of the pod's must equal one
    /// of these in key, operator, value and effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<AllowedToleration>,
    /// Secrets that already exist here and that incoming pods may mount or
    /// reference (volumes, env, envFrom, imagePullSecrets). Secrets
    /// travelling in the same request need no entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// ConfigMaps that already exist here and that incoming pods may mount
    /// or reference. ConfigMaps travelling in the same request need no entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_maps: Vec<String>,
    /// CSI drivers incoming pods may use in inline `csi` volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub csi_drivers: Vec<String>,
    /// Registries (`ghcr.io`, `registry.example:5000`) or registry paths
    /// (`ghcr.io/acme`, matched whole segment by segment) incoming images
    /// must come from. `nginx` is `docker.io/library/nginx`. Empty: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_registries: Vec<String>,
    /// PriorityClasses incoming pods may name. Without an entry a pod may
    /// not set `priorityClassName`, so it cannot preempt this cluster's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priority_classes: Vec<String>,
    /// Caps on what this peer may run here, per request and in total.
    #[serde(default)]
    pub caps: AdmissionCaps,
    /// How many requests this peer may send.
    #[serde(default)]
    pub rate_limit: RateLimitSpec,
    /// What the objects travelling beside the workload (Services,
    /// autoscalers, disruption budgets, NetworkPolicies) may do here.
    #[serde(default, skip_serializing_if = "DependentsAdmission::is_default")]
    pub dependents: DependentsAdmission,
    /// Whether this peer may move stateful workloads here: StatefulSets,
    /// and Deployments that mount claims, whose PersistentVolumeClaims the
    /// move creates empty (with this cluster's default StorageClass), and
    /// the import hook Job that fills them. Off by default.
    #[serde(default, skip_serializing_if = "ClaimAdmission::is_default")]
    pub claims: ClaimAdmission,
}

/// What a peer's stateful moves may create here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimAdmission {
    /// Accept stateful workloads, their claims and their import hook.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow: bool,
    /// Most storage one request's claims may ask for in all, as a
    /// Kubernetes quantity (`"100Gi"`). Absent: no cap. While set, every
    /// claim must request storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_storage: Option<Quantity>,
}

impl ClaimAdmission {
    /// Whether nothing is allowed (not written out).
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// Rules for the objects that travel beside a workload. Whatever is set
/// here, each of them must concern the moved workload only: a selector at
/// least as narrow as the Deployment's own, an autoscaler that targets it;
/// a Service never gets `externalIPs` (CVE-2020-8554).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependentsAdmission {
    /// Service types a travelling Service may have besides `ClusterIP`
    /// (headless included), which is always allowed: `NodePort` opens a
    /// port on every node of this cluster, `LoadBalancer` also asks the
    /// cloud for an address. Empty: `ClusterIP` only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_types: Vec<ExposedServiceType>,
    /// Whether a travelling NetworkPolicy may carry egress rules. An egress
    /// rule lets the moved pods reach what this cluster's own policies may
    /// deny them; off, only policies without egress rules travel
    /// (ingress rules, and a policy type `Egress` with no rule, which only
    /// closes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network_policy_egress: bool,
}

impl DependentsAdmission {
    /// Whether nothing is allowed beyond the defaults (not written out).
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// A Service type that exposes pods outside the cluster network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ExposedServiceType {
    /// A port on every node.
    NodePort,
    /// A port on every node and a cloud load balancer.
    LoadBalancer,
}

/// A Pod Security Standards profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PodSecurityProfile {
    /// Baseline plus the hardening rules: non-root, no privilege escalation,
    /// seccomp `RuntimeDefault` or `Localhost`, all capabilities dropped.
    #[default]
    Restricted,
    /// Known privilege escalations refused (host namespaces, privileged
    /// containers, extra capabilities, host ports, unconfined profiles...).
    Baseline,
    /// No Pod Security Standards rule; Ferry's own rules still apply.
    Privileged,
}

/// One toleration incoming pods may carry. Absent fields compare as empty,
/// and an absent operator as `Equal`, as Kubernetes reads them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllowedToleration {
    /// The taint key (empty with `Exists`: every taint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `Equal` (the default) or `Exists`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(Equal|Exists)$"))]
    pub operator: Option<String>,
    /// The taint value, for `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`; empty: every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(NoSchedule|PreferNoSchedule|NoExecute)?$"))]
    pub effect: Option<String>,
}

/// Caps on replicas, CPU and memory. Absent: no cap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCaps {
    /// What one request may ask for.
    #[serde(default)]
    pub per_request: ResourceCaps,
    /// What all of this peer's workloads here may add up to, this request
    /// included.
    #[serde(default)]
    pub total: ResourceCaps,
}

/// A cap on replicas, and on CPU and memory requested by all replicas.
/// While a CPU (or memory) cap is set, every container must request (or
/// limit) CPU (or memory), so that the cap can be counted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceCaps {
    /// Most replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// Most CPU, as a Kubernetes quantity (`"8"`, `"500m"`), summed over
    /// replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// Most memory, as a Kubernetes quantity (`"16Gi"`), summed over replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
}

/// A token bucket per peer: `burst` requests at once, refilled at
/// `requestsPerMinute`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitSpec {
    /// Requests per minute, on average (at least 1).
    #[serde(default = "default_requests_per_minute")]
    #[schemars(range(min = 1))]
    pub requests_per_minute: u32,
    /// Requests accepted at once after a quiet spell (at least 1).
    #[serde(default = "default_burst")]
    #[schemars(range(min = 1))]
    pub burst: u32,
}

/// A move is one request; 30 a minute is far above what a policy's
/// `maxMigrationsPerCycle` produces, and far below what floods a receiver.
fn default_requests_per_minute() -> u32 {
    30
}

fn default_burst() -> u32 {
    10
}

impl Default for RateLimitSpec {
    fn default() -> Self {
        RateLimitSpec {
            requests_per_minute: default_requests_per_minute(),
            burst: default_burst(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_admission_is_restricted_with_empty_allow_lists() {
        let spec: AdmissionSpec = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(spec, AdmissionSpec::default());
        assert_eq!(spec.profile, PodSecurityProfile::Restricted);
        assert_eq!(spec.rate_limit.requests_per_minute, 30);
        assert!(spec.caps.total.cpu.is_none());
        assert!(spec.dependents.service_types.is_empty());
        assert!(!spec.dependents.network_policy_egress);
    }

    #[test]
    fn fields_read_in_camel_case() {
        let spec: AdmissionSpec = serde_json::from_value(serde_json::json!({
            "profile": "Baseline",
            "serviceAccounts": ["builder"],
            "tolerations": [{"key": "pool", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}],
            "configMaps": ["shared"],
            "csiDrivers": ["secrets-store.csi.k8s.io"],
            "imageRegistries": ["ghcr.io/acme"],
            "caps": {"perRequest": {"replicas": 5, "cpu": "4"}, "total": {"memory": "64Gi"}},
            "rateLimit": {"requestsPerMinute": 6},
            "dependents": {"serviceTypes": ["NodePort"], "networkPolicyEgress": true},
        }))
        .unwrap();
        assert_eq!(spec.profile, PodSecurityProfile::Baseline);
        assert_eq!(
            spec.caps
                .per_request
                .cpu
                .as_ref()
                .and_then(Quantity::millis),
            Some(4000)
        );
        assert_eq!(
            spec.caps.total.memory.as_ref().and_then(Quantity::whole),
            Some(64 << 30)
        );
        assert_eq!(spec.rate_limit.burst, 10);
        assert_eq!(
            spec.dependents.service_types,
            [ExposedServiceType::NodePort]
        );
        assert!(spec.dependents.network_policy_egress);
    }
}
