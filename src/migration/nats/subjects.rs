//! The names the NATS transport agrees on (pure, no client): streams,
//! subjects, durable consumers and message ids.
//!
//! Subjects carry the cluster names as tokens, so a NATS user's
//! permissions can fence what it may publish and consume (see
//! `docs/transport-nats.md`). Identity never rests on them: every message
//! is a signed envelope checked against the claimed sender's keys.
//!
//! A value here must never change once released: it names what the
//! brokers of running fleets hold.

/// The stream of requests and intents: subjects `ferry.v1.req.>`.
pub const REQUEST_STREAM: &str = "FERRY_REQUESTS";
/// The stream of receivers' statuses: subjects `ferry.v1.status.>`, the
/// latest one per request kept.
pub const STATUS_STREAM: &str = "FERRY_STATUS";
/// Every request subject.
pub const REQUEST_SUBJECTS: &str = "ferry.v1.req.>";
/// Every status subject.
pub const STATUS_SUBJECTS: &str = "ferry.v1.status.>";

/// Where `source` sends requests and intents for `target`:
/// `ferry.v1.req.<target>.<source>`.
pub fn request_subject(target: &str, source: &str) -> String {
    format!("ferry.v1.req.{target}.{source}")
}

/// What `own`'s receiver consumes: `ferry.v1.req.<own>.>`.
pub fn request_filter(own: &str) -> String {
    format!("ferry.v1.req.{own}.>")
}

/// Where `target` reports the status of request `name` from `source`:
/// `ferry.v1.status.<source>.<target>.<name>`.
pub fn status_subject(source: &str, target: &str, name: &str) -> String {
    format!("ferry.v1.status.{source}.{target}.{name}")
}

/// What `own`'s sender consumes: `ferry.v1.status.<own>.>`.
pub fn status_filter(own: &str) -> String {
    format!("ferry.v1.status.{own}.>")
}

/// The durable consumer of `own`'s receiver on the request stream.
pub fn request_consumer(own: &str) -> String {
    format!("ferry-req-{own}")
}

/// The durable consumer of `own`'s sender on the status stream.
pub fn status_consumer(own: &str) -> String {
    format!("ferry-status-{own}")
}

/// The kinds of message, as they appear in message ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The signed request (its first intent included).
    Request,
    /// A later signed intent.
    Intent,
    /// A receiver's signed status.
    Status,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Request => "request",
            Kind::Intent => "intent",
            Kind::Status => "status",
        }
    }
}

/// The `Nats-Msg-Id` of a message: the request id, the kind and a sequence
/// (the intent's sequence, or a digest of a status), so the stream drops a
/// repeated publish within its duplicate window.
pub fn message_id(request_id: &str, kind: Kind, sequence: &str) -> String {
    format!("{request_id}.{}.{sequence}", kind.as_str())
}

/// The tokens of a subject after `prefix` (`ferry.v1.req.` or
/// `ferry.v1.status.`), if it has exactly `count`.
pub fn tokens_after<'a>(subject: &'a str, prefix: &str, count: usize) -> Option<Vec<&'a str>> {
    let rest = subject.strip_prefix(prefix)?;
    let tokens: Vec<&str> = rest.split('.').collect();
    (tokens.len() == count && tokens.iter().all(|t| !t.is_empty())).then_some(tokens)
}

/// Whether `name` can be a subject token and part of a consumer name:
/// lower-case letters, digits and `-`, as a DNS label (no dots, no
/// wildcards, no spaces).
pub fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_carry_both_clusters_as_tokens() {
        assert_eq!(request_subject("b", "a"), "ferry.v1.req.b.a");
        assert_eq!(
            status_subject("a", "b", "web-1"),
            "ferry.v1.status.a.b.web-1"
        );
        assert_eq!(request_filter("b"), "ferry.v1.req.b.>");
        assert_eq!(status_filter("a"), "ferry.v1.status.a.>");
        assert_eq!(
            tokens_after("ferry.v1.req.b.a", "ferry.v1.req.", 2),
            Some(vec!["b", "a"])
        );
        assert_eq!(tokens_after("ferry.v1.req.b.a.x", "ferry.v1.req.", 2), None);
        assert_eq!(tokens_after("ferry.v1.req.b..", "ferry.v1.req.", 2), None);
    }

    #[test]
    fn only_dns_labels_are_tokens() {
        assert!(is_token("eu-west-1"));
        for bad in ["", "a.b", "a*", ">", "A", "a b"] {
            assert!(!is_token(bad), "{bad:?}");
        }
    }

    #[test]
    fn message_ids_tell_kinds_and_sequences_apart() {
        let request = message_id("r", Kind::Request, "1");
        let intent = message_id("r", Kind::Intent, "1");
        assert_ne!(request, intent);
        assert_ne!(intent, message_id("r", Kind::Intent, "2"));
    }
}
