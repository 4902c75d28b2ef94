//! `authentication.k8s.io/v1` `SelfSubjectReview`: the user the request
//! authenticated as (after impersonation), as `kubectl auth whoami` shows
//! it. It answers only about its caller and must never change state.

use serde_json::{Value, json};

use crate::ctx::Ctx;

pub(super) const GROUP: &str = "authentication.k8s.io";

/// The caller's user info, in the shape kube-apiserver answers with: a new
/// review holding only its creation time and the status. What the request
/// body held (an empty review) is not part of the answer.
pub(super) fn answer(ctx: &Ctx<'_>) -> Value {
    let user = &ctx.user;
    let mut info = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    json!({
        "kind": ctx.rt.kind,
        "apiVersion": ctx.rt.api_version(),
        "metadata": {"creationTimestamp": crate::object::now()},
        "status": {"userInfo": info},
    })
}
