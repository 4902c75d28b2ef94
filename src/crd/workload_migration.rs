//! `WorkloadMigration` (namespaced): one request to move one workload, and
//! the state machine of its progress. The request proper (role `Target`)
//! lives in the receiving cluster, in the inbox namespace of the peer that
//! sent it (`ferry-inbox-<peer>`); the sender's mirror (role `Source`) lives
//! beside the workload in the sending cluster. Each side's status is the
//! persisted state of its half of the protocol, written only by that side.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::{SourceAction, Transport, preserve_object, preserve_object_list};
use super::stateful::{DataHooks, HookRun};
use super::strategy::MigrationStrategy;
use crate::trust::Signature;

/// A request to run a workload in another cluster.
// Every `printcolumn(...)` repeats the same keys, which clippy mistakes for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "ferry.dev",
    version = "v1alpha1",
    kind = "WorkloadMigration",
    namespaced,
    status = "WorkloadMigrationStatus",
    derive = "PartialEq",
    shortname = "wmig",
    category = "ferry",
    doc = "A request to move one workload from a source cluster to a target cluster.",
    printcolumn(
        name = "Workload",
        type_ = "string",
        json_path = ".status.workload",
        description = "The namespace and name of the workload the move carries"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Source", type_ = "string", json_path = ".spec.sourceCluster"),
    printcolumn(name = "Target", type_ = "string", json_path = ".spec.targetCluster"),
    printcolumn(name = "Transport", type_ = "string", json_path = ".spec.transport"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Kind",
        type_ = "string",
        json_path = ".spec.workload.kind",
        priority = 1
    ),
    printcolumn(
        name = "Role",
        type_ = "string",
        json_path = ".spec.role",
        priority = 1
    ),
    printcolumn(
        name = "Dry Run",
        type_ = "boolean",
        json_path = ".spec.dryRun",
        priority = 1
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.reason",
        priority = 1
    ),
    printcolumn(
        name = "Step",
        type_ = "integer",
        json_path = ".status.progress.step",
        description = "The step a progressive move has reached",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadMigrationSpec {
    /// Derived from (workload uid, target, decision time bucket): a repeated
    /// decision maps to the same request. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("is immutable"))]
    #[schemars(length(min = 1))]
    pub request_id: String,
    /// The ClusterPeer name of the cluster the workload leaves. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("is immutable"))]
    #[schemars(length(min = 1))]
    pub source_cluster: String,
    /// The ClusterPeer name of the cluster the workload moves to. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("is immutable"))]
    #[schemars(length(min = 1))]
    pub target_cluster: String,
    /// The namespace the workload runs in, the same in both clusters. In the
    /// target the request itself sits in the sender's inbox namespace, so
    /// this names where the workload goes (empty: none, which no receiver
    /// accepts). Immutable.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("is immutable"))]
    #[schemars(length(max = 63))]
    pub target_namespace: String,
    /// The sanitised workload manifest (a Deployment or StatefulSet without
    /// status, uid, resourceVersion or owner references), applied as is.
    #[schemars(schema_with = "preserve_object")]
    pub workload: serde_json::Value,
    /// Sanitised ConfigMaps the workload mounts or reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "preserve_object_list")]
    pub config_maps: Vec<serde_json::Value>,
    /// Sanitised Secrets the workload mounts or reads (only when the deciding
    /// policy has `allowSecretCopy`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "preserve_object_list")]
    pub secrets: Vec<serde_json::Value>,
    /// Sanitised objects that serve the workload, created beside it: the
    /// Services, PodDisruptionBudgets and NetworkPolicies that select its
    /// pods, the HorizontalPodAutoscalers that scale it, and the
    /// ServiceAccount its pods run as (never `default`). Each is checked
    /// by the receiver's admission rules like the workload itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "preserve_object_list")]
    pub dependents: Vec<serde_json::Value>,
    /// Sanitised PersistentVolumeClaims the workload mounts (a
    /// Deployment's claims, or one per StatefulSet claim template and
    /// ordinal), created empty in the target before anything else: no
    /// volume name, no StorageClass, no data source. Only with the deciding
    /// policy's `stateful.enabled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "preserve_object_list")]
    pub claims: Vec<serde_json::Value>,
    /// The Jobs that hand a stateful workload's data over: export in the
    /// source before the request is sent, import in the target before the
    /// workload is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<DataHooks>,
    /// What happens to the source once the target is ready.
    #[serde(default)]
    pub source_action: SourceAction,
    /// How the workload is handed over (absent: all at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MigrationStrategy>,
    /// A partial move: only some of the workload's replicas move (the
    /// manifest carries that many) and the rest stay in the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<PartialMove>,
    /// The request is rolled back if the target is not ready by then.
    pub deadline: Time,
    /// Check the request on the receiver and report, but apply nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// How the request travels between the two clusters, as the side that
    /// wrote this copy sent or received it. Shown by `kubectl get wmig`;
    /// not signed, and nothing acts on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// Which side's copy this is. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("is immutable"))]
    pub role: MigrationRole,
    /// The MigrationPolicy that decided the move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyRef>,
    /// The saving per hour the policy expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hourly_savings: Option<f64>,
    /// The sender's latest word on the move (role `Target` only): the only
    /// part of the spec the sender changes after creating the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<Intent>,
    /// A random value the sender chose for this request; every signature
    /// of the request, its intents and its status covers it, so none can be
    /// moved to another request. Immutable.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("is immutable"))]
    pub nonce: String,
    /// When the sender signed the request. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("is immutable"))]
    pub issued_at: Option<Time>,
    /// The sender's signature over everything above but the intent (the
    /// mirror's by this cluster's own key, the request's by the sender's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

/// What the sender asks of the receiver, numbered so that a replayed or
/// reordered intent is recognised: the receiver acts on an intent only if
/// its sequence is above the last one it recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Intent {
    /// What the sender asks.
    pub action: IntentAction,
    /// Increases by one with every new intent of the request (1 is the first).
    #[schemars(range(min = 1))]
    pub sequence: i64,
    /// Progressive moves: the step `Proceed` asks the target to run (the
    /// first intent asks for step 1 without naming it). A lower step than
    /// the current one takes the target back during a rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub step: Option<i32>,
    /// The sender's signature over the action, the sequence, the request id
    /// and the request's nonce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

/// The sender's asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum IntentAction {
    /// Apply the workload and report (the first intent).
    Proceed,
    /// The source performed its action: the move is done.
    Complete,
    /// Remove what was applied; the source keeps serving.
    RollBack,
}

/// One object the receiver created for a move; rollback deletes exactly
/// these, by uid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedObject {
    /// `Deployment`, `ConfigMap`, `Secret`, or a dependent's kind
    /// (`Service`, `HorizontalPodAutoscaler`, `PodDisruptionBudget`,
    /// `NetworkPolicy`, `ServiceAccount`).
    pub kind: String,
    /// Its name, in the request's `targetNamespace`.
    pub name: String,
    /// Its uid, as the API server assigned it at creation.
    pub uid: String,
}

/// How much of a workload a partial move carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartialMove {
    /// The replicas that move to the target.
    #[schemars(range(min = 1))]
    pub replicas: i32,
    /// The workload's replicas in the source before the move.
    #[schemars(range(min = 1))]
    pub of: i32,
}

/// Where a progressive move stands. The receiver reports the target's
/// side (signed with its status); the sender adds the source's side and
/// the gate in its mirror.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepProgress {
    /// The step the target runs (1 is the first).
    pub step: i32,
    /// How many steps the move has.
    pub steps: i32,
    /// The replicas the target runs at this step.
    pub target_replicas: i32,
    /// Of those, how many the receiver last saw ready.
    pub ready_replicas: i32,
    /// Sender: the replicas left in the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_replicas: Option<i32>,
    /// Sender: when it saw the target ready at this step; the pause counts
    /// from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_since: Option<Time>,
    /// Sender: the last reading of the health gate, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
}

/// Which side's copy of a request this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum MigrationRole {
    /// The sender's mirror, in the cluster the workload leaves.
    Source,
    /// The request proper, in the cluster the workload moves to.
    Target,
}

/// A MigrationPolicy in the sender's cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRef {
    /// Namespace of the policy.
    pub namespace: String,
    /// Name of the policy.
    pub name: String,
}

/// Where a request stands.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum MigrationPhase {
    /// Written, not yet looked at by the receiver.
    #[default]
    Pending,
    /// The receiver checked the request and will apply it.
    Accepted,
    /// The workload is applied in the target and starting.
    Progressing,
    /// The target's available replicas reached the desired count.
    Ready,
    /// The source action was performed; the move is done.
    Completed,
    /// The target could not run the workload.
    Failed,
    /// The receiver refused the request (unknown peer, namespace not allowed,
    /// manifest not acceptable).
    Rejected,
    /// The target copy was removed after a failure or the deadline; the
    /// source was never touched.
    RolledBack,
}

impl WorkloadMigrationSpec {
    /// The workload as `namespace/name`: the namespace it runs in (the
    /// same in both clusters) and the name in its manifest.
    pub fn workload_key(&self) -> String {
        let name = self.workload["metadata"]["name"].as_str().unwrap_or("");
        format!("{}/{name}", self.target_namespace)
    }
}

impl MigrationPhase {
    /// Whether no further transition follows.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            MigrationPhase::Completed
                | MigrationPhase::Failed
                | MigrationPhase::Rejected
                | MigrationPhase::RolledBack
        )
    }
}

/// The persisted state of one side of the protocol.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadMigrationStatus {
    /// The current phase.
    #[serde(default)]
    pub phase: MigrationPhase,
    /// A CamelCase reason for the phase, for machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A sentence for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The workload the move carries, as `namespace/name` (for `kubectl
    /// get`): written by each side from its own copy of the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Conditions of the request (for example `Ready`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The generation of the spec the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the receiver accepted the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_time: Option<Time>,
    /// When the workload was applied in the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressing_time: Option<Time>,
    /// When the target became ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_time: Option<Time>,
    /// When the move completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_time: Option<Time>,
    /// When the request reached any terminal phase (Completed, Failed,
    /// Rejected or RolledBack).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_time: Option<Time>,
    /// Receiver: the objects it created for this move (a rollback deletes
    /// exactly these uids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<AppliedObject>,
    /// Receiver: the sequence of the last intent it acted on; an intent
    /// with this sequence or a lower one is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_intent: Option<i64>,
    /// Receiver: the digest of the request's content when it was accepted;
    /// a request whose content changes afterwards is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_digest: Option<String>,
    /// Progressive moves: where the hand-over stands, as this side sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<StepProgress>,
    /// The data hooks this side ran: the export in the source's mirror,
    /// the import in the target's request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRun>,
    /// Receiver: its signature over the phase, reason and observed intent,
    /// bound to the request id and nonce; the sender acts on nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_phases() {
        use MigrationPhase::*;
        for phase in [Completed, Failed, Rejected, RolledBack] {
            assert!(phase.is_terminal(), "{phase:?}");
        }
        for phase in [Pending, Accepted, Progressing, Ready] {
            assert!(!phase.is_terminal(), "{phase:?}");
        }
    }
}
