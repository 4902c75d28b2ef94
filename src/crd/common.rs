//! Pieces shared by more than one resource: references, enums, schema helpers.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// What happens to the workload in the source cluster once the target copy
/// is ready.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SourceAction {
    /// Scale the source to zero replicas and keep its manifest, so a move back
    /// is a scale-up (the default: reversible).
    #[default]
    ScaleToZero,
    /// Delete the source workload.
    Delete,
    /// Leave the source running (copy rather than move).
    Keep,
}

/// How migration requests travel between this cluster and a peer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Transport {
    /// Through the peer's Kubernetes API: a `WorkloadMigration` in this
    /// cluster's inbox namespace there, written with the peer's kubeconfig.
    #[default]
    Kube,
    /// Through NATS JetStream: signed messages on the fleet's broker, one
    /// credential per cluster; each side writes only in its own cluster.
    Nats,
}

/// A key of a Secret in a given namespace (used by cluster-scoped objects).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Namespace of the Secret.
    #[schemars(length(min = 1))]
    pub namespace: String,
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key within the Secret's data.
    #[schemars(length(min = 1))]
    pub key: String,
}

/// A key of a ConfigMap or Secret in the referring object's own namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalKeyRef {
    /// Name of the ConfigMap or Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key within it.
    #[schemars(length(min = 1))]
    pub key: String,
}

/// Schema of a free JSON object kept as is by the API server.
pub(crate) fn preserve_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema of a list of free JSON objects kept as is by the API server.
pub(crate) fn preserve_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}
