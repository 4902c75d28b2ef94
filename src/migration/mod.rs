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

mod applied;
mod error;
mod names;
mod receiver;
mod request;
mod sanitize;
mod sender;
mod status;

pub use error::{Error, Result};
pub use names::{
    ANNOTATION_LAST_MIGRATION, ANNOTATION_MIGRATED_FROM, ANNOTATION_MIGRATED_TO,
    ANNOTATION_MIGRATION, ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_REQUEST_ID, LABEL_MIGRATION,
    LABEL_ROLE, RECEIVER_FIELD_MANAGER, SENDER_FIELD_MANAGER, conditions,
};
pub use receiver::{ReceiverConfig, ReceiverContext, run_receiver};
pub use request::{migration_name, request_id};
pub use sanitize::{
    Objection, References, privileged_features, reasons as refusal_reasons, references,
    sanitize_config_object, sanitize_workload,
};
pub use sender::{
    MigrationRequest, SenderConfig, SenderContext, StartOutcome, count_in_flight,
    last_migration_time, run_sender, start_migration,
};
