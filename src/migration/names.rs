//! The names both sides of a move agree on: annotations on the workload
//! copies, labels on the requests and applied objects, field managers, and
//! the condition types and reasons on `WorkloadMigration`.
//!
//! Only constants: changing a value here changes what existing objects in a
//! cluster mean, so a value must never change once released.

/// Source Deployment: the peer the workload moved to.
pub const ANNOTATION_MIGRATED_TO: &str = "ferry.dev/migrated-to";
/// Target copy: the peer the workload came from.
pub const ANNOTATION_MIGRATED_FROM: &str = "ferry.dev/migrated-from";
/// Both copies: when the last move completed (source) or was accepted
/// (target), RFC 3339; the guardrails' cooldown reads it.
pub const ANNOTATION_LAST_MIGRATION: &str = "ferry.dev/last-migration";
/// Source Deployment: the migration that performed the source action.
pub const ANNOTATION_MIGRATION: &str = "ferry.dev/migration";
/// Source Deployment: the replica count before `ScaleToZero`.
pub const ANNOTATION_ORIGINAL_REPLICAS: &str = "ferry.dev/original-replicas";
/// Both copies after a partial move: where the replicas run, for example
/// `1 of 3 replicas here, 2 in b`.
pub const ANNOTATION_PLACEMENT: &str = "ferry.dev/placement";
/// Target copy: the request id it was applied for.
pub const ANNOTATION_REQUEST_ID: &str = "ferry.dev/request-id";
/// Objects the receiver created: the uid of the request they were created
/// for. Server-set and unique, so no other request (from this peer or
/// another) can claim them; it lets a receiver that crashed between a
/// create and its record recognise its own object.
pub const ANNOTATION_REQUEST_UID: &str = "ferry.dev/request-uid";
/// Objects the receiver applied, and both requests: the migration's name.
pub const LABEL_MIGRATION: &str = "ferry.dev/migration";
/// Both requests: `source` or `target`.
pub const LABEL_ROLE: &str = "ferry.dev/role";
/// The field manager of the sender's writes.
pub const SENDER_FIELD_MANAGER: &str = "ferry";
/// The field manager of the receiver's writes.
pub const RECEIVER_FIELD_MANAGER: &str = "ferry-receiver";

/// The receiver's finalizer on a request: deleting the request mid-flight
/// rolls the move back before the object goes.
pub const RECEIVER_FINALIZER: &str = "ferry.dev/receiver";
/// The sender's finalizer on its mirror: deleting the mirror mid-flight
/// withdraws the request from the target first.
pub const SENDER_FINALIZER: &str = "ferry.dev/sender";
/// The prefix of inbox namespaces: requests from the peer `p` live in
/// `ferry-inbox-p` in the receiving cluster.
pub const INBOX_PREFIX: &str = "ferry-inbox-";

/// The inbox namespace, in a receiving cluster, of the peer it calls `peer`.
pub fn inbox_namespace(peer: &str) -> String {
    format!("{INBOX_PREFIX}{peer}")
}

/// The peer whose inbox `namespace` is, if it is an inbox at all.
pub fn inbox_peer(namespace: &str) -> Option<&str> {
    namespace
        .strip_prefix(INBOX_PREFIX)
        .filter(|peer| !peer.is_empty())
}

/// Condition types and reasons on `WorkloadMigration`.
pub mod conditions {
    /// Mirror: the target peer could not be reached on the last attempt.
    pub const PEER_UNREACHABLE: &str = "PeerUnreachable";
    /// Mirror: the target's status did not verify against the peer's public
    /// keys, so the sender acts on none of it.
    pub const STATUS_UNVERIFIED: &str = "StatusUnverified";
    /// Mirror: the sender decided to roll back (persisted so a restart
    /// finishes the rollback and never completes instead).
    pub const ROLLBACK_STARTED: &str = "RollbackStarted";
    /// Reason: the spec's deadline passed before the target was ready.
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    /// The receiver's ClusterPeer for the sending cluster was removed while
    /// the move was in flight.
    pub const PEER_REMOVED: &str = "PeerRemoved";
    /// Reason: the dry run's checks passed; nothing was applied.
    pub const DRY_RUN_PASSED: &str = "DryRunPassed";
    /// Reason: the source action was performed.
    pub const SOURCE_ACTION_DONE: &str = "SourceActionDone";
    /// Reason: the target has no inbox namespace for this cluster (it has
    /// not joined this cluster as a peer).
    pub const INBOX_MISSING: &str = "InboxMissing";
    /// Mirror: the sender created the request in the target's inbox over
    /// the Kubernetes API, so a request missing there later was lost (or
    /// deleted), never "not yet sent".
    pub const REQUEST_SENT: &str = "RequestSent";
    /// Reason: the target request disappeared before the target was ready.
    pub const TARGET_REQUEST_LOST: &str = "TargetRequestLost";
    /// Reason: the sender asked for a rollback (intent `RollBack`).
    pub const ROLLBACK_REQUESTED: &str = "RollbackRequested";
    /// Reason: the request was deleted before the move finished.
    pub const REQUEST_DELETED: &str = "RequestDeleted";
    /// Reason: the sender's mirror was deleted before the move finished.
    pub const MIRROR_DELETED: &str = "MirrorDeleted";
    /// Reason: the applied workload's Deployment vanished or was replaced.
    pub const WORKLOAD_LOST: &str = "WorkloadLost";
    /// Reason (receiver, progressive): the target runs the replicas of the
    /// step it was asked for, all ready.
    pub const STEP_READY: &str = "StepReady";
    /// Reason (receiver, progressive): the target is scaling to the step it
    /// was asked for.
    pub const STEP_REQUESTED: &str = "StepRequested";
    /// Reason (sender, progressive): the target's step is ready; the pause
    /// runs and the gate is read.
    pub const STEP_PAUSED: &str = "StepPaused";
    /// Reason (sender, progressive): a gate query returned a value out of
    /// its bounds; the move rolls back step by step.
    pub const HEALTH_GATE_FAILED: &str = "HealthGateFailed";
    /// Reason (sender, progressive): rolling back, the source grows back
    /// before the target shrinks.
    pub const STEPPING_BACK: &str = "SteppingBack";
    /// Reason (receiver): the replicas are available but a moved Service has
    /// no ready endpoint yet; the move is not Ready until it has.
    pub const WAITING_FOR_ENDPOINTS: &str = "WaitingForEndpoints";
    /// A stateful move's data hook Job is running: the export in the
    /// source, or the import in the target.
    pub const HOOK_RUNNING: &str = "HookRunning";
    /// A data hook's Job failed, ran past its timeout or was removed.
    pub const HOOK_FAILED: &str = "HookFailed";
}
