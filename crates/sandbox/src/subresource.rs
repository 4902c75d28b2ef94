//! Deletion (with preconditions, finalizers, cascading) and the `scale`
//! subresource (autoscaling/v1 `Scale`).

use http::{Response, StatusCode};
use serde_json::{Value, json};

use crate::ctx::{Body, Ctx, bytes_response, json};
use crate::error::{ApiError, ApiResult};
use crate::field_validation::{self, Directive, Shown, Subject, add_warnings};
use crate::object::meta_str;
use crate::patch;
use crate::table::ListMeta;
use crate::write::Via;

impl Ctx<'_> {
    fn delete_options(&self) -> ApiResult<Value> {
        if self.call.body.is_empty() {
            return Ok(json!({}));
        }
        self.body()
    }

    /// Whether dependents go with the object (`Orphan` keeps them).
    fn cascades(&self, options: &Value) -> bool {
        let policy = options
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .or_else(|| self.call.param("propagationPolicy"));
        let orphan = options.get("orphanDependents").and_then(Value::as_bool) == Some(true);
        policy != Some("Orphan") && !orphan
    }

    pub(crate) fn delete(&self) -> ApiResult<Response<Body>> {
        let options = self.delete_options()?;
        let cascade = self.cascades(&options);
        let key = self.rt.key();
        let result = self.cluster.write(|state| {
            let current = state
                .get(&key, self.namespace(), self.name())
                .ok_or_else(|| self.not_found())?;
            for (field, have) in [
                ("uid", meta_str(current, "uid")),
                ("resourceVersion", meta_str(current, "resourceVersion")),
            ] {
                if let Some(want) = options
                    .pointer(&format!("/preconditions/{field}"))
                    .and_then(Value::as_str)
                    && want != have
                {
                    let why =
                        format!("Precondition failed: {field}: {want}, current {field}: {have}");
                    return Err(ApiError::conflict(
                        &self.rt.group,
                        &self.rt.plural,
                        self.name(),
                        &why,
                    ));
                }
            }
            state
                .delete(&key, self.namespace(), self.name(), cascade)
                .ok_or_else(|| self.not_found())
        })?;
        Ok(self.object_response(StatusCode::OK, &result, None))
    }

    pub(crate) fn delete_collection(&self) -> ApiResult<Response<Body>> {
        let options = self.delete_options()?;
        let cascade = self.cascades(&options);
        let selector = self.selector()?;
        let key = self.rt.key();
        let namespace = self
            .target
            .namespace
            .as_deref()
            .filter(|_| self.rt.namespaced);
        let (deleted, rv) = self.cluster.write(|state| {
            let names: Vec<(String, String)> = state
                .range(&key, namespace, None)
                .filter(|(_, o)| selector.matches(o))
                .map(|(k, _)| k.clone())
                .collect();
            let deleted: Vec<std::sync::Arc<Value>> = names
                .iter()
                .filter_map(|(ns, name)| state.delete(&key, ns, name, cascade))
                .map(std::sync::Arc::new)
                .collect();
            (deleted, state.resource_version())
        });
        let meta = ListMeta {
            resource_version: rv.to_string(),
            continue_token: None,
        };
        Ok(bytes_response(
            StatusCode::OK,
            self.list_bytes(&deleted, &meta),
        ))
    }

    fn scale_of(&self, object: &Value) -> Value {
        let replicas = object
            .pointer("/spec/replicas")
            .cloned()
            .unwrap_or(json!(0));
        let status_replicas = object
            .pointer("/status/replicas")
            .cloned()
            .unwrap_or(json!(0));
        let selector = object
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let meta = object.get("metadata").cloned().unwrap_or(json!({}));
        let pick = |f: &str| meta.get(f).cloned().unwrap_or(Value::Null);
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": pick("name"), "namespace": pick("namespace"), "uid": pick("uid"),
                "resourceVersion": pick("resourceVersion"), "creationTimestamp": pick("creationTimestamp"),
            },
            "spec": {"replicas": replicas},
            "status": {"replicas": status_replicas, "selector": selector},
        })
    }

    pub(crate) fn get_scale(&self) -> ApiResult<Response<Body>> {
        let object = self
            .cluster
            .lock()
            .get(&self.rt.key(), self.namespace(), self.name())
            .cloned()
            .ok_or_else(|| self.not_found())?;
        Ok(json(StatusCode::OK, &self.scale_of(&object)))
    }

    pub(crate) fn put_scale(&self) -> ApiResult<Response<Body>> {
        let directive = field_validation::directive(&self.call, "UpdateOptions")?;
        let scale = self.body()?;
        let warnings = self.judge_object(directive, Subject::Scale, &scale)?;
        let mut response = self.write_scale(|_| Ok(scale))?;
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    pub(crate) fn patch_scale(
        &self,
        directive: Directive,
        content_type: &str,
        body: &Value,
    ) -> ApiResult<Response<Body>> {
        let json_patch = content_type == "application/json-patch+json";
        let patch_errors = self.patch_errors(directive, json_patch, body);
        let mut warnings = Vec::new();
        let mut response = self.write_scale(|current| {
            let scale = match content_type {
                "application/json-patch+json" => patch::json_patch(current, body)?,
                "application/merge-patch+json"
                | "application/strategic-merge-patch+json"
                | "application/apply-patch+yaml" => {
                    let mut scale = current.clone();
                    patch::merge(&mut scale, body);
                    scale
                }
                other => return Err(ApiError::unsupported_media_type(other)),
            };
            let shown = if content_type.contains("strategic") {
                Shown::Patch(body)
            } else {
                Shown::Patched
            };
            let subject = Subject::Scale;
            warnings = self.judge_patch(directive, subject, &patch_errors, &scale, shown)?;
            Ok(scale)
        })?;
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    /// Turn the desired Scale into `spec.replicas` of the object.
    fn write_scale(
        &self,
        desired: impl FnOnce(&Value) -> ApiResult<Value>,
    ) -> ApiResult<Response<Body>> {
        let object = self.modify(None, Via::Update, |old| {
            let scale = desired(&self.scale_of(old))?;
            let replicas = scale
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .ok_or_else(|| ApiError::bad_request("a Scale needs spec.replicas"))?;
            let mut new = old.clone();
            if let Some(rv) = scale
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                && let Some(meta) = crate::object::meta_mut(&mut new)
            {
                meta.insert("resourceVersion".into(), json!(rv));
            }
            match new.get_mut("spec").and_then(Value::as_object_mut) {
                Some(spec) => {
                    spec.insert("replicas".into(), json!(replicas));
                }
                None => new["spec"] = json!({"replicas": replicas}),
            }
            Ok(new)
        })?;
        Ok(json(StatusCode::OK, &self.scale_of(&object)))
    }
}
