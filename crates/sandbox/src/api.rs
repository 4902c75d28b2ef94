//! Resource handlers: dispatch by method and subresource, and reads (get,
//! list). Writes live in `write.rs`, watches in `watch.rs`, and the request
//! context and response helpers every handler shares in `ctx.rs`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{Method, Response, StatusCode};
use serde_json::{Value, json};

use crate::ctx::{Body, Ctx, json};
use crate::error::{ApiError, ApiResult};
use crate::store::NAMESPACE_KEY;
use crate::{media, proto, table, watch};

/// Answer one request against a resource, by method and subresource.
pub(crate) async fn dispatch(ctx: Ctx<'_>) -> ApiResult<Response<Body>> {
    if ctx.rt.is_create_only() {
        return crate::auth::review(&ctx);
    }
    let sub = ctx.target.subresource.clone();
    match sub.as_deref() {
        None => {}
        Some("status") if ctx.rt.has_status => {}
        Some("scale") if ctx.rt.has_scale => {}
        Some("finalize") if ctx.rt.key() == NAMESPACE_KEY => {}
        Some("token") if ctx.rt.has_token() => {}
        Some(other) => {
            return Err(ApiError::not_found(
                &ctx.rt.group,
                &format!("{}/{other}", ctx.rt.plural),
                ctx.name(),
            ));
        }
    }
    // An Accept naming only protobuf, for a kind without it, is refused
    // before anything is read or written.
    let rt = &ctx.rt;
    media::answer(
        &ctx.call.accept,
        proto::supports(&rt.group, &rt.version, &rt.kind),
    )?;
    let watching = ctx.target.watch_path || ctx.call.flag("watch");
    let has_name = ctx.target.name.is_some();
    match (ctx.call.method.clone(), has_name, sub.as_deref()) {
        (Method::POST, true, Some("token")) => ctx.create_token(),
        (method, _, Some("token")) => Err(ApiError::method_not_allowed(method.as_str())),
        (Method::GET, _, None) if watching => watch::serve(ctx),
        (Method::GET, false, None) => ctx.list(),
        // `/finalize` only replaces a namespace's spec.finalizers.
        (method, true, Some("finalize")) if method != Method::PUT => {
            Err(ApiError::method_not_allowed(method.as_str()))
        }
        (Method::GET, true, Some("scale")) => ctx.get_scale(),
        (Method::GET, true, _) => ctx.get(),
        (Method::POST, false, None) => ctx.create(),
        (Method::PUT, true, Some("scale")) => ctx.put_scale(),
        (Method::PUT, true, sub) => ctx.update(sub),
        (Method::PATCH, true, sub) => ctx.patch(sub),
        (Method::DELETE, true, None) => ctx.delete(),
        (Method::DELETE, false, None) => ctx.delete_collection(),
        (method, _, _) => Err(ApiError::method_not_allowed(method.as_str())),
    }
}

impl Ctx<'_> {
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
        Ok(self.list_response(&items, &meta))
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
