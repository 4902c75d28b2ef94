//! The cross-cluster migration protocol for `apps/v1` Deployments, and,
//! when the deciding policy enables stateful moves, StatefulSets.
//!
//! The sender ([`start_migration`], [`run_sender`]) writes a
//! `WorkloadMigration` mirror (role `Source`) beside the workload in its own
//! cluster, then the request proper (role `Target`, same name) in its inbox
//! namespace in the target peer, `ferry-inbox-<sender>`, where the peer
//! credential it holds may do nothing but create, read, update the spec of
//! and delete its own requests. The receiver ([`run_receiver`]) does all the
//! work in its own cluster with its own credential: it checks the request,
//! creates the workload and reports `Accepted` → `Progressing` → `Ready` in
//! the status only it can write. The sender then performs the source action
//! and asks `Complete`; on `Failed`, `Rejected` or a passed deadline it asks
//! `RollBack`, and the receiver removes exactly what it created.
//!
//! Invariants this part must never break:
//! - the source Deployment is never touched before the target reported
//!   `Ready` and the mirror recorded it; a rollback touches it only to undo
//!   this very move's source action (the target ended after reporting
//!   `Ready`, or its ClusterPeer was removed), so the workload keeps running
//!   somewhere;
//! - every step is persisted in status (with the object's resourceVersion as
//!   a precondition) before the next starts, so either side may restart in
//!   any phase and resume without a duplicate or a loss;
//! - an unreachable peer means retries with capped backoff and a
//!   `PeerUnreachable` condition, never a source action;
//! - the sender writes nothing in a peer but its own requests in its inbox;
//!   the receiver decides who sent a request from the inbox it is in, never
//!   from `spec.sourceCluster`, and ignores requests outside inboxes;
//! - the receiver creates, never overwrites: an object of the same name that
//!   is not this move's own refuses the request (`NameConflict`), and a
//!   rollback deletes only the uids it recorded (with a uid precondition);
//! - terminal phases are final on both sides: a `Completed` move is never
//!   rolled back, and deleting its request only ends the record.
//!
//! Decisions documented here:
//! - Every request, mirror, intent and status is signed (`envelope.rs`, the
//!   one place that signs and verifies) and verified before anyone acts on
//!   it: the receiver checks requests and intents against the peer's
//!   `publicKeys`, the sender checks statuses against them and its mirrors
//!   against its own keys (and their `issuedAt` against the object's
//!   creation time). Secret data travels sealed to the receiver's key.
//! - The sender speaks only through `spec.intent` (`Proceed`, `Complete`,
//!   `RollBack`, each with a higher sequence number; the receiver records
//!   the last in `status.observedIntent` and ignores any not above it) and
//!   by deleting the request, which the receiver's finalizer turns into a
//!   rollback. Deleting a mirror mid-flight withdraws the request likewise.
//! - The receiver enforces the deadline itself: a move not `Ready` by then
//!   is rolled back there even if the sender is gone.
//! - The receiver records the digest of the request's content when it
//!   accepts it; a later change of anything but the intent refuses the
//!   request (`SpecChanged`) and removes what was created.
//! - Each refusal is phase `Rejected` with a reason, a Warning Event on the
//!   request and the counter `ferry_receiver_refusals_total{peer,reason}`.
//! - A missing namespace in the target refuses the move
//!   (`TargetNamespaceMissing`): neither side creates namespaces.
//! - Secrets referenced by the pod template travel only when the policy has
//!   `allowSecretCopy` (otherwise `SecretsNotAllowed` on the sender), and
//!   only `Opaque` ones (`SecretTypeNotAllowed` on the receiver).
//! - A request with `dryRun: true` is checked by the receiver and ends
//!   `Completed` with reason `DryRunPassed` (or `Rejected`); nothing is
//!   created, and the sender leaves the source alone.
//! - Finished requests and mirrors lose their finalizer and are deleted
//!   after `finished_ttl` (24 h by default). An inbox stores at most
//!   `max_requests_per_peer` requests: the oldest finished ones go first,
//!   and a new request is refused (`InboxFull`) only when those in flight
//!   alone fill it.
//! - The request's signature covers each Secret's sealed data through its
//!   digest (`sealed.rs`): the receiver clears the ciphertext once it has
//!   created the Secrets, and refuses other ciphertext put back.
//! - Removing the sender's ClusterPeer for the target ends the mirrors
//!   toward it (`RolledBack`, `PeerRemoved`): the source keeps, or gets
//!   back, its replicas, and the finalizers go.
//! - What a peer may run is judged by `admission::review` under the
//!   receiver's own `ClusterPeer.spec.admission` (Pod Security `restricted`
//!   unless it opted for less, Ferry's rules, caps), and each new request
//!   takes a token of the peer's rate limit.
//! - A stateful move (`workload.rs`, `hooks.rs`) carries the workload's
//!   claims, created empty in the target before anything else, and runs
//!   the policy's hook Jobs: export in the source before the request is
//!   sent, import in the target before the workload is created. A failed
//!   hook ends the move (export) or rolls it back (import). The receiver
//!   builds its hook's Job itself and takes claims only from a peer whose
//!   `admission.claims` allows them.

mod applied;
mod bundle;
mod envelope;
mod error;
mod finalizer;
mod hooks;
mod metrics;
mod names;
pub mod nats;
mod progressive;
mod receiver;
mod request;
mod sanitize;
mod sealed;
mod sender;
mod status;
mod workload;

pub use bundle::{DROPPED_SERVICE_FIELDS, sanitize_dependent};
pub use envelope::{KeyRing, MAX_CLOCK_SKEW, nonce, sign_request, signed_intent, verify_request};
pub use error::{Error, Result};
pub use metrics::{ReceiverMetrics, RefusalLabels};
pub use names::{
    ANNOTATION_LAST_MIGRATION, ANNOTATION_MIGRATED_FROM, ANNOTATION_MIGRATED_TO,
    ANNOTATION_MIGRATION, ANNOTATION_ORIGINAL_REPLICAS, ANNOTATION_PLACEMENT,
    ANNOTATION_REQUEST_ID, ANNOTATION_REQUEST_UID, INBOX_PREFIX, LABEL_MIGRATION, LABEL_ROLE,
    RECEIVER_FIELD_MANAGER, RECEIVER_FINALIZER, SENDER_FIELD_MANAGER, SENDER_FINALIZER, conditions,
    inbox_namespace, inbox_peer,
};
pub use progressive::{GateMetrics, MAX_STEPS};
pub use receiver::{DEFAULT_MAX_REQUESTS_PER_PEER, ReceiverConfig, ReceiverContext, run_receiver};
pub use request::{migration_name, request_id};
pub use sanitize::{
    Objection, References, privileged_features, reasons as refusal_reasons, references,
    sanitize_config_object, sanitize_workload,
};
pub use sender::{
    MigrationRequest, SenderConfig, SenderContext, StartOutcome, count_in_flight,
    last_migration_time, run_sender, start_migration,
};
