//! Request identity (pure, no client): a repeated decision maps to the same
//! request id and therefore the same object name, so creating it twice is a
//! harmless `AlreadyExists`.

use std::time::Duration;

use sha2::{Digest, Sha256};

/// How many hex digits of the request id end an object name.
pub const NAME_HASH_LEN: usize = 10;

/// The longest object name produced (a DNS-1123 label, usable as a label value).
pub const MAX_NAME_LEN: usize = 63;

/// The request id of moving the workload with `uid` to `target`, decided at
/// `decided_at`: the hex sha256 of `uid|target|bucket`, where `bucket` is
/// `floor(decided_at / bucket)` in whole seconds. Decisions within one
/// bucket map to the same id; a `bucket` under one second counts as one second.
pub fn request_id(
    uid: &str,
    target: &str,
    decided_at: jiff::Timestamp,
    bucket: Duration,
) -> String {
    let bucket_seconds = bucket.as_secs().max(1) as i64;
    let index = decided_at.as_second().div_euclid(bucket_seconds);
    let digest = Sha256::digest(format!("{uid}|{target}|{index}").as_bytes());
    hex::encode(digest)
}

/// The object name of a request: `<workload name, truncated>-<first 10 hex
/// digits of the id>`, a valid DNS-1123 label (lower case alphanumerics and
/// `-`, at most 63 characters, starting and ending alphanumeric).
pub fn migration_name(workload: &str, request_id: &str) -> String {
    let hash: String = request_id.chars().take(NAME_HASH_LEN).collect();
    let room = MAX_NAME_LEN - NAME_HASH_LEN - 1;
    let cleaned: String = workload
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .take(room)
        .collect();
    let prefix = cleaned.trim_matches('-');
    if prefix.is_empty() {
        format!("m-{hash}")
    } else {
        format!("{prefix}-{hash}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(second).unwrap()
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn the_same_decision_within_a_bucket_has_the_same_id() {
        let a = request_id("uid-1", "b", at(7200), HOUR);
        assert_eq!(a, request_id("uid-1", "b", at(7200 + 3599), HOUR));
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn another_bucket_target_or_workload_changes_the_id() {
        let a = request_id("uid-1", "b", at(7200), HOUR);
        assert_ne!(a, request_id("uid-1", "b", at(10800), HOUR));
        assert_ne!(a, request_id("uid-1", "c", at(7200), HOUR));
        assert_ne!(a, request_id("uid-2", "b", at(7200), HOUR));
    }

    fn is_dns_label(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= 63
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.starts_with('-')
            && !name.ends_with('-')
    }

    #[test]
    fn names_are_dns_labels_ending_in_the_hash() {
        let id = request_id("u", "b", at(0), HOUR);
        for workload in [
            "web",
            "Web.Front_end",
            &"x".repeat(300),
            "a.b.c",
            "---",
            &format!("{}-tail", "y".repeat(51)),
        ] {
            let name = migration_name(workload, &id);
            assert!(is_dns_label(&name), "{name:?} from {workload:?}");
            assert!(name.ends_with(&id[..NAME_HASH_LEN]), "{name}");
        }
        assert_eq!(migration_name("web", &id), format!("web-{}", &id[..10]));
    }
}
