//! The cross-cluster migration protocol for `apps/v1` Deployments.
//!
//! The sender ([`start_migration`], [`run_sender`]) writes a
//! `WorkloadMigration` (role `Source`) in its own cluster, then the request
//! proper (role `Target`, same name) in the target peer. The receiver
//! ([`run_receiver`]) checks the request, applies the workload and reports
//! `Accepted` → `Progressing` → `Ready`; the sender then performs the
//! source action and marks both sides `Completed`, or on `Failed`,
//! `Rejected` or a passed deadline removes the target copy and marks
//! `RolledBack`.
//!
//! Invariants this part must never break:
//! - the source Deployment is never touched before the target reported
//!   `Ready`, and never touched at all on a rollback;
//! - every step is persisted in status (with the object's resourceVersion as
//!   a precondition) before the next starts, so either side may restart in
//!   any phase and resume without a duplicate or a loss;
//! - an unreachable peer means retries with capped backoff and a
//!   `PeerUnreachable` condition, never a source action.
//!
//! Decisions documented here:
//! - The sender does not create namespaces in a peer: a missing namespace
//!   refuses the move (`TargetNamespaceMissing`); what a receiver allows is
//!   its own business.
//! - Secrets referenced by the pod template travel only when the policy has
//!   `allowSecretCopy`; otherwise the move is refused (`SecretsNotAllowed`)
//!   rather than started towards a cluster where the pods could not start.
//! - On rollback the sender marks the target request `RolledBack` (kept as a
//!   record) and deletes what the receiver applied (objects labelled
//!   `ferry.dev/migration=<name>`); the receiver deletes them too when it
//!   sees `RolledBack`, which covers an apply that raced the rollback.
//! - A request with `dryRun: true` is validated by the receiver and ends
//!   `Completed` with reason `DryRunPassed` (or `Rejected`); nothing is
//!   applied, and the sender leaves the source alone.
//! - Privileged pod specs are refused unless the receiver runs with
//!   [`ReceiverConfig::allow_privileged`].

mod error;
mod receiver;
mod request;
mod sanitize;
mod sender;
mod start;
mod status;

pub use error::{Error, Result};
pub use receiver::{ReceiverConfig, ReceiverContext, run_receiver};
pub use request::{migration_name, request_id};
pub use sanitize::{
    References, Refusal, privileged_features, reasons as refusal_reasons, references,
    sanitize_config_object, sanitize_workload,
};
pub use sender::run_sender;
pub use start::{
    MigrationRequest, SenderConfig, SenderContext, StartOutcome, count_in_flight,
    last_migration_time, start_migration,
};

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
/// Target copy: the request id it was applied for.
pub const ANNOTATION_REQUEST_ID: &str = "ferry.dev/request-id";
/// Objects the receiver applied, and both requests: the migration's name.
pub const LABEL_MIGRATION: &str = "ferry.dev/migration";
/// Both requests: `source` or `target`.
pub const LABEL_ROLE: &str = "ferry.dev/role";
/// The field manager of the sender's writes.
pub const SENDER_FIELD_MANAGER: &str = "ferry";
/// The field manager of the receiver's writes.
pub const RECEIVER_FIELD_MANAGER: &str = "ferry-receiver";

/// Condition types and reasons on `WorkloadMigration`.
pub mod conditions {
    /// Mirror: the target peer could not be reached on the last attempt.
    pub const PEER_UNREACHABLE: &str = "PeerUnreachable";
    /// Mirror: the sender decided to roll back (persisted so a restart
    /// finishes the rollback and never completes instead).
    pub const ROLLBACK_STARTED: &str = "RollbackStarted";
    /// Reason: the spec's deadline passed before the target was ready.
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    /// Reason: the dry run's checks passed; nothing was applied.
    pub const DRY_RUN_PASSED: &str = "DryRunPassed";
    /// Reason: the source action was performed.
    pub const SOURCE_ACTION_DONE: &str = "SourceActionDone";
    /// Reason: the target's namespace does not exist.
    pub const TARGET_NAMESPACE_MISSING: &str = "TargetNamespaceMissing";
    /// Reason: the target request disappeared before the target was ready.
    pub const TARGET_REQUEST_LOST: &str = "TargetRequestLost";
}
