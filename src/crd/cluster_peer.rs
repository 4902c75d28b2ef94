//! `ClusterPeer` (cluster-scoped): a cluster this one may send workloads to
//! or receive them from.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;
use super::admission::AdmissionSpec;
use super::common::{SecretKeyRef, Transport};

/// Namespaces no peer may ever send workloads into, whatever
/// `allowedNamespaces` says.
pub const PROTECTED_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

/// A peer cluster: how to reach its API server and Prometheus, and what it
/// may send us.
// Every `printcolumn(...)` repeats the same keys, which clippy mistakes for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ferry.dev",
    version = "v1alpha1",
    kind = "ClusterPeer",
    status = "ClusterPeerStatus",
    derive = "PartialEq",
    shortname = "cpeer",
    category = "ferry",
    doc = "A peer cluster Ferry may move workloads to or receive them from.",
    printcolumn(name = "Region", type_ = "string", json_path = ".spec.region"),
    printcolumn(name = "Transport", type_ = "string", json_path = ".spec.transport"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#
    ),
    printcolumn(
        name = "Connected",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Connected")].status"#
    ),
    printcolumn(
        name = "Accept From",
        type_ = "boolean",
        json_path = ".spec.acceptFrom",
        priority = 1
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.serverVersion",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPeerSpec {
    /// How requests to and from this peer travel: `Kube` (the peer's API
    /// server, through `kubeconfigSecretRef`) or `Nats` (the fleet's NATS
    /// JetStream broker that `ferry run --nats-url` connects to; no
    /// kubeconfig needed).
    #[serde(default)]
    pub transport: Transport,
    /// The Secret key holding a kubeconfig for the peer's API server.
    /// Required for transport `Kube`; a `Nats` peer needs none (with one,
    /// its API server is still probed for the `Connected` condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_secret_ref: Option<SecretKeyRef>,
    /// The peer's region, as the policy sees it (for example `eu-west-1`).
    #[schemars(length(min = 1))]
    pub region: String,
    /// Labels of the peer handed to the policy (for example `pool: spot`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Where the peer's cost and load metrics are read. Absent: the peer gets
    /// no metrics and the policy sees it as not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusEndpoint>,
    /// May this peer send workloads to this cluster. Off by default: a
    /// receiver must opt in to every sender.
    #[serde(default)]
    pub accept_from: bool,
    /// Namespaces this peer may send workloads into. Empty: none. The
    /// protected ones (kube-system, kube-public, kube-node-lease) are refused
    /// even when listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_namespaces: Vec<String>,
    /// Exceptions to the rules every connection to this peer follows, each
    /// off by default and each lifting exactly one rule (for local test
    /// clusters, not production). A refused connection's condition names the
    /// switch that would allow it.
    #[serde(default)]
    pub insecure: InsecureSwitches,
    /// How often the peer's API server is probed.
    #[serde(default = "default_probe_interval")]
    pub probe_interval: Duration,
    /// What this cluster admits from this peer: the Pod Security profile,
    /// allow-lists, caps and a rate limit. Absent: `Restricted`, nothing
    /// allow-listed, no caps, the default rate limit.
    #[serde(default)]
    pub admission: AdmissionSpec,
    /// The peer's public keys (current first, and the previous one during a
    /// rotation): requests and statuses from the peer must be signed by one
    /// of them; Secrets sent to it are sealed to the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub public_keys: Vec<crate::trust::PublicKeys>,
}

fn default_probe_interval() -> Duration {
    Duration::new("30s")
}

/// A Prometheus server holding the peer's metrics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusEndpoint {
    /// Base URL of the Prometheus HTTP API, for example `https://prom.example:9090`.
    /// Plain http needs `insecure.plainHTTP`, and a bearer token is sent over
    /// it only with `insecure.credentialsOverPlainHTTP` too.
    #[schemars(regex(pattern = r"^https?://[^\s]+$"))]
    pub url: String,
    /// For a Prometheus shared by several clusters: the value of the `cluster`
    /// label that selects this peer's series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_label: Option<String>,
    /// A Secret key holding a bearer token sent with every query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_secret_ref: Option<SecretKeyRef>,
    /// A Secret key holding the PEM CA bundle that signs the server's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<SecretKeyRef>,
}

/// The exceptions a peer may opt in to, one rule each. Every Secret a
/// `ClusterPeer` references must still be in the operator's own namespace:
/// no switch lifts that.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!self.credentialsOverPlainHTTP || self.plainHTTP")
    .message("credentialsOverPlainHTTP needs plainHTTP")
    .reason(Reason::FieldValueInvalid))]
pub struct InsecureSwitches {
    /// Accept a kubeconfig cluster with `insecure-skip-tls-verify`: anyone on
    /// the network path can then pose as the peer's API server.
    #[serde(default, rename = "skipTLSVerify")]
    pub skip_tls_verify: bool,
    /// Accept plain `http://` URLs: the kubeconfig's server and
    /// `prometheus.url`. No credential is sent over them unless
    /// `credentialsOverPlainHTTP` is set too.
    #[serde(default, rename = "plainHTTP")]
    pub plain_http: bool,
    /// Send credentials over plain http: the kubeconfig's token or password
    /// and the Prometheus bearer token. Anyone on the path can read and reuse
    /// them. Needs `plainHTTP`.
    #[serde(default, rename = "credentialsOverPlainHTTP")]
    pub credentials_over_plain_http: bool,
    /// Accept kubeconfig references to files (`certificate-authority`,
    /// `client-certificate`, `client-key`, `tokenFile`). They are read from the
    /// operator's own file system, which holds its ServiceAccount token.
    #[serde(default)]
    pub local_files: bool,
    /// Accept `exec` and `auth-provider` credential plugins, which run
    /// programs inside the operator's pod. Takes effect only when the operator
    /// itself runs with `--allow-credential-plugins`.
    #[serde(default)]
    pub credential_plugins: bool,
}

/// What was last observed of the peer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPeerStatus {
    /// `Connected` (the last probe reached the API server) and `Ready`
    /// (connected, and the spec is usable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// When the peer was last probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// The peer API server's version (`gitVersion`), from the last successful probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<String>,
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl ClusterPeerSpec {
    /// Whether this peer may send a workload into `namespace`: the peer must
    /// have `acceptFrom`, the namespace must be listed in
    /// `allowedNamespaces` (an empty list allows none), and it must not be
    /// protected.
    pub fn accepts_into(&self, namespace: &str) -> bool {
        self.accept_from
            && !PROTECTED_NAMESPACES.contains(&namespace)
            && self.allowed_namespaces.iter().any(|n| n == namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(accept_from: bool, allowed: &[&str]) -> ClusterPeerSpec {
        ClusterPeerSpec {
            transport: Transport::Kube,
            kubeconfig_secret_ref: Some(SecretKeyRef::default()),
            region: "r".into(),
            labels: BTreeMap::new(),
            prometheus: None,
            accept_from,
            allowed_namespaces: allowed.iter().map(|s| s.to_string()).collect(),
            insecure: InsecureSwitches::default(),
            probe_interval: default_probe_interval(),
            public_keys: Vec::new(),
            admission: AdmissionSpec::default(),
        }
    }

    #[test]
    fn a_peer_without_accept_from_may_send_nothing() {
        assert!(!spec(false, &["apps"]).accepts_into("apps"));
    }

    #[test]
    fn empty_allowed_namespaces_allow_none() {
        let peer = spec(true, &[]);
        assert!(!peer.accepts_into("apps"));
        assert!(!peer.accepts_into("default"));
        assert!(!peer.accepts_into("kube-system"));
    }

    #[test]
    fn listed_namespaces_only_and_never_protected_ones() {
        let peer = spec(true, &["apps", "kube-system"]);
        assert!(peer.accepts_into("apps"));
        assert!(!peer.accepts_into("other"));
        assert!(!peer.accepts_into("kube-system"));
    }

    #[test]
    fn spec_defaults_fill_in_when_fields_are_absent() {
        let spec: ClusterPeerSpec = serde_json::from_value(serde_json::json!({
            "kubeconfigSecretRef": {"namespace": "ferry", "name": "b", "key": "kubeconfig"},
            "region": "eu",
        }))
        .unwrap();
        assert!(!spec.accept_from);
        assert_eq!(spec.insecure, InsecureSwitches::default());
        assert_eq!(spec.probe_interval.as_str(), "30s");
        assert!(spec.allowed_namespaces.is_empty());
        assert_eq!(spec.admission, AdmissionSpec::default());
    }
}
