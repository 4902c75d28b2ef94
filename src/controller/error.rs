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

/// `err` and each of its causes, joined by `: `, leaving out a cause whose
/// text the message already holds: a log line or condition carries the
/// root cause (`connection refused`), not only the outermost context.
pub(crate) fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        next = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_chain_ends_with_the_root_cause_and_says_nothing_twice() {
        let err = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connection refused",
        ));
        assert_eq!(chain(&err), "outer: connection refused");
        let err = ReconcileError::NoNamespace;
        assert_eq!(chain(&err), "the policy object has no namespace");
    }
}
