//! Reviews: kinds that are only ever created, answer about the caller and
//! store nothing. `authentication.k8s.io/v1` `SelfSubjectReview` (what
//! `kubectl auth whoami` posts) answers with the user the request
//! authenticated as.
//!
//! A review must never change state, and answers only about its caller.

use http::{Response, StatusCode};
use serde_json::json;

use super::UserInfo;
use crate::ctx::{Body, Call, json};
use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceType;

/// Answer a request to a create-only kind.
pub(crate) fn create(rt: &ResourceType, user: &UserInfo, call: &Call) -> ApiResult<Response<Body>> {
    if call.method != http::Method::POST {
        return Err(ApiError::method_not_allowed(call.method.as_str()));
    }
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("authentication.k8s.io", "SelfSubjectReview") => Ok(self_subject_review(rt, user)),
        _ => Err(ApiError::method_not_allowed(call.method.as_str())),
    }
}

/// The caller's user info, in the shape kube-apiserver answers with (the
/// request body, an empty review, is not read: kubectl sends it as protobuf).
fn self_subject_review(rt: &ResourceType, user: &UserInfo) -> Response<Body> {
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    json(
        StatusCode::CREATED,
        &json!({
            "kind": rt.kind,
            "apiVersion": rt.api_version(),
            "metadata": {"creationTimestamp": crate::object::now()},
            "status": {"userInfo": info},
        }),
    )
}
