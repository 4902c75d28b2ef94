//! Reviews: the kinds that are only ever created, answer a question about a
//! user and store nothing (their verbs are only `create`). Authentication's
//! `SelfSubjectReview` (what `kubectl auth whoami` posts) is answered in
//! `self_subject`; authorization's access reviews (what `kubectl auth
//! can-i` posts) in `access`.
//!
//! This file only routes: it takes the POST, reads the body through the one
//! body reader (JSON, YAML or protobuf by Content-Type) and answers in the
//! negotiated media type. A review must never change the cluster's state.

mod access;
mod self_subject;

use http::{Method, Response, StatusCode};

use crate::ctx::{Body, Ctx};
use crate::error::{ApiError, ApiResult};

/// Answer a create of a review kind; every other verb is not allowed.
pub(crate) fn answer(ctx: &Ctx<'_>) -> ApiResult<Response<Body>> {
    if ctx.call.method != Method::POST || ctx.target.name.is_some() {
        return Err(ApiError::method_not_allowed(ctx.call.method.as_str()));
    }
    let review = ctx.body()?;
    let answered = match (ctx.rt.group.as_str(), ctx.rt.kind.as_str()) {
        (self_subject::GROUP, "SelfSubjectReview") => self_subject::answer(ctx),
        (access::GROUP, _) => access::answer(ctx, review)?,
        _ => return Err(ApiError::method_not_allowed(ctx.call.method.as_str())),
    };
    Ok(ctx.value_response(StatusCode::CREATED, &answered))
}
