//! The `token` subresource of ServiceAccounts: an `authentication.k8s.io/v1`
//! `TokenRequest` posted to `/api/v1/namespaces/NS/serviceaccounts/NAME/token`
//! (what `kubectl create token` sends) is answered with a signed token, with
//! kube-apiserver's defaults, bounds and errors. [`issue`] is the one place
//! tokens are made, for this endpoint and for the Rust API alike.
//!
//! It must never issue a token for a ServiceAccount or bound object that
//! does not exist, and it stores nothing: a token lives only in its bytes.

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::token::{Claims, Private, Ref, SERVICE_ACCOUNTS, username};
use crate::cluster::Cluster;
use crate::ctx::{Body, Ctx, json};
use crate::error::{ApiError, ApiResult, Cause};
use crate::object::meta_str;

/// A TokenRequest's lifetime when it names none.
pub(crate) const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
const GROUP: &str = "authentication.k8s.io";
const KIND: &str = "TokenRequest";

/// An object a token is bound to: it stops working when that goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Bound {
    pub(crate) kind: String,
    pub(crate) api_version: String,
    pub(crate) name: String,
    pub(crate) uid: String,
}

/// The parts of a TokenRequest the sandbox reads.
#[derive(Debug, Default, PartialEq, Eq)]
struct Spec {
    name: String,
    namespace: String,
    audiences: Vec<String>,
    expiration_seconds: Option<i64>,
    bound: Option<Bound>,
}

/// A token for the ServiceAccount `namespace/name`, issued at `issued_at`
/// and expiring at `expires_at` (Unix seconds), optionally bound to an
/// object in its namespace. Errors are the API's: 404 for a missing
/// ServiceAccount or bound object, 400/409 for a bad binding.
pub(crate) fn issue(
    cluster: &Cluster,
    (namespace, name): (&str, &str),
    audiences: Vec<String>,
    (issued_at, expires_at): (i64, i64),
    bound: Option<&Bound>,
) -> ApiResult<String> {
    let private = {
        let state = cluster.lock();
        let account = state
            .get(SERVICE_ACCOUNTS, namespace, name)
            .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
        let mut private = Private {
            namespace: namespace.to_owned(),
            serviceaccount: Ref {
                name: name.to_owned(),
                uid: meta_str(account, "uid").to_owned(),
            },
            ..Private::default()
        };
        if let Some(bound) = bound {
            let (key, plural) = match (bound.api_version.as_str(), bound.kind.as_str()) {
                ("v1", "Pod") => ("/pods", "pods"),
                ("v1", "Secret") => ("/secrets", "secrets"),
                (api_version, kind) => {
                    let (group, version) =
                        api_version.rsplit_once('/').unwrap_or(("", api_version));
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token to object of type {group}/{version}, Kind={kind}"
                    )));
                }
            };
            let object = state
                .get(key, namespace, &bound.name)
                .ok_or_else(|| ApiError::not_found("", plural, &bound.name))?;
            if bound.kind == "Pod"
                && object
                    .pointer("/spec/serviceAccountName")
                    .and_then(Value::as_str)
                    != Some(name)
            {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token for serviceaccount \"{name}\" to pod running with different serviceaccount name."
                )));
            }
            let uid = meta_str(object, "uid").to_owned();
            if !bound.uid.is_empty() && bound.uid != uid {
                let why = format!(
                    "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
                    bound.uid
                );
                return Err(ApiError::conflict("", &bound.kind, &bound.name, &why));
            }
            let reference = Some(Ref {
                name: bound.name.clone(),
                uid,
            });
            match bound.kind.as_str() {
                "Pod" => private.pod = reference,
                _ => private.secret = reference,
            }
        }
        private
    };
    let claims = Claims {
        aud: audiences,
        exp: expires_at,
        iat: issued_at,
        iss: super::token::ISSUER.to_owned(),
        jti: cluster.ids.uid(),
        kubernetes: private,
        nbf: issued_at,
        sub: username(namespace, name),
    };
    cluster
        .keys
        .tokens
        .sign(&claims)
        .map_err(|e| ApiError::internal(format!("failed to generate token: {e}")))
}

impl Ctx<'_> {
    /// `POST .../serviceaccounts/NAME/token`.
    pub(crate) fn create_token(&self) -> ApiResult<Response<Body>> {
        let spec = self.token_request_spec()?;
        let (namespace, name) = (self.namespace(), self.name());
        for (field, given, want) in [
            ("metadata.name", &spec.name, name),
            ("metadata.namespace", &spec.namespace, namespace),
        ] {
            if !given.is_empty() && given != want {
                let what = field.trim_start_matches("metadata.");
                let cause = Cause {
                    reason: "FieldValueInvalid",
                    field: field.to_owned(),
                    message: format!(
                        "Invalid value: \"{given}\": must match the service account {what} if specified"
                    ),
                };
                return Err(ApiError::invalid(GROUP, KIND, name, &[cause]));
            }
        }
        if self
            .cluster
            .lock()
            .get(SERVICE_ACCOUNTS, namespace, name)
            .is_none()
        {
            return Err(ApiError::not_found("", "serviceaccounts", name));
        }
        let audiences = if spec.audiences.is_empty() {
            super::token::API_AUDIENCES.map(str::to_owned).to_vec()
        } else {
            spec.audiences
        };
        let seconds = spec
            .expiration_seconds
            .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        let bound_message = if seconds < MIN_EXPIRATION_SECONDS {
            Some("may not specify a duration less than 10 minutes")
        } else if seconds > MAX_EXPIRATION_SECONDS {
            Some("may not specify a duration larger than 2^32 seconds")
        } else {
            None
        };
        if let Some(message) = bound_message {
            let cause = Cause {
                reason: "FieldValueInvalid",
                field: "spec.expirationSeconds".into(),
                message: format!("Invalid value: {seconds}: {message}"),
            };
            return Err(ApiError::invalid(GROUP, KIND, "", &[cause]));
        }
        let now = jiff::Timestamp::now().as_second();
        let token = issue(
            self.cluster,
            (namespace, name),
            audiences.clone(),
            (now, now + seconds),
            spec.bound.as_ref(),
        )?;
        let mut answer_spec = json!({"audiences": audiences, "expirationSeconds": seconds});
        if let Some(bound) = &spec.bound {
            answer_spec["boundObjectRef"] = json!({
                "kind": bound.kind, "apiVersion": bound.api_version, "name": bound.name, "uid": bound.uid,
            });
        }
        let answer = json!({
            "kind": KIND,
            "apiVersion": format!("{GROUP}/v1"),
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": timestamp(now)},
            "spec": answer_spec,
            "status": {"token": token, "expirationTimestamp": timestamp(now + seconds)},
        });
        Ok(json(StatusCode::CREATED, &answer))
    }

    /// The request body as a TokenRequest, from JSON or, as kubectl sends
    /// it, Kubernetes protobuf (decoded by the one body reader).
    fn token_request_spec(&self) -> ApiResult<Spec> {
        let body = self.body()?;
        let string =
            |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        let invalid = |what: &str| {
            ApiError::bad_request(format!(
                "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: {what}"
            ))
        };
        let spec = body.get("spec").cloned().unwrap_or(Value::Null);
        let audiences = match spec.get("audiences") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|a| a.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| invalid("spec.audiences must be a list of strings"))?,
            Some(_) => return Err(invalid("spec.audiences must be a list of strings")),
        };
        let expiration_seconds = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_i64()
                    .ok_or_else(|| invalid("spec.expirationSeconds must be an integer"))?,
            ),
        };
        let bound = spec
            .get("boundObjectRef")
            .filter(|b| b.is_object())
            .map(|b| Bound {
                kind: string(b, "kind"),
                api_version: string(b, "apiVersion"),
                name: string(b, "name"),
                uid: string(b, "uid"),
            });
        Ok(Spec {
            name: meta_str(&body, "name").to_owned(),
            namespace: meta_str(&body, "namespace").to_owned(),
            audiences,
            expiration_seconds,
            bound,
        })
    }
}

fn timestamp(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}
