//! Who is asking, and whether they may. Every request but `/version` and the
//! health checks passes three steps, in this order, before anything reads
//! or writes the cluster's state:
//!
//! 1. [`authenticate`]: the request's credential becomes a [`UserInfo`], or
//!    the request is refused with 401;
//! 2. [`impersonate`]: `Impersonate-*` headers switch to another user, only
//!    for a user allowed to impersonate;
//! 3. [`authorize`]: the user's request, as [`Attributes`], is allowed or
//!    refused with 403.
//!
//! Nothing here writes state. The credentials themselves live beside this
//! seam: client certificates in `cert.rs` (with the DER they need in
//! `der.rs`), ServiceAccount tokens in `token.rs` and the `TokenRequest`
//! endpoint that issues them in `token_request.rs`, and the reviews that
//! answer about the caller in `review.rs`.

pub(crate) mod cert;
mod der;
pub(crate) mod review;
pub(crate) mod token;
pub(crate) mod token_request;

use http::HeaderMap;

use crate::cluster::Cluster;
use crate::error::ApiResult;
use crate::route::Target;

/// The user a request acts as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct UserInfo {
    pub(crate) name: String,
    pub(crate) uid: String,
    /// Includes `system:authenticated` for every authenticated user.
    pub(crate) groups: Vec<String>,
}

/// What a request asks to do, in the terms RBAC rules speak.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or for a non-resource URL the lowercase method.
    pub(crate) verb: String,
    /// True for an object or collection path, false for a non-resource URL.
    pub(crate) resource_request: bool,
    pub(crate) api_group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The request path, for a non-resource URL.
    pub(crate) path: String,
}

/// The identity a client certificate carries, once the TLS layer has
/// checked it against the sandbox's CA.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClientCertificate {
    /// The subject's common name: the user.
    pub(crate) common_name: String,
    /// The subject's organisations: the groups.
    pub(crate) organizations: Vec<String>,
}

/// What the sandbox authenticates with: its client CA and its token key.
#[derive(Debug)]
pub(crate) struct Keys {
    pub(crate) client_ca: cert::ClientCa,
    pub(crate) tokens: token::Signer,
}

/// The user behind the request's credential. As in kube-apiserver, a
/// verified client certificate comes first, then the bearer token; with
/// neither, or an invalid one, the answer is 401 (anonymous access is off).
pub(crate) fn authenticate(
    cluster: &Cluster,
    headers: &HeaderMap,
    certificate: Option<&ClientCertificate>,
) -> ApiResult<UserInfo> {
    if let Some(certificate) = certificate {
        return Ok(cert::user(certificate));
    }
    let Some(bearer) = bearer(headers) else {
        return Err(crate::error::ApiError::unauthorized());
    };
    if constant_time_eq(bearer.as_bytes(), cluster.token.as_bytes()) {
        return Ok(admin());
    }
    token::authenticate(cluster, bearer).ok_or_else(crate::error::ApiError::unauthorized)
}

/// The token of an `Authorization: Bearer` header (the scheme is
/// case-insensitive, an empty token is none).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Equality whose time does not depend on where the inputs differ, so the
/// admin token cannot be guessed byte by byte from response times.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The sandbox's administrator, whose token `Sandbox::token` returns.
pub(crate) fn admin() -> UserInfo {
    UserInfo {
        name: "sandbox-admin".to_owned(),
        uid: String::new(),
        groups: vec![
            "system:masters".to_owned(),
            "system:authenticated".to_owned(),
        ],
    }
}

/// The user the request acts as once its `Impersonate-*` headers apply.
pub(crate) fn impersonate(
    _cluster: &Cluster,
    user: UserInfo,
    _headers: &HeaderMap,
) -> ApiResult<UserInfo> {
    Ok(user)
}

/// Allows the request, or refuses it with 403.
pub(crate) fn authorize(
    _cluster: &Cluster,
    _user: &UserInfo,
    _attributes: &Attributes,
) -> ApiResult<()> {
    Ok(())
}

/// The attributes of a request to a resource path.
pub(crate) fn resource_attributes(
    method: &http::Method,
    target: &Target,
    query: &std::collections::HashMap<String, String>,
) -> Attributes {
    let watching = target.watch_path || query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let named = target.name.is_some();
    let verb = match *method {
        http::Method::GET | http::Method::HEAD if watching => "watch",
        http::Method::GET | http::Method::HEAD if named => "get",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "",
    };
    Attributes {
        verb: verb.to_owned(),
        resource_request: true,
        api_group: target.group.clone(),
        resource: target.plural.clone(),
        subresource: target.subresource.clone().unwrap_or_default(),
        namespace: target.namespace.clone().unwrap_or_default(),
        name: target.name.clone().unwrap_or_default(),
        path: String::new(),
    }
}

/// The attributes of a request to a non-resource URL (discovery, OpenAPI).
pub(crate) fn non_resource_attributes(method: &http::Method, path: &str) -> Attributes {
    Attributes {
        verb: method.as_str().to_ascii_lowercase(),
        resource_request: false,
        path: path.to_owned(),
        ..Attributes::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(namespace: Option<&str>, name: Option<&str>, sub: Option<&str>) -> Target {
        Target {
            group: "apps".into(),
            version: "v1".into(),
            plural: "deployments".into(),
            namespace: namespace.map(Into::into),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
            watch_path: false,
        }
    }

    #[test]
    fn methods_and_paths_become_rbac_verbs() {
        let none = std::collections::HashMap::new();
        let watch = std::collections::HashMap::from([("watch".to_owned(), "1".to_owned())]);
        let cases = [
            (
                http::Method::GET,
                target(Some("ns"), Some("web"), None),
                &none,
                "get",
            ),
            (
                http::Method::GET,
                target(Some("ns"), None, None),
                &none,
                "list",
            ),
            (http::Method::GET, target(None, None, None), &watch, "watch"),
            (
                http::Method::POST,
                target(Some("ns"), None, None),
                &none,
                "create",
            ),
            (
                http::Method::PUT,
                target(Some("ns"), Some("web"), Some("scale")),
                &none,
                "update",
            ),
            (
                http::Method::PATCH,
                target(Some("ns"), Some("web"), None),
                &none,
                "patch",
            ),
            (
                http::Method::DELETE,
                target(Some("ns"), Some("web"), None),
                &none,
                "delete",
            ),
            (
                http::Method::DELETE,
                target(Some("ns"), None, None),
                &none,
                "deletecollection",
            ),
        ];
        for (method, target, query, verb) in cases {
            let attributes = resource_attributes(&method, &target, query);
            assert_eq!(attributes.verb, verb, "{method} {target:?}");
            assert_eq!(attributes.resource, "deployments");
        }
        let scale = resource_attributes(
            &http::Method::GET,
            &target(Some("ns"), Some("web"), Some("scale")),
            &none,
        );
        assert_eq!(
            (
                scale.subresource.as_str(),
                scale.namespace.as_str(),
                scale.name.as_str()
            ),
            ("scale", "ns", "web")
        );
    }
}
