//! What an evaluation that ran to the end gives back, and what the host does
//! with the guest's words on the way: reasons cut to their cap, log lines
//! passed on to the operator's own log. Touches no guest.

use std::time::Duration;

use super::load::Policy;
use crate::policy::store::LogLine;
use crate::policy::validate::{Rejected, Validated};

/// The outcome of an evaluation that ran to the end.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evaluation {
    /// Decisions that passed validation, in the policy's order.
    pub decisions: Validated,
    /// Decisions that did not, each with its reason.
    pub rejected: Vec<Rejected>,
    pub logs: Vec<LogLine>,
    /// Lines (or cut streams) beyond the log caps.
    pub logs_dropped: usize,
    #[serde(rename = "elapsedMs", serialize_with = "as_millis")]
    pub elapsed: Duration,
    /// The linear memory the module held when it answered, in bytes: its
    /// peak, since WebAssembly memory never shrinks. What to size the
    /// memory limit by.
    #[serde(rename = "memoryBytes")]
    pub memory_bytes: u64,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// Cuts `text` to at most `max` bytes, at a character boundary, and marks
/// the cut.
pub(super) fn truncate_at_char(text: &mut String, max: usize) {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
}

/// Passes the guest's log lines on to the operator's log, at their levels,
/// and says when some were dropped.
pub(super) fn emit_logs(policy: &Policy, logs: &[LogLine], dropped: usize) {
    for line in logs {
        let (message, source) = (line.message.as_str(), line.source);
        match line.level {
            "error" => tracing::error!(policy = policy.name(), ?source, "{message}"),
            "warn" => tracing::warn!(policy = policy.name(), ?source, "{message}"),
            "info" => tracing::info!(policy = policy.name(), ?source, "{message}"),
            "debug" => tracing::debug!(policy = policy.name(), ?source, "{message}"),
            _ => tracing::trace!(policy = policy.name(), ?source, "{message}"),
        }
    }
    if dropped > 0 {
        tracing::warn!(
            policy = policy.name(),
            dropped,
            "policy output over the log caps was dropped"
        );
    }
}
