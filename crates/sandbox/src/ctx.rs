//! The request/response vocabulary every handler shares: the response
//! [`Body`], the parsed [`Call`], the per-request [`Ctx`] with its accessors,
//! and the helpers that build answers in the negotiated media type.
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
use crate::{media, proto, table};

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
    /// reviews depend on it.
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

    /// Whether answers are protobuf: the client prefers it, the kind has a
    /// protobuf form, and no Table was asked for (Tables are JSON only).
    pub(crate) fn answers_protobuf(&self) -> bool {
        let rt = &self.rt;
        !self.wants_table()
            && media::prefers_protobuf(
                &self.call.accept,
                proto::supports(&rt.group, &rt.version, &rt.kind),
            )
    }

    /// Answer with any object that carries its apiVersion and kind (an
    /// object of the resource, a Scale), in the negotiated media type.
    pub(crate) fn value_response(&self, code: StatusCode, value: &Value) -> Response<Body> {
        if self.answers_protobuf()
            && let Some(bytes) = proto::encode_object(value)
        {
            return protobuf_response(code, bytes);
        }
        json(code, value)
    }

    /// Answer with a `<Kind>List`, in the negotiated media type.
    pub(crate) fn list_response(
        &self,
        items: &[Arc<Value>],
        meta: &table::ListMeta,
    ) -> Response<Body> {
        if self.answers_protobuf() {
            let list_kind = format!("{}List", self.rt.kind);
            if let Some(bytes) =
                proto::encode_list(&self.rt.api_version(), &list_kind, &list_meta(meta), items)
            {
                return protobuf_response(StatusCode::OK, bytes);
            }
        }
        bytes_response(StatusCode::OK, self.list_bytes(items, meta))
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
            Some(bytes) if !self.answers_protobuf() => bytes_response(code, bytes.clone()),
            _ => self.value_response(code, object),
        }
    }

    /// A `<Kind>List`, serialized item by item without copying the objects.
    pub(crate) fn list_bytes(&self, items: &[Arc<Value>], meta: &table::ListMeta) -> Bytes {
        let head = json!({"kind": format!("{}List", self.rt.kind), "apiVersion": self.rt.api_version(), "metadata": list_meta(meta)});
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

/// A protobuf response from an enveloped message.
pub(crate) fn protobuf_response(code: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(bytes)).boxed_unsync());
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(proto::MEDIA_TYPE),
    );
    response
}

fn list_meta(meta: &table::ListMeta) -> Value {
    let mut list_meta = json!({"resourceVersion": meta.resource_version});
    if let Some(token) = &meta.continue_token {
        list_meta["continue"] = json!(token);
    }
    list_meta
}

/// The `Status` of an error, in protobuf when the client prefers it (every
/// kind's clients can read a protobuf Status).
pub(crate) fn error_response(error: &ApiError, accept: &str) -> Response<Body> {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let status = error.to_status();
    if media::prefers_protobuf(accept, true)
        && let Some(bytes) = proto::encode_object(&status)
    {
        return protobuf_response(code, bytes);
    }
    json(code, &status)
}
