//! The receiver's counters, handed to it by whoever owns the registry (the
//! controller's telemetry), so refusals show on the operator's `/metrics`.
//!
//! Only counters: recording a value never blocks and never fails.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The labels of a refusal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// The peer whose inbox held the request.
    pub peer: String,
    /// The refusal's reason (`NameConflict`, `SourceMismatch`, …).
    pub reason: String,
}

/// The receiver's metrics. Cheap to clone: clones count into the same family.
#[derive(Clone, Debug, Default)]
pub struct ReceiverMetrics {
    /// Requests refused, by peer and reason.
    pub refusals: Family<RefusalLabels, Counter>,
}

impl ReceiverMetrics {
    /// Registers the counters in `registry` (as `receiver_refusals_total`
    /// under the registry's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "receiver_refusals",
            "Migration requests the receiver refused, by peer and reason",
            self.refusals.clone(),
        );
    }

    pub(crate) fn count_refusal(&self, peer: &str, reason: &str) {
        self.refusals
            .get_or_create(&RefusalLabels {
                peer: peer.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// How many refusals were counted for `peer` and `reason`.
    pub fn refusals(&self, peer: &str, reason: &str) -> u64 {
        self.refusals
            .get_or_create(&RefusalLabels {
                peer: peer.to_owned(),
                reason: reason.to_owned(),
            })
            .get()
    }
}
