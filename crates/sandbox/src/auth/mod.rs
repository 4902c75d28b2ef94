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
//! Writes of RBAC objects pass [`admit`] too (privilege-escalation
//! prevention), and the reviews (create-only kinds that answer a question
//! and store nothing) are answered by [`review`].
//!
//! The parts live beside this seam. Credentials: client certificates in
//! `cert` (with the DER they need in `der`), ServiceAccount tokens in
//! `token` and the `TokenRequest` endpoint that issues them in
//! `token_request`. Authorization: `attributes` (the vocabulary: users,
//! attributes, refusals), `rules`, `rbac` (the authorizer and its index),
//! `aggregate`, `bootstrap`, `escalation`, `validate` and `impersonation`.
//! The reviews: `review` (SelfSubjectReview for authentication, the access
//! reviews for authorization).
//!
//! Nothing here writes state, but for two things kube-apiserver and its
//! controllers write too: the default roles and bindings at start
//! (`bootstrap`), and the rules of aggregated ClusterRoles after an RBAC
//! write (`aggregate`).

mod aggregate;
pub(crate) mod attributes;
pub(crate) mod bootstrap;
pub(crate) mod cert;
mod der;
mod escalation;
mod impersonation;
pub(crate) mod rbac;
pub(crate) mod record;
mod review;
mod rules;
pub(crate) mod token;
pub(crate) mod token_request;
mod validate;

use http::HeaderMap;
use serde_json::Value;

pub(crate) use attributes::{Attributes, UserInfo, non_resource_attributes, resource_attributes};

use crate::cluster::Cluster;
use crate::ctx::{Body, Ctx};
use crate::error::{ApiError, ApiResult};
use crate::store::State;

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
        return Err(ApiError::unauthorized());
    };
    if constant_time_eq(bearer.as_bytes(), cluster.token.as_bytes()) {
        return Ok(admin());
    }
    token::authenticate(cluster, bearer).ok_or_else(ApiError::unauthorized)
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

/// The sandbox's administrator, whose token `Sandbox::token` returns: a
/// member of `system:masters`, whom RBAC allows everything.
pub(crate) fn admin() -> UserInfo {
    UserInfo {
        name: "sandbox-admin".to_owned(),
        uid: String::new(),
        groups: vec![
            attributes::SYSTEM_MASTERS.to_owned(),
            attributes::AUTHENTICATED.to_owned(),
        ],
    }
}

/// The user the request acts as once its `Impersonate-*` headers apply.
pub(crate) fn impersonate(
    cluster: &Cluster,
    user: UserInfo,
    headers: &HeaderMap,
) -> ApiResult<UserInfo> {
    impersonation::impersonate(&cluster.authorizer, user, headers)
}

/// Allows the request, or refuses it with 403.
pub(crate) fn authorize(
    cluster: &Cluster,
    user: &UserInfo,
    attributes: &Attributes,
) -> ApiResult<()> {
    let decision = cluster.authorizer.decide(user, attributes);
    if decision.allowed {
        record(cluster, user, attributes);
        Ok(())
    } else {
        Err(attributes::forbidden(user, attributes, &decision.reason()))
    }
}

/// Record an allowed request when recording is on. Only RBAC's decisions
/// are recorded: a superuser, or a sandbox without authorization, is
/// allowed everything without a rule to compare with.
fn record(cluster: &Cluster, user: &UserInfo, attributes: &Attributes) {
    if let Some(recorder) = &cluster.authz_record
        && cluster.authorizer.enabled()
        && !user.is_superuser()
    {
        recorder.allowed(user, attributes);
    }
}

/// Admission of a write, inside it and under the state lock: `new` is about
/// to replace `old` (or be created). A server-side apply that creates needs
/// `create` as well as `patch`; RBAC objects are decoded, checked against
/// privilege escalation and validated.
pub(crate) fn admit(
    ctx: &Ctx<'_>,
    state: &State,
    old: Option<&Value>,
    new: &mut Value,
) -> ApiResult<()> {
    let rt = &ctx.rt;
    if old.is_none() && ctx.call.method == http::Method::PATCH {
        let create =
            Attributes::resource("create", &rt.group, &rt.plural, ctx.namespace(), ctx.name());
        let decision = ctx.cluster.authorizer.decide(&ctx.user, &create);
        if !decision.allowed {
            return Err(ApiError::forbidden(
                &rt.group,
                &rt.plural,
                ctx.name(),
                &decision.reason(),
            ));
        }
        record(ctx.cluster, &ctx.user, &create);
    }
    if rt.group != rbac::GROUP {
        return Ok(());
    }
    validate::normalize(&rt.kind, new)?;
    let write = escalation::Write {
        authorizer: &ctx.cluster.authorizer,
        user: &ctx.user,
        resource: &rt.plural,
        namespace: ctx.namespace(),
        name: ctx.name(),
    };
    escalation::check(&write, state, old, new)?;
    let causes = validate::validate(&rt.plural, new, old);
    if causes.is_empty() {
        Ok(())
    } else {
        let name = crate::object::meta_str(new, "name");
        Err(ApiError::invalid(rbac::GROUP, &rt.kind, name, &causes))
    }
}

/// Answer a request to a review kind (answered, never stored).
pub(crate) fn review(ctx: &Ctx<'_>) -> ApiResult<http::Response<Body>> {
    review::answer(ctx)
}
