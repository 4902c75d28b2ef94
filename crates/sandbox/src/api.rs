//! Resource handlers: dispatch by method and subresource, reads (get, list)
//! and the helpers writes share. Writes live in `write.rs`, watches in
//! `watch.rs`.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::error::{ApiError, ApiResult};
use crate::http::{Body, Call, bytes_response, json};
use crate::registry::ResourceType;
use crate::route::Target;
use crate::selector::Selector;
use crate::{table, watch};

/// One request against a resource.
pub(crate) struct Ctx<'a> {
    pub(crate) cluster: &'a Arc<Cluster>,
    pub(crate) rt: Arc<ResourceType>,
    pub(crate) target: Target,
    pub(crate) call: Call,
}

impl Ctx<'_> {
    pub(crate) async fn dispatch(self) -> ApiResult<Response<Body>> {
        let sub = self.target.subresource.clone();
        match sub.as_deref() {
            None => {}
            Some("status") if self.rt.has_status => {}
            Some("scale") if self.rt.has_scale => {}
            Some(other) => {
                return Err(ApiError::not_found(
                    &self.rt.group,
                    &format!("{}/{other}", self.rt.plural),
                    self.name(),
                ));
            }
        }
        let watching = self.target.watch_path || self.call.flag("watch");
        let has_name = self.target.name.is_some();
        match (self.call.method.clone(), has_name, sub.as_deref()) {
            (Method::GET, _, None) if watching => watch::serve(self),
            (Method::GET, false, None) => self.list(),
            (Method::GET, true, Some("scale")) => self.get_scale(),
            (Method::GET, true, _) => self.get(),
            (Method::POST, false, None) => self.create(),
            (Method::PUT, true, Some("scale")) => self.put_scale(),
            (Method::PUT, true, sub) => self.update(sub),
            (Method::PATCH, true, sub) => self.patch(sub),
            (Method::DELETE, true, None) => self.delete(),
            (Method::DELETE, false, None) => self.delete_collection(),
            (method, _, _) => Err(ApiError::method_not_allowed(method.as_str())),
        }
    }

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

    fn get(&self) -> ApiResult<Response<Body>> {
        let object = self
            .cluster
            .lock()
            .get(&self.rt.key(), self.namespace(), self.name())
            .cloned()
            .ok_or_else(|| self.not_found())?;
        Ok(self.object_response(StatusCode::OK, &object, None))
    }

    fn list(&self) -> ApiResult<Response<Body>> {
        let selector = self.selector()?;
        let limit = self
            .call
            .param("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0);
        let token = self
            .call
            .param("continue")
            .map(Continue::decode)
            .transpose()?;
        let namespace = self
            .target
            .namespace
            .as_deref()
            .filter(|_| self.rt.namespaced);
        let (items, rv, next) = {
            let state = self.cluster.lock();
            let rv = token.as_ref().map_or(state.resource_version(), |t| t.rv);
            let after = token
                .as_ref()
                .map(|t| (t.namespace.clone(), t.name.clone()));
            let mut items = Vec::new();
            let mut next = None;
            for (key, object) in state.range(&self.rt.key(), namespace, after.as_ref()) {
                if !selector.matches(object) {
                    continue;
                }
                if limit.is_some_and(|l| items.len() >= l) {
                    next = Some(Continue {
                        rv,
                        namespace: key.0.clone(),
                        name: String::new(),
                    });
                    break;
                }
                items.push(object.clone());
            }
            // The token resumes after the last item returned.
            if let (Some(token), Some(last)) = (next.as_mut(), items.last()) {
                token.namespace = crate::object::meta_str(last, "namespace").to_string();
                token.name = crate::object::meta_str(last, "name").to_string();
            }
            (items, rv, next)
        };
        let meta = table::ListMeta {
            resource_version: rv.to_string(),
            continue_token: next.map(|t| t.encode()),
        };
        if self.wants_table() {
            let objects: Vec<&Value> = items.iter().map(|o| o.as_ref()).collect();
            let t = table::table(
                &self.rt,
                &objects,
                &meta,
                true,
                self.call.param("includeObject"),
            );
            return Ok(json(StatusCode::OK, &t));
        }
        Ok(bytes_response(
            StatusCode::OK,
            self.list_bytes(&items, &meta),
        ))
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

/// The position a paginated list resumes from. Opaque to clients.
struct Continue {
    rv: u64,
    namespace: String,
    name: String,
}

impl Continue {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(json!([self.rv, self.namespace, self.name]).to_string())
    }

    fn decode(token: &str) -> ApiResult<Self> {
        let invalid = || ApiError::bad_request("invalid continue token");
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| invalid())?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        Ok(Self {
            rv: value.get(0).and_then(Value::as_u64).ok_or_else(invalid)?,
            namespace: value
                .get(1)
                .and_then(Value::as_str)
                .ok_or_else(invalid)?
                .to_string(),
            name: value
                .get(2)
                .and_then(Value::as_str)
                .ok_or_else(invalid)?
                .to_string(),
        })
    }
}
