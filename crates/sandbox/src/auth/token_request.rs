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
    /// it, Kubernetes protobuf.
    fn token_request_spec(&self) -> ApiResult<Spec> {
        if self
            .call
            .content_type
            .starts_with("application/vnd.kubernetes.protobuf")
        {
            return protobuf::token_request(&self.call.body).ok_or_else(|| {
                ApiError::bad_request("the request body is not a valid protobuf TokenRequest")
            });
        }
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

/// Just enough of the protobuf wire format to read a TokenRequest, the
/// body kubectl sends: `k8s\0`, then a `runtime.Unknown` whose `raw` field
/// holds the `TokenRequest` message (field numbers from k8s.io/api's
/// `authentication/v1/generated.proto`).
mod protobuf {
    use super::{Bound, Spec};

    const MAGIC: &[u8] = b"k8s\0";

    enum Field<'a> {
        Varint(u64),
        Bytes(&'a [u8]),
        Fixed,
    }

    fn varint(bytes: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = bytes.split_first()?;
            *bytes = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// Every (field number, value) of a message, or `None` if malformed.
    fn fields(mut bytes: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let key = varint(&mut bytes)?;
            let field = match key & 7 {
                0 => Field::Varint(varint(&mut bytes)?),
                2 => {
                    let length = usize::try_from(varint(&mut bytes)?).ok()?;
                    if bytes.len() < length {
                        return None;
                    }
                    let (value, rest) = bytes.split_at(length);
                    bytes = rest;
                    Field::Bytes(value)
                }
                1 | 5 => {
                    let size = if key & 7 == 1 { 8 } else { 4 };
                    bytes = bytes.get(size..)?;
                    Field::Fixed
                }
                _ => return None,
            };
            out.push((key >> 3, field));
        }
        Some(out)
    }

    fn text(bytes: &[u8]) -> Option<String> {
        String::from_utf8(bytes.to_vec()).ok()
    }

    pub(super) fn token_request(body: &[u8]) -> Option<Spec> {
        let unknown = body.strip_prefix(MAGIC)?;
        let raw = fields(unknown)?
            .into_iter()
            .find_map(|(n, f)| match (n, f) {
                (2, Field::Bytes(raw)) => Some(raw),
                _ => None,
            })?;
        let mut spec = Spec::default();
        for (number, field) in fields(raw)? {
            match (number, field) {
                (1, Field::Bytes(meta)) => {
                    for (number, field) in fields(meta)? {
                        match (number, field) {
                            (1, Field::Bytes(name)) => spec.name = text(name)?,
                            (3, Field::Bytes(namespace)) => spec.namespace = text(namespace)?,
                            _ => {}
                        }
                    }
                }
                (2, Field::Bytes(request)) => {
                    for (number, field) in fields(request)? {
                        match (number, field) {
                            (1, Field::Bytes(audience)) => spec.audiences.push(text(audience)?),
                            // int64 as a varint: two's complement in 64 bits.
                            (4, Field::Varint(seconds)) => {
                                spec.expiration_seconds = Some(seconds as i64)
                            }
                            (3, Field::Bytes(reference)) => {
                                let mut bound = Bound::default();
                                for (number, field) in fields(reference)? {
                                    let Field::Bytes(value) = field else { continue };
                                    let value = text(value)?;
                                    match number {
                                        1 => bound.kind = value,
                                        2 => bound.api_version = value,
                                        3 => bound.name = value,
                                        4 => bound.uid = value,
                                        _ => {}
                                    }
                                }
                                spec.bound = Some(bound);
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Some(spec)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
            let mut out = vec![(number << 3 | 2) as u8, bytes.len() as u8];
            out.extend_from_slice(bytes);
            out
        }

        #[test]
        fn reads_a_token_request_as_kubectl_encodes_it() {
            let mut spec = field(1, b"vault");
            spec.extend(field(1, b"https://kubernetes.default.svc.cluster.local"));
            spec.extend([4 << 3, 0x90, 0x1c]); // expirationSeconds = 3600
            let mut reference = field(1, b"Secret");
            reference.extend(field(2, b"v1"));
            reference.extend(field(3, b"s"));
            spec.extend(field(3, &reference));
            let mut request = field(1, &field(3, b"team"));
            request.extend(field(2, &spec));
            let mut unknown = field(1, &field(2, b"TokenRequest"));
            unknown.extend(field(2, &request));
            let body = [MAGIC, &unknown].concat();
            let read = token_request(&body).expect("parses");
            assert_eq!(read.namespace, "team");
            assert_eq!(read.audiences.len(), 2);
            assert_eq!(read.expiration_seconds, Some(3600));
            let bound = read.bound.expect("bound");
            assert_eq!((bound.kind.as_str(), bound.name.as_str()), ("Secret", "s"));
        }

        #[test]
        fn malformed_bodies_are_none() {
            assert!(token_request(b"{}").is_none());
            assert!(token_request(b"k8s\0\x12\x05ab").is_none(), "short field");
            assert!(token_request(b"k8s\0\x0b").is_none(), "group wire type");
            assert!(token_request(&[b"k8s\0" as &[u8], &[0x80; 11]].concat()).is_none());
        }
    }
}
