//! The messages on the wire (pure, no client): the same signed envelope
//! the Kubernetes transport stores in `WorkloadMigration` objects, in JSON.
//!
//! Nothing here verifies anything: the receiver's bridge checks a request
//! or intent against the claimed sender's keys before acting, and the
//! sender checks a status against the target's keys before acting.

use serde::{Deserialize, Serialize};

use crate::crd::{Intent, WorkloadMigrationSpec, WorkloadMigrationStatus};

/// One message of the protocol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Wire {
    /// A new request: the signed spec (role `Target`, first intent
    /// included), as the sender would create it in its inbox.
    #[serde(rename_all = "camelCase")]
    Request {
        /// The sender, as the receiver's `ClusterPeer` calls it.
        source: String,
        /// The receiver.
        target: String,
        /// The request's object name.
        name: String,
        /// The signed spec.
        spec: Box<WorkloadMigrationSpec>,
    },
    /// A later intent of a request (`Complete`, `RollBack`), signed.
    #[serde(rename_all = "camelCase")]
    Intent {
        source: String,
        target: String,
        name: String,
        /// The request it belongs to (its signature binds it too).
        request_id: String,
        intent: Intent,
    },
    /// The receiver's status of a request, signed.
    #[serde(rename_all = "camelCase")]
    Status {
        /// The sender of the request.
        source: String,
        /// The receiver, who signed the status.
        target: String,
        name: String,
        request_id: String,
        status: Box<WorkloadMigrationStatus>,
    },
}

impl Wire {
    /// The claimed sender of a request or intent, or the claimed reporter
    /// of a status: whose keys must have signed it.
    pub fn signer(&self) -> &str {
        match self {
            Wire::Request { source, .. } | Wire::Intent { source, .. } => source,
            Wire::Status { target, .. } => target,
        }
    }

    /// The message as JSON bytes.
    pub fn to_bytes(&self) -> Result<bytes::Bytes, serde_json::Error> {
        serde_json::to_vec(self).map(bytes::Bytes::from)
    }

    /// A message read from JSON bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::IntentAction;

    #[test]
    fn an_intent_round_trips_with_its_kind_tag() {
        let wire = Wire::Intent {
            source: "a".into(),
            target: "b".into(),
            name: "web-1".into(),
            request_id: "r".into(),
            intent: Intent {
                action: IntentAction::RollBack,
                sequence: 2,
                step: None,
                signature: None,
            },
        };
        let bytes = wire.to_bytes().unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        assert!(text.contains(r#""kind":"intent""#), "{text}");
        assert!(text.contains(r#""requestId":"r""#), "{text}");
        assert_eq!(Wire::from_bytes(&bytes).unwrap(), wire);
        assert_eq!(wire.signer(), "a");
    }

    #[test]
    fn garbage_is_an_error_not_a_message() {
        assert!(Wire::from_bytes(b"{\"kind\":\"delete\"}").is_err());
        assert!(Wire::from_bytes(b"not json").is_err());
    }
}
