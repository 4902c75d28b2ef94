//! The `scale` subresource (autoscaling/v1 `Scale`).

use http::{Response, StatusCode};
use serde_json::{Value, json};

use crate::ctx::{Body, Ctx};
use crate::error::{ApiError, ApiResult};
use crate::field_validation::{self, Directive, Shown, Subject, add_warnings};
use crate::patch;
use crate::table::lookup;
use crate::write::Via;

impl Ctx<'_> {
    /// The autoscaling/v1 Scale of `object`: for a built-in kind from
    /// `spec.replicas`, `status.replicas` and `spec.selector`
    /// (kube-apiserver's `scaleFromDeployment`), for a custom resource from
    /// its CRD's scale paths (`scaleFromCustomResource`). Absent replicas
    /// are 0; an empty selector is left out, as Go's `omitempty` does.
    fn scale_of(&self, object: &Value) -> Value {
        let at = |path: &str| lookup(object, path).cloned();
        let (replicas, status_replicas, selector) = match &self.rt.scale_paths {
            Some(paths) => (
                at(&paths.spec_replicas),
                at(&paths.status_replicas),
                paths
                    .label_selector
                    .as_deref()
                    .and_then(|path| lookup(object, path))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ),
            None => (
                at(".spec.replicas"),
                at(".status.replicas"),
                match_labels_selector(object),
            ),
        };
        let meta = object.get("metadata").cloned().unwrap_or(json!({}));
        let pick = |f: &str| meta.get(f).cloned().unwrap_or(Value::Null);
        let mut status = json!({"replicas": status_replicas.unwrap_or(json!(0))});
        if !selector.is_empty() {
            status["selector"] = json!(selector);
        }
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": pick("name"), "namespace": pick("namespace"), "uid": pick("uid"),
                "resourceVersion": pick("resourceVersion"), "creationTimestamp": pick("creationTimestamp"),
            },
            "spec": {"replicas": replicas.unwrap_or(json!(0))},
            "status": status,
        })
    }

    pub(crate) fn get_scale(&self) -> ApiResult<Response<Body>> {
        let object = self
            .cluster
            .lock()
            .get(&self.rt.key(), self.namespace(), self.name())
            .cloned()
            .ok_or_else(|| self.not_found())?;
        Ok(self.value_response(StatusCode::OK, &self.scale_of(&object)))
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
                _ => return Err(ApiError::unsupported_media_type(crate::write::PATCH_TYPES)),
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
            // No replicas is zero replicas, as in Go's struct (and as a
            // protobuf Scale of zero says it: the field is left out).
            let replicas = match scale.pointer("/spec/replicas") {
                None | Some(Value::Null) => 0,
                Some(n) => n.as_i64().ok_or_else(|| {
                    ApiError::bad_request("spec.replicas of a Scale must be an integer")
                })?,
            };
            let mut new = old.clone();
            if let Some(rv) = scale
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                && let Some(meta) = crate::object::meta_mut(&mut new)
            {
                meta.insert("resourceVersion".into(), json!(rv));
            }
            let path = self
                .rt
                .scale_paths
                .as_ref()
                .map_or(".spec.replicas", |p| p.spec_replicas.as_str());
            set_path(&mut new, path, json!(replicas))?;
            Ok(new)
        })?;
        Ok(self.value_response(StatusCode::OK, &self.scale_of(&object)))
    }
}

/// `spec.selector.matchLabels` as a label selector string.
fn match_labels_selector(object: &Value) -> String {
    object
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// Set the field at a simple dotted path (`.spec.replicas`), creating the
/// objects on the way; a path through a non-object is a 422 naming it.
fn set_path(object: &mut Value, path: &str, value: Value) -> ApiResult<()> {
    let parts: Vec<&str> = path.split('.').filter(|p| !p.is_empty()).collect();
    let Some((last, parents)) = parts.split_last() else {
        return Err(ApiError::bad_request(
            "the scale subresource has no replicas path",
        ));
    };
    let mut node = object;
    for part in parents {
        let map = node.as_object_mut().ok_or_else(|| {
            ApiError::bad_request(format!(
                "{path} of the object is not reachable: {part} is not an object"
            ))
        })?;
        node = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
    let map = node
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request(format!("{path} of the object is not reachable")))?;
    map.insert(last.to_string(), value);
    Ok(())
}
