//! The access reviews of authorization.k8s.io: SelfSubjectAccessReview,
//! SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectRulesReview
//! (what `kubectl auth can-i [--list]` asks), answered from the authorizer
//! at create and never stored, as kube-apiserver does. They must never
//! change the cluster's state.

use serde_json::{Map, Value, json};

use crate::auth::attributes::{Attributes, UserInfo};
use crate::auth::rbac::{Authorizer, aggregate_errors};
use crate::auth::rules::Rule;
use crate::ctx::Ctx;
use crate::error::{ApiError, ApiResult, Cause};

pub(super) const GROUP: &str = "authorization.k8s.io";

/// The answered review: the request's `review` with its status filled in.
pub(super) fn answer(ctx: &Ctx<'_>, mut review: Value) -> ApiResult<Value> {
    let Some(map) = review.as_object_mut() else {
        return Err(ApiError::bad_request("the request body must be an object"));
    };
    map.insert("apiVersion".into(), json!(ctx.rt.api_version()));
    map.insert("kind".into(), json!(ctx.rt.kind));
    let meta = map
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    // As the create handler does: the namespace comes from the path.
    let namespace = ctx.namespace();
    let given = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
    if !namespace.is_empty() && !given.is_empty() && given != namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if namespace.is_empty() {
        meta.remove("namespace");
    } else {
        meta.insert("namespace".into(), json!(namespace));
    }
    let authorizer = &ctx.cluster.authorizer;
    let kind = ctx.rt.kind.as_str();
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let status = match ctx.rt.plural.as_str() {
        "selfsubjectrulesreviews" => {
            let namespace = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
            if namespace.is_empty() {
                return Err(ApiError::bad_request("no namespace on request"));
            }
            // Upstream answers a new object: only the status, no spec.
            review["spec"] = json!({});
            rules_review(authorizer, &ctx.user, namespace)
        }
        "selfsubjectaccessreviews" => {
            let attributes = checked_attributes(kind, &spec)?;
            access_review(authorizer, &ctx.user, &attributes)
        }
        plural => {
            let local = plural == "localsubjectaccessreviews";
            let mut causes = spec_causes(&spec);
            let user = reviewed_user(&spec);
            if user.name.is_empty() && user.groups.is_empty() {
                causes.push(invalid(
                    "spec.user",
                    "\"\"",
                    "at least one of user or group must be specified",
                ));
            }
            causes.extend(metadata_causes(&review, local));
            if local {
                causes.extend(local_causes(&spec, namespace));
            }
            if !causes.is_empty() {
                return Err(ApiError::invalid(GROUP, kind, "", &causes));
            }
            access_review(authorizer, &user, &attributes(&spec))
        }
    };
    review["status"] = status;
    Ok(review)
}

/// The attributes a (self) access review asks about, refused with 422 unless
/// exactly one kind of attributes is given.
fn checked_attributes(kind: &str, spec: &Value) -> ApiResult<Attributes> {
    let causes = spec_causes(spec);
    if !causes.is_empty() {
        return Err(ApiError::invalid(GROUP, kind, "", &causes));
    }
    Ok(attributes(spec))
}

fn spec_causes(spec: &Value) -> Vec<Cause> {
    let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    match (resource, non_resource) {
        (Some(_), Some(n)) => vec![invalid(
            "spec.nonResourceAttributes",
            &format!(
                "authorization.NonResourceAttributes{{Path:{:?}, Verb:{:?}}}",
                text(n, "path"),
                text(n, "verb")
            ),
            "cannot be specified in combination with resourceAttributes",
        )],
        (None, None) => vec![invalid(
            "spec.resourceAttributes",
            "\"null\"",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
        _ => Vec::new(),
    }
}

/// A SubjectAccessReview's metadata must be empty (a local one's but for
/// its namespace).
fn metadata_causes(review: &Value, local: bool) -> Vec<Cause> {
    let meta = review.get("metadata").and_then(Value::as_object);
    let set: Map<String, Value> = meta
        .into_iter()
        .flatten()
        .filter(|(k, v)| {
            !v.is_null() && k.as_str() != "managedFields" && !(local && k.as_str() == "namespace")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if set.is_empty() {
        return Vec::new();
    }
    let detail = if local {
        "must be empty except for namespace"
    } else {
        "must be empty"
    };
    vec![invalid("metadata", &Value::Object(set).to_string(), detail)]
}

fn local_causes(spec: &Value, namespace: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(resource) = spec.get("resourceAttributes").filter(|v| !v.is_null()) {
        let asked = text(resource, "namespace");
        if asked != namespace {
            causes.push(invalid(
                "spec.resourceAttributes.namespace",
                &format!("{asked:?}"),
                "must match metadata.namespace",
            ));
        }
    }
    if let Some(n) = spec.get("nonResourceAttributes").filter(|v| !v.is_null()) {
        causes.push(invalid(
            "spec.nonResourceAttributes",
            &format!(
                "authorization.NonResourceAttributes{{Path:{:?}, Verb:{:?}}}",
                text(n, "path"),
                text(n, "verb")
            ),
            "disallowed on this kind of request",
        ));
    }
    causes
}

/// The user a SubjectAccessReview names: its groups as given, nothing added.
fn reviewed_user(spec: &Value) -> UserInfo {
    let groups = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    UserInfo {
        name: text(spec, "user").to_owned(),
        uid: text(spec, "uid").to_owned(),
        groups,
    }
}

fn attributes(spec: &Value) -> Attributes {
    match spec.get("resourceAttributes").filter(|v| !v.is_null()) {
        Some(r) => {
            let mut a = Attributes::resource(
                text(r, "verb"),
                text(r, "group"),
                text(r, "resource"),
                text(r, "namespace"),
                text(r, "name"),
            );
            a.subresource = text(r, "subresource").to_owned();
            a
        }
        None => {
            let n = spec.get("nonResourceAttributes").unwrap_or(&Value::Null);
            Attributes {
                verb: text(n, "verb").to_owned(),
                path: text(n, "path").to_owned(),
                ..Attributes::default()
            }
        }
    }
}

fn access_review(authorizer: &Authorizer, user: &UserInfo, attributes: &Attributes) -> Value {
    let decision = authorizer.decide(user, attributes);
    let mut status = json!({"allowed": decision.allowed});
    let reason = decision.reason();
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    status
}

/// What `user` may do in `namespace`: everything for a superuser (or with
/// authorization off), then every RBAC rule that applies.
fn rules_review(authorizer: &Authorizer, user: &UserInfo, namespace: &str) -> Value {
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    if user.is_superuser() || !authorizer.enabled() {
        resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
    }
    let mut status = Map::new();
    if authorizer.enabled() {
        let (rules, errors) = authorizer.index().rules_for(user, namespace);
        for rule in rules {
            if !rule.resources.is_empty() {
                resource_rules.push(
                    Rule {
                        non_resource_urls: Vec::new(),
                        ..rule.clone()
                    }
                    .to_json(),
                );
            }
            if !rule.non_resource_urls.is_empty() {
                non_resource_rules
                    .push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
            }
        }
        if !errors.is_empty() {
            status.insert("evaluationError".into(), json!(aggregate_errors(&errors)));
        }
    }
    status.insert("resourceRules".into(), Value::Array(resource_rules));
    status.insert("nonResourceRules".into(), Value::Array(non_resource_rules));
    status.insert("incomplete".into(), json!(false));
    Value::Object(status)
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value.get(field).and_then(Value::as_str).unwrap_or("")
}

fn invalid(field: &str, value: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.to_owned(),
        message: format!("Invalid value: {value}: {detail}"),
    }
}
