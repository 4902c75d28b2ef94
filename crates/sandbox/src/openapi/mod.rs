//! Serving the OpenAPI documents as kube-apiserver does: `/openapi/v2`
//! (Swagger 2.0), `/openapi/v3` (the discovery document, one
//! `serverRelativeURL` with a `hash` per group-version) and
//! `/openapi/v3/api/v1`, `/openapi/v3/apis/GROUP/VERSION`.
//!
//! Caching follows upstream: the `ETag` is the uppercase hex SHA-512 of the
//! JSON, `If-None-Match` with it is answered 304, a URL with the current
//! `hash` is immutable (`Cache-Control: public, immutable`) and one with a
//! stale hash is redirected (301) to the current one.
//!
//! Only JSON is served. A client that accepts nothing but the protobuf forms
//! (kubectl's `/openapi/v2` fetch) gets 406 with a `Status`; kubectl's
//! validation and `explain` use v3 in JSON and never need it. This module
//! must never hold the state lock while it builds a document: it works on a
//! copy of the registry.

pub(crate) mod builtin;
mod document;
mod paths;
mod render;

use std::collections::HashMap;

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use serde_json::{Map, Value, json};

use crate::ctx::{Body, bytes_response};
use crate::error::{ApiError, ApiResult};
use crate::registry::Registry;

/// What the OpenAPI handler needs from a request.
pub(crate) struct Request<'a> {
    pub(crate) method: &'a Method,
    pub(crate) path: &'a str,
    pub(crate) query: &'a HashMap<String, String>,
    pub(crate) accept: &'a str,
    pub(crate) if_none_match: &'a str,
}

/// Answer a request under `/openapi/`.
pub(crate) fn respond(registry: &Registry, request: &Request<'_>) -> ApiResult<Response<Body>> {
    if !matches!(*request.method, Method::GET | Method::HEAD) {
        return Err(ApiError::method_not_allowed(request.method.as_str()));
    }
    let segments: Vec<&str> = request.path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["openapi", "v2"] => {
            accepts_json(request.accept)?;
            Ok(serve(request, &document::v2(registry)))
        }
        // Upstream answers the discovery document whatever the Accept.
        ["openapi", "v3"] => Ok(serve(request, &discovery(registry))),
        ["openapi", "v3", "api", version] => group_version(registry, request, "", version),
        ["openapi", "v3", "apis", group, version] => {
            group_version(registry, request, group, version)
        }
        _ => Err(ApiError::no_route(request.path)),
    }
}

fn group_version(
    registry: &Registry,
    request: &Request<'_>,
    group: &str,
    version: &str,
) -> ApiResult<Response<Body>> {
    accepts_json(request.accept)?;
    let doc =
        document::v3(registry, group, version).ok_or_else(|| ApiError::no_route(request.path))?;
    let bytes = to_bytes(&doc);
    let etag = etag(&bytes);
    match request.query.get("hash").filter(|h| !h.is_empty()) {
        Some(hash) if *hash != etag => {
            let location = server_relative_url(&document::gv_key(group, version), &etag);
            let mut response = empty(StatusCode::MOVED_PERMANENTLY);
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            Ok(response)
        }
        Some(_) => {
            let mut response = with_etag(request, bytes, &etag);
            let headers = response.headers_mut();
            headers.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, immutable"),
            );
            if let Some(expires) = a_year_from_now()
                && let Ok(value) = HeaderValue::from_str(&expires)
            {
                headers.insert(header::EXPIRES, value);
            }
            Ok(response)
        }
        None => Ok(with_etag(request, bytes, &etag)),
    }
}

/// `{"paths": {"apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=…"}}}`
fn discovery(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (key, (group, version)) in document::group_versions(registry) {
        let Some(doc) = document::v3(registry, &group, &version) else {
            continue;
        };
        let url = server_relative_url(&key, &etag(&to_bytes(&doc)));
        paths.insert(key, json!({ "serverRelativeURL": url }));
    }
    json!({ "paths": paths })
}

fn server_relative_url(key: &str, etag: &str) -> String {
    format!("/openapi/v3/{key}?hash={etag}")
}

fn to_bytes(doc: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(doc).unwrap_or_default())
}

/// Uppercase hex SHA-512, as upstream computes it.
fn etag(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA512, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02X}")).collect()
}

fn serve(request: &Request<'_>, doc: &Value) -> Response<Body> {
    let bytes = to_bytes(doc);
    let etag = etag(&bytes);
    with_etag(request, bytes, &etag)
}

/// The document with its `ETag`, or 304 when the client has it already.
fn with_etag(request: &Request<'_>, bytes: Bytes, etag: &str) -> Response<Body> {
    let quoted = format!("\"{etag}\"");
    let mut response = if matches_etag(request.if_none_match, &quoted) {
        empty(StatusCode::NOT_MODIFIED)
    } else if *request.method == Method::HEAD {
        let mut response = bytes_response(StatusCode::OK, Bytes::new());
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        response
    } else {
        bytes_response(StatusCode::OK, bytes)
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&quoted) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}

/// `If-None-Match`: `*`, or a list of (possibly weak) entity tags.
fn matches_etag(if_none_match: &str, quoted: &str) -> bool {
    if_none_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == quoted)
}

fn empty(code: StatusCode) -> Response<Body> {
    let mut response = Response::new(Empty::<Bytes>::new().map_err(|e| match e {}).boxed_unsync());
    *response.status_mut() = code;
    response
}

/// Whether the client takes JSON: some media range with q > 0 covers
/// `application/json`. An absent Accept takes anything.
fn accepts_json(accept: &str) -> ApiResult<()> {
    if accept.trim().is_empty() {
        return Ok(());
    }
    let takes_json = accept.split(',').any(|clause| {
        let mut parts = clause.split(';').map(str::trim);
        let range = parts.next().unwrap_or("").to_ascii_lowercase();
        let refused = parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.parse::<f64>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        !refused && matches!(range.as_str(), "application/json" | "application/*" | "*/*")
    });
    if takes_json {
        Ok(())
    } else {
        Err(ApiError {
            code: 406,
            reason: "NotAcceptable",
            message: "only the following media types are accepted: application/json".into(),
            details: None,
        })
    }
}

/// `Expires` for an immutable document: a year ahead, in RFC 1123 form.
fn a_year_from_now() -> Option<String> {
    let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
    let later = now.checked_add(jiff::Span::new().years(1)).ok()?;
    Some(later.strftime("%a, %d %b %Y %H:%M:%S UTC").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_refused_only_when_no_range_covers_it() {
        assert!(accepts_json("").is_ok());
        assert!(accepts_json("application/json").is_ok());
        assert!(
            accepts_json("application/com.github.proto-openapi.spec.v2@v1.0+protobuf, */*;q=0.1")
                .is_ok()
        );
        let refused =
            accepts_json("application/com.github.proto-openapi.spec.v2@v1.0+protobuf").unwrap_err();
        assert_eq!((refused.code, refused.reason), (406, "NotAcceptable"));
        assert!(accepts_json("application/json;q=0").is_err());
    }

    #[test]
    fn entity_tags_match_strong_weak_and_star() {
        assert!(matches_etag("\"AB\"", "\"AB\""));
        assert!(matches_etag("\"x\", W/\"AB\"", "\"AB\""));
        assert!(matches_etag("*", "\"AB\""));
        assert!(!matches_etag("", "\"AB\""));
        assert!(!matches_etag("\"AC\"", "\"AB\""));
    }

    #[test]
    fn the_etag_is_uppercase_sha512() {
        let tag = etag(b"{}");
        assert_eq!(tag.len(), 128);
        assert!(
            tag.chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        );
    }
}
