//! The plumbing of [`super::client`]: reading answers within a size limit,
//! turning unexpected ones into errors that say what the registry said.

use http::{HeaderMap, StatusCode, header};

use super::error::OciError;

pub(super) fn with_auth(
    request: reqwest::RequestBuilder,
    value: Option<&str>,
) -> reqwest::RequestBuilder {
    match value.and_then(|v| http::HeaderValue::from_str(v).ok()) {
        Some(mut value) => {
            value.set_sensitive(true);
            request.header(header::AUTHORIZATION, value)
        }
        None => request,
    }
}

pub(super) fn location(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

pub(super) async fn expect_success(
    response: reqwest::Response,
    action: &str,
    what: &str,
) -> Result<reqwest::Response, OciError> {
    match response.status() {
        s if s.is_success() => Ok(response),
        StatusCode::NOT_FOUND => Err(OciError::NotFound {
            what: what.to_owned(),
        }),
        _ => Err(status_error(response, action).await),
    }
}

/// The error for an unexpected status, with the start of the body (the
/// registry's own error code).
pub(super) async fn status_error(response: reqwest::Response, action: &str) -> OciError {
    let status = response.status().as_u16();
    let body = read_capped(response, 4096, action)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body);
    let text: String = text.trim().chars().take(300).collect();
    OciError::Status {
        action: action.to_owned(),
        status,
        detail: if text.is_empty() {
            String::new()
        } else {
            format!(": {text}")
        },
    }
}

pub(super) async fn read_capped(
    response: reqwest::Response,
    max_bytes: u64,
    action: &str,
) -> Result<Vec<u8>, OciError> {
    read_capped_as(response, max_bytes, action, "the answer").await
}

/// Reads the body, refusing it as soon as it passes `max_bytes`.
pub(super) async fn read_capped_as(
    mut response: reqwest::Response,
    max_bytes: u64,
    action: &str,
    what: &str,
) -> Result<Vec<u8>, OciError> {
    let too_large = || OciError::TooLarge {
        what: what.to_owned(),
        limit: max_bytes,
    };
    if response.content_length().is_some_and(|n| n > max_bytes) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| OciError::Transport {
        action: action.to_owned(),
        message: error_chain(&e),
    })? {
        if (bytes.len() + chunk.len()) as u64 > max_bytes {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The error and its causes on one line: reqwest's own message alone says
/// only "error sending request".
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}
