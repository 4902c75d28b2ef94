//! The errors of the metrics layer, split by what a caller does about them:
//! a transient failure (unreachable, timed out) is worth another cycle; a
//! rejected query or a bad endpoint needs a person to fix configuration.

use std::time::Duration;

/// A `Result` of the metrics layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong while reading metrics.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server could not be reached or kept failing with a transient error
    /// (connection refused, 5xx, 429) through every retry.
    #[error("query {query:?} to Prometheus at {server} failed after {attempts} attempts")]
    Unavailable {
        query: String,
        server: String,
        attempts: u32,
        #[source]
        source: prometheus_http_query::Error,
    },
    /// Every attempt ran past the per-query timeout.
    #[error(
        "query {query:?} to Prometheus at {server} timed out after {timeout:?} ({attempts} attempts)"
    )]
    Timeout {
        query: String,
        server: String,
        timeout: Duration,
        attempts: u32,
    },
    /// The server refused the query (4xx, PromQL error). Retrying will not
    /// help; the query text is included because it is usually user-supplied.
    #[error("Prometheus at {server} rejected query {query:?} ({expr})")]
    Rejected {
        query: String,
        server: String,
        expr: String,
        #[source]
        source: prometheus_http_query::Error,
    },
    /// The query answered with something other than an instant vector (for
    /// instant queries) or a matrix (for range queries).
    #[error("query {query:?} to Prometheus at {server} returned a {kind}, expected {expected}")]
    UnexpectedResult {
        query: String,
        server: String,
        kind: &'static str,
        expected: &'static str,
    },
    /// The endpoint configuration cannot be turned into a client.
    #[error("invalid Prometheus endpoint {url}: {reason}")]
    InvalidEndpoint { url: String, reason: String },
    /// The endpoint has a bearer token and a URL that is not https, and was
    /// not explicitly allowed to send the token in clear.
    #[error(
        "refusing to send the bearer token to Prometheus at {url} over plain http: use https, or allow it explicitly"
    )]
    TokenOverPlainHttp { url: String },
    /// A range query with an empty or inverted range or a non-positive step.
    #[error("invalid range query: {0}")]
    InvalidRange(String),
    /// The source was asked about a cluster it has no endpoint or data for.
    #[error("no metrics source is configured for cluster {0:?}")]
    UnknownCluster(String),
    /// The source holds fixed values and evaluates no PromQL.
    #[error("this metrics source evaluates no PromQL queries (only Prometheus does)")]
    NoQueries,
}

impl Error {
    /// The message with its root cause, for a condition or an Event where
    /// only one line fits: `... failed after 3 attempts: Connection refused`.
    pub fn with_root_cause(&self) -> String {
        let message = self.to_string();
        let mut root: Option<&dyn std::error::Error> = None;
        let mut next = std::error::Error::source(self);
        while let Some(cause) = next {
            root = Some(cause);
            next = cause.source();
        }
        match root.map(|cause| cause.to_string()) {
            Some(cause) if !message.contains(&cause) => format!("{message}: {cause}"),
            _ => message,
        }
    }

    /// True when a later attempt may succeed without a configuration change.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable { .. } | Error::Timeout { .. })
    }
}
