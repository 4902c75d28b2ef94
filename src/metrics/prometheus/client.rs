//! One Prometheus endpoint: the HTTP client, and a query with a timeout per
//! attempt and capped exponential backoff between attempts on transient
//! failures only.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_http_query::Error as PromError;
use prometheus_http_query::response::{Data, InstantVector, RangeVector};
use serde::{Deserialize, Serialize};

use super::PrometheusEndpoint;
use crate::metrics::{Error, Result};

/// How often and how patiently a query is retried.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in total, including the first (at least 1).
    pub max_attempts: u32,
    /// Wait before the second attempt; doubled each time after.
    #[serde(with = "millis")]
    pub initial_backoff: Duration,
    /// Upper bound of one wait.
    #[serde(with = "millis")]
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based).
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis().try_into().unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// A client for one endpoint, shared by every cluster that uses it.
#[derive(Clone)]
pub(crate) struct Endpoint {
    client: prometheus_http_query::Client,
    /// The URL, for error messages (never the token).
    server: String,
}

/// What a query is sent as.
enum Request {
    Instant { at_secs: i64 },
    Range { start: i64, end: i64, step: f64 },
}

impl Endpoint {
    pub(crate) fn new(endpoint: &PrometheusEndpoint, timeout: Duration) -> Result<Self> {
        endpoint.check_token_transport()?;
        let invalid = |reason: String| Error::InvalidEndpoint {
            url: endpoint.url.clone(),
            reason,
        };
        let uri: http::Uri = endpoint
            .url
            .parse()
            .map_err(|e: http::uri::InvalidUri| invalid(e.to_string()))?;
        let http = crate::net::http_client(
            &uri,
            endpoint.ca_pem.as_deref(),
            endpoint.bearer_token.as_deref(),
            timeout,
        )
        .map_err(invalid)?;
        let client = prometheus_http_query::Client::from(http, &endpoint.url)
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Endpoint {
            client,
            server: endpoint.url.clone(),
        })
    }

    pub(crate) async fn instant(
        &self,
        settings: &Settings,
        name: &str,
        expr: &str,
        at_secs: i64,
    ) -> Result<Vec<InstantVector>> {
        match self
            .send(settings, name, expr, Request::Instant { at_secs })
            .await?
        {
            Data::Vector(v) => Ok(v),
            other => Err(self.unexpected(name, &other, "an instant vector")),
        }
    }

    pub(crate) async fn range(
        &self,
        settings: &Settings,
        name: &str,
        expr: &str,
        start: i64,
        end: i64,
        step: f64,
    ) -> Result<Vec<RangeVector>> {
        match self
            .send(settings, name, expr, Request::Range { start, end, step })
            .await?
        {
            Data::Matrix(m) => Ok(m),
            other => Err(self.unexpected(name, &other, "a range vector")),
        }
    }

    fn unexpected(&self, name: &str, data: &Data, expected: &'static str) -> Error {
        Error::UnexpectedResult {
            query: name.to_owned(),
            server: self.server.clone(),
            kind: match data {
                Data::Vector(_) => "vector",
                Data::Matrix(_) => "matrix",
                Data::Scalar(_) => "scalar",
            },
            expected,
        }
    }

    async fn send(
        &self,
        settings: &Settings,
        name: &str,
        expr: &str,
        request: Request,
    ) -> Result<Data> {
        let timeout = settings.timeout;
        let timeout_ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        let mut attempt = 0;
        loop {
            attempt += 1;
            settings.requests.fetch_add(1, Ordering::Relaxed);
            // POST: the combined queries are too long for some proxies' URLs.
            let call = async {
                match request {
                    Request::Instant { at_secs } => {
                        self.client
                            .query(expr)
                            .at(at_secs)
                            .timeout(timeout_ms)
                            .post()
                            .await
                    }
                    Request::Range { start, end, step } => {
                        self.client
                            .query_range(expr, start, end, step)
                            .timeout(timeout_ms)
                            .post()
                            .await
                    }
                }
            };
            let failure = match tokio::time::timeout(timeout, call).await {
                Ok(Ok(result)) => return Ok(result.into_inner().0),
                Ok(Err(err)) if !is_transient(&err) => {
                    return Err(Error::Rejected {
                        query: name.to_owned(),
                        server: self.server.clone(),
                        expr: expr.to_owned(),
                        source: err,
                    });
                }
                Ok(Err(err)) => Some(err),
                Err(_elapsed) => None,
            };
            if attempt >= settings.retry.max_attempts.max(1) {
                return Err(match failure {
                    Some(source) if !is_timeout(&source) => Error::Unavailable {
                        query: name.to_owned(),
                        server: self.server.clone(),
                        attempts: attempt,
                        source,
                    },
                    _ => Error::Timeout {
                        query: name.to_owned(),
                        server: self.server.clone(),
                        timeout,
                        attempts: attempt,
                    },
                });
            }
            tracing::debug!(query = name, server = %self.server, attempt, "retrying a transient failure");
            tokio::time::sleep(settings.retry.backoff(attempt)).await;
        }
    }
}

/// What every query of a source shares.
pub(crate) struct Settings {
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// HTTP requests sent, retries included.
    pub requests: Arc<AtomicU64>,
}

/// Connect errors, timeouts, 5xx and 429 are worth another attempt; a query
/// Prometheus refused (bad_data, execution) or a 4xx is not.
fn is_transient(err: &PromError) -> bool {
    match err {
        PromError::Prometheus(e) => {
            e.is_timeout() || e.is_unavailable() || e.is_internal() || e.is_canceled()
        }
        PromError::Client(c) => match c.inner() {
            Some(e) => match e.status() {
                Some(status) => status.is_server_error() || status.as_u16() == 429,
                None => e.is_connect() || e.is_timeout() || e.is_request() || e.is_body(),
            },
            None => false,
        },
        _ => false,
    }
}

fn is_timeout(err: &PromError) -> bool {
    match err {
        PromError::Prometheus(e) => e.is_timeout(),
        PromError::Client(c) => c.inner().is_some_and(|e| e.is_timeout()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(700),
        };
        let waits: Vec<u128> = (1..=6).map(|a| policy.backoff(a).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 700, 700, 700]);
        assert_eq!(policy.backoff(u32::MAX), Duration::from_millis(700));
    }

    fn with_token(url: &str, allowed: bool) -> PrometheusEndpoint {
        PrometheusEndpoint {
            url: url.to_owned(),
            bearer_token: Some("secret-token".to_owned()),
            allow_token_over_plain_http: allowed,
            ..PrometheusEndpoint::default()
        }
    }

    #[test]
    fn a_token_goes_over_plain_http_only_when_allowed() {
        let timeout = Duration::from_secs(1);
        for url in ["http://p:9090", "HTTP://p:9090", "ftp://p"] {
            match Endpoint::new(&with_token(url, false), timeout) {
                Err(Error::TokenOverPlainHttp { url: u }) => assert_eq!(u, url),
                Err(other) => panic!("{url}: {other}"),
                Ok(_) => panic!("{url}: a client that sends the token in clear"),
            }
        }
        assert!(Endpoint::new(&with_token("http://p:9090", true), timeout).is_ok());
        assert!(Endpoint::new(&with_token("https://p:9090", false), timeout).is_ok());
        let no_token = PrometheusEndpoint {
            url: "http://p:9090".to_owned(),
            ..PrometheusEndpoint::default()
        };
        assert!(Endpoint::new(&no_token, timeout).is_ok());
    }

    #[test]
    fn a_shared_client_does_not_carry_a_token_the_second_cluster_may_not_send() {
        let clusters = [
            ("a".to_owned(), with_token("http://p:9090", true)),
            ("b".to_owned(), with_token("http://p:9090", false)),
        ];
        match crate::metrics::PrometheusSource::new(Default::default(), clusters) {
            Err(Error::TokenOverPlainHttp { .. }) => {}
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("b reuses a's client and sends the token in clear"),
        }
    }

    #[test]
    fn retry_policy_loads_from_json() {
        let p: RetryPolicy =
            serde_json::from_str(r#"{"maxAttempts": 5, "initialBackoff": 50}"#).unwrap();
        assert_eq!(p.max_attempts, 5);
        assert_eq!(p.initial_backoff, Duration::from_millis(50));
        assert_eq!(p.max_backoff, RetryPolicy::default().max_backoff);
    }
}
