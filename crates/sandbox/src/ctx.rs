//! The request/response vocabulary every handler shares: the response
//! [`Body`], the parsed [`Call`], the per-request [`Ctx`] with its accessors,
//! and the helpers that build JSON answers.
//!
//! It only describes a request and shapes answers; it must never route,
//! dispatch or change the cluster's state (that is `http.rs`, `api.rs` and
//! the handlers'), so that every handler can depend on it without a circle.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use serde_json::{Value, json};

use crate::auth::attributes::UserInfo;
use crate::cluster::Cluster;
use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceType;
use crate::route::Target;
use crate::selector::Selector;
use crate::table;

/// Every response body: a whole JSON document or a watch stream.
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// What a handler needs to know about the request besides its body.
pub(crate) struct Call {
    pub(crate) method: Method,
    pub(crate) query: HashMap<String, String>,
    pub(crate) accept: String,
    pub(crate) content_type: String,
    pub(crate) body: Bytes,
}

impl Call {
    pub(crate) fn param(&self, key: &str) -> Option<&str> {
        self.query
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.param(key), Some("true" | "1"))
    }
}

/// One request against a resource.
pub(crate) struct Ctx<'a> {
    pub(crate) cluster: &'a Arc<Cluster>,
    pub(crate) rt: Arc<ResourceType>,
    pub(crate) target: Target,
    pub(crate) call: Call,
    /// Who asks (after impersonation): writes of RBAC objects and the
    /// access reviews depend on it.
    pub(crate) user: UserInfo,
}

impl Ctx<'_> {
    pub(crate) fn name(&self) -> &str {
        self.target.name.as_deref().unwrap_or("")
    }

    /// The namespace part of an object key.
    pub(crate) fn namespace(&self) -> &str {
        if self.rt.namespaced {
            self.target.namespace.as_deref().unwrap_or("")
        } else {
            ""
        }
    }

    pub(crate) fn not_found(&self) -> ApiError {
        ApiError::not_found(&self.rt.group, &self.rt.plural, self.name())
    }

    pub(crate) fn selector(&self) -> ApiResult<Selector> {
        Selector::parse(
            self.call.param("labelSelector"),
            self.call.param("fieldSelector"),
        )
    }

    pub(crate) fn wants_table(&self) -> bool {
        table::wanted(&self.call.accept)
    }

    /// Answer with one object, as a Table row when asked.
    pub(crate) fn object_response(
        &self,
        code: StatusCode,
        object: &Value,
        serialized: Option<&Bytes>,
    ) -> Response<Body> {
        if self.wants_table() {
            let t = table::table(
                &self.rt,
                &[object],
                &table::ListMeta::default(),
                true,
                self.call.param("includeObject"),
            );
            return json(code, &t);
        }
        match serialized {
            Some(bytes) => bytes_response(code, bytes.clone()),
            None => json(code, object),
        }
    }

    /// A `<Kind>List`, serialized item by item without copying the objects.
    pub(crate) fn list_bytes(&self, items: &[Arc<Value>], meta: &table::ListMeta) -> Bytes {
        let mut list_meta = json!({"resourceVersion": meta.resource_version});
        if let Some(token) = &meta.continue_token {
            list_meta["continue"] = json!(token);
        }
        let head = json!({"kind": format!("{}List", self.rt.kind), "apiVersion": self.rt.api_version(), "metadata": list_meta});
        let mut out = serde_json::to_vec(&head).unwrap_or_default();
        out.pop(); // the closing brace
        out.extend_from_slice(b",\"items\":[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let _ = serde_json::to_writer(&mut out, item.as_ref());
        }
        out.extend_from_slice(b"]}");
        Bytes::from(out)
    }
}

/// A JSON response.
pub(crate) fn json(code: StatusCode, value: &Value) -> Response<Body> {
    bytes_response(
        code,
        Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
    )
}

/// A JSON response from bytes already serialized.
pub(crate) fn bytes_response(code: StatusCode, bytes: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(bytes).boxed_unsync());
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub(crate) fn error_response(error: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json(code, &error.to_status())
}
