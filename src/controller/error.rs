//! How a reconcile of a `MigrationPolicy` fails. Only failures that a retry
//! may cure belong here: what a cycle skips is said in the policy's status,
//! never returned as an error.

/// Why a reconcile failed; every class is retried after `error_requeue`.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("writing the status of {policy}")]
    Status {
        policy: String,
        #[source]
        source: kube::Error,
    },
    #[error("the policy object has no namespace")]
    NoNamespace,
}
