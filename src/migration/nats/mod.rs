//! The NATS JetStream transport: the same signed envelope as the
//! Kubernetes transport, carried as messages through the fleet's broker,
//! so each cluster needs one credential (for the broker) and makes only
//! outbound connections.
//!
//! - The sender publishes its requests and intents to
//!   `ferry.v1.req.<target>.<source>` ([`NatsLink`]) and keeps the latest
//!   status of each from its durable consumer on
//!   `ferry.v1.status.<source>.>`.
//! - The receiver's bridge consumes `ferry.v1.req.<self>.>`, verifies each
//!   message against the claimed sender's `ClusterPeer` keys and
//!   materialises it as a `WorkloadMigration` in that peer's inbox here,
//!   so the receiver controller does the work unchanged; it publishes each
//!   signed status back to `ferry.v1.status.<source>.<self>.<name>`.
//!
//! `docs/transport-nats.md` gives the rules for duplicates, ordering and
//! redelivery, and each cluster's NATS permissions.

mod bridge;
mod connect;
mod link;
mod report;
mod subjects;
mod wire;

use std::sync::Arc;

pub use bridge::NatsReceiverContext;
pub use connect::{
    NatsConfig, NatsTiming, connect, connect_in_background, ensure_streams, inbox_prefix,
    stream_config,
};
pub use link::NatsLink;
pub use subjects::{
    REQUEST_STREAM, STATUS_STREAM, request_consumer, request_filter, request_subject,
    status_consumer, status_filter, status_subject,
};
pub use wire::Wire;

/// Runs the receiver's NATS side (the request bridge and the status
/// reports) until the future is dropped.
pub async fn run_nats_receiver(ctx: NatsReceiverContext) {
    let ctx = Arc::new(ctx);
    tokio::join!(
        bridge::run_request_bridge(ctx.clone()),
        report::run_status_reports(ctx)
    );
}
