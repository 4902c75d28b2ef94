//! Writes: create, update, patch and server-side apply, with the rules a
//! real API server applies (namespace admission, defaults, schema,
//! optimistic concurrency, `generation`, status-subresource separation,
//! finalizers).

use http::{Response, StatusCode};
use serde_json::{Map, Value, json};

use crate::apply::{Apply, Scope};
use crate::ctx::{Body, Ctx};
use crate::error::{ApiError, ApiResult, Cause};
use crate::field_validation::{self, Shown, Subject, add_warnings};
use crate::media::{self, BodyType};
use crate::object::{
    DNS_SUBDOMAIN_PROBLEM, is_dns_subdomain, meta_mut, meta_str, now, path_segment_problem,
};
use crate::registry::ResourceType;
use crate::store::{CRD_KEY, EventType, NAMESPACE_KEY, RBAC_PREFIX, State};
use crate::{defaults, delete, meta_rules, namespaces, patch, proto, schema};

/// The patch types, in the order kube-apiserver lists them.
pub(crate) const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// The patch types of a custom resource: no strategic merge, which needs
/// Go struct tags a CRD does not have (kube-apiserver's
/// apiextensions-apiserver customresource_handler.go).
pub(crate) const CUSTOM_PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// How a write reached the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    Update,
    Apply,
}

impl Ctx<'_> {
    /// The request body of a create, update, scale or delete, as JSON: read
    /// from JSON, YAML or (for built-in kinds) protobuf by its Content-Type.
    pub(crate) fn body(&self) -> ApiResult<Value> {
        let (api_version, kind) = match (&self.call.method, self.target.subresource.as_deref()) {
            (&http::Method::DELETE, _) => (self.rt.api_version(), "DeleteOptions".to_string()),
            (_, Some("scale")) => ("autoscaling/v1".to_string(), "Scale".to_string()),
            (_, Some("token")) => (
                "authentication.k8s.io/v1".to_string(),
                "TokenRequest".to_string(),
            ),
            _ => (self.rt.api_version(), self.rt.kind.clone()),
        };
        let protobuf = proto::supports(&self.rt.group, &self.rt.version, &self.rt.kind);
        match media::body_type(&self.call.content_type, protobuf)? {
            BodyType::Json => self.json_body(),
            BodyType::Protobuf => proto::decode_body(&self.call.body, &api_version, &kind)
                .map_err(|e| ApiError::bad_request(e.message())),
        }
    }

    /// The request body as JSON (or YAML, which server-side apply allows).
    fn json_body(&self) -> ApiResult<Value> {
        let body = &self.call.body;
        let parsed = serde_json::from_slice::<Value>(body).or_else(|json_error| {
            let yaml = self.call.content_type.contains("yaml");
            match std::str::from_utf8(body) {
                Ok(text) if yaml => {
                    // Repeated keys: the last wins, as in JSON; field
                    // validation decides whether that is refused.
                    let mut options = serde_saphyr::Options::default();
                    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
                    serde_saphyr::from_str_with_options::<Value>(text, options)
                        .map_err(|e| e.to_string())
                }
                _ => Err(json_error.to_string()),
            }
        });
        let value = parsed
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid: {e}")))?;
        if !(value.is_object() || value.is_array()) {
            return Err(ApiError::bad_request("the request body must be an object"));
        }
        Ok(value)
    }

    pub(crate) fn create(&self) -> ApiResult<Response<Body>> {
        let directive = field_validation::directive(&self.call, "CreateOptions")?;
        let mut object = self.body()?;
        if !object.is_object() {
            return Err(ApiError::bad_request("the request body must be an object"));
        }
        let warnings = self.judge_object(directive, Subject::Resource(&self.rt), &object)?;
        self.check_identity(&mut object, true)?;
        let dry_run = self.call.param("dryRun").is_some();
        let event = self
            .cluster
            .write(|state| self.insert(state, object, dry_run))?;
        let mut response = self.object_response(StatusCode::CREATED, &event.0, event.1.as_ref());
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    /// Set apiVersion, kind and namespace from the request; refuse an object
    /// whose name or namespace disagrees with the URL.
    fn check_identity(&self, object: &mut Value, creating: bool) -> ApiResult<()> {
        let rt = &self.rt;
        let path_namespace = self.namespace().to_string();
        let path_name = self.name().to_string();
        let Some(map) = object.as_object_mut() else {
            return Err(ApiError::bad_request("the request body must be an object"));
        };
        map.insert("apiVersion".into(), json!(rt.api_version()));
        map.insert("kind".into(), json!(rt.kind));
        let Some(meta) = meta_mut(object) else {
            return Ok(());
        };
        let body_namespace = meta
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if rt.namespaced {
            if !body_namespace.is_empty() && body_namespace != path_namespace {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta.insert("namespace".into(), json!(path_namespace));
        } else {
            meta.remove("namespace");
        }
        let body_name = meta
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !creating {
            if !body_name.is_empty() && body_name != path_name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({path_name})"
                )));
            }
            meta.insert("name".into(), json!(path_name));
        } else if body_name.is_empty()
            && meta
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
        {
            return Err(self.invalid_name(
                "",
                "FieldValueRequired",
                "Required value: name or generateName is required",
            ));
        }
        Ok(())
    }

    fn invalid_name(&self, name: &str, reason: &'static str, message: &str) -> ApiError {
        let cause = Cause {
            reason,
            field: "metadata.name".into(),
            message: message.into(),
        };
        ApiError::invalid(&self.rt.group, &self.rt.kind, name, &[cause])
    }

    /// Create `object` in the state; returns it and its serialized form.
    fn insert(
        &self,
        state: &mut State,
        mut object: Value,
        dry_run: bool,
    ) -> ApiResult<(Value, Option<bytes::Bytes>)> {
        let rt = &self.rt;
        let namespace = self.namespace().to_string();
        // Admission comes before the name is generated: a refusal names the
        // object by its generateName, as kube-apiserver's does.
        let mut name = meta_str(&object, "name").to_string();
        let generate_name = meta_str(&object, "generateName").to_string();
        let named = if name.is_empty() {
            &generate_name
        } else {
            &name
        };
        namespaces::admit_create(state, rt, &namespace, named)?;
        if name.is_empty() {
            name = format!("{generate_name}{}", self.cluster.ids.suffix());
            if let Some(meta) = meta_mut(&mut object) {
                meta.insert("name".into(), json!(name));
            }
        }
        if rt.key().starts_with(RBAC_PREFIX) {
            // RBAC names are path segments: `system:discovery` is one.
            if let Some(problem) = path_segment_problem(&name) {
                return Err(self.invalid_name(
                    &name,
                    "FieldValueInvalid",
                    &format!("Invalid value: {name:?}: {problem}"),
                ));
            }
        } else if !is_dns_subdomain(&name) {
            // ValidateObjectMeta's `field.Invalid` with NameIsDNSSubdomain's
            // detail (k8s.io/apimachinery/pkg/util/validation/validation.go).
            let message = format!("Invalid value: \"{name}\": {DNS_SUBDOMAIN_PROBLEM}");
            return Err(self.invalid_name(&name, "FieldValueInvalid", &message));
        }
        if state.get(&rt.key(), &namespace, &name).is_some() {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
        }
        if let Some(meta) = meta_mut(&mut object) {
            for field in [
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ] {
                meta.remove(field);
            }
            meta.insert("uid".into(), json!(self.cluster.ids.uid()));
            meta.insert("creationTimestamp".into(), json!(now()));
            meta.insert("generation".into(), json!(1));
        }
        if rt.has_status
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        if rt.key() == NAMESPACE_KEY {
            namespaces::prepare_for_create(&mut object);
        }
        defaults::apply(rt, &mut object, state)?;
        meta_rules::check(rt, is_builtin(state, rt), None, &object)?;
        self.check_schema(&mut object, None)?;
        crate::auth::admit(self, state, None, &mut object)?;
        if dry_run {
            return Ok((object, None));
        }
        let event = state.put(&rt.key(), object);
        if rt.key() == CRD_KEY {
            state.registry.register_crd(&event.object);
        }
        Ok(((*event.object).clone(), Some(event.json.clone())))
    }

    /// Prune and validate `object` against the version's schema, then run
    /// its validation rules (`old` is the stored object on update). As
    /// kube-apiserver: a type, required, enum or size violation leaves the
    /// rules unchecked, with a cause that says so; lesser schema causes and
    /// rule causes are reported together.
    pub(crate) fn check_schema(&self, object: &mut Value, old: Option<&Value>) -> ApiResult<()> {
        let Some(schema) = &self.rt.schema else {
            return Ok(());
        };
        // Unknown fields go; field validation has already judged them.
        schema::prune(object, schema);
        let mut causes = schema::validate(object, schema);
        if !self.rt.rules.is_empty() {
            let blocking = causes.iter().any(|c| {
                matches!(
                    c.reason,
                    "FieldValueNotSupported"
                        | "FieldValueRequired"
                        | "FieldValueTooLong"
                        | "FieldValueTooMany"
                        | "FieldValueTypeInvalid"
                )
            });
            if blocking {
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    field: "<nil>".into(),
                    message: "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
                });
            } else {
                causes.extend(self.rt.rules.validate(object, old));
            }
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                &self.rt.group,
                &self.rt.kind,
                meta_str(object, "name"),
                &causes,
            ))
        }
    }

    pub(crate) fn update(&self, sub: Option<&str>) -> ApiResult<Response<Body>> {
        let directive = field_validation::directive(&self.call, "UpdateOptions")?;
        let mut object = self.body()?;
        let warnings = self.judge_object(directive, Subject::Resource(&self.rt), &object)?;
        self.check_identity(&mut object, false)?;
        let result = self.modify(sub, Via::Update, |_| Ok(object))?;
        let mut response = self.object_response(StatusCode::OK, &result, None);
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    pub(crate) fn patch(&self, sub: Option<&str>) -> ApiResult<Response<Body>> {
        let content_type = self
            .call
            .content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        let rt = &self.rt;
        let accepted = if proto::supports(&rt.group, &rt.version, &rt.kind) {
            PATCH_TYPES
        } else {
            CUSTOM_PATCH_TYPES
        };
        if !accepted.contains(&content_type.as_str()) {
            return Err(ApiError::unsupported_media_type(accepted));
        }
        let directive = field_validation::directive(&self.call, "PatchOptions")?;
        let body = self.json_body()?;
        let json_patch = content_type == "application/json-patch+json";
        if sub == Some("scale") {
            return self.patch_scale(directive, &content_type, &body);
        }
        let subject = Subject::Resource(&self.rt);
        let mut warnings = Vec::new();
        let mut created = false;
        let result = match content_type.as_str() {
            "application/json-patch+json"
            | "application/merge-patch+json"
            | "application/strategic-merge-patch+json" => {
                let patch_errors = self.patch_errors(directive, json_patch, &body);
                let shown = if content_type.contains("strategic") {
                    Shown::Patch(&body)
                } else {
                    Shown::Patched
                };
                self.modify(sub, Via::Update, |old| {
                    let new = if json_patch {
                        patch::json_patch(old, &body)?
                    } else {
                        let mut new = old.clone();
                        patch::merge(&mut new, &body);
                        new
                    };
                    warnings = self.judge_patch(directive, subject, &patch_errors, &new, shown)?;
                    Ok(new)
                })?
            }
            "application/apply-patch+yaml" => {
                warnings = self.judge_apply(directive, &body)?;
                let (object, was_created) = self.apply(sub, body)?;
                created = was_created;
                object
            }
            _ => return Err(ApiError::unsupported_media_type(PATCH_TYPES)),
        };
        // An apply that created the object is 201, as kube-apiserver's
        // patch handler answers (k8s.io/apiserver/pkg/endpoints/handlers/patch.go).
        let code = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        let mut response = self.object_response(code, &result, None);
        add_warnings(&mut response, &warnings);
        Ok(response)
    }

    /// Server-side apply; the result and whether it created the object.
    fn apply(&self, sub: Option<&str>, mut applied: Value) -> ApiResult<(Value, bool)> {
        let manager = self
            .call
            .param("fieldManager")
            .ok_or_else(|| {
                ApiError::bad_request("PATCH, application/apply-patch+yaml requires fieldManager")
            })?
            .to_string();
        self.check_identity(&mut applied, false)?;
        let apply = Apply {
            manager: &manager,
            force: self.call.flag("force"),
            scope: if sub == Some("status") {
                Scope::Status
            } else {
                Scope::Main {
                    status_separate: self.rt.has_status,
                }
            },
            api_version: &self.rt.api_version(),
        };
        let conflict = |conflicts: Vec<(String, String)>| {
            ApiError::apply_conflict(&self.rt.group, &self.rt.plural, self.name(), &conflicts)
        };
        let exists = self
            .cluster
            .lock()
            .get(&self.rt.key(), self.namespace(), self.name())
            .is_some();
        if !exists && sub.is_none() {
            let mut base = json!({"apiVersion": self.rt.api_version(), "kind": self.rt.kind, "metadata": applied["metadata"].clone()});
            if let Some(meta) = meta_mut(&mut base) {
                meta.remove("managedFields");
            }
            let created = apply.run(&base, &applied).map_err(conflict)?;
            let result = self
                .cluster
                .write(|state| self.insert(state, created, self.call.param("dryRun").is_some()));
            match result {
                Ok((object, _)) => return Ok((object, true)),
                // Created meanwhile by someone else: apply to it below.
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        let rv = applied.pointer("/metadata/resourceVersion").cloned();
        let object = self.modify(sub, Via::Apply, |old| {
            let mut merged = apply.run(old, &applied).map_err(conflict)?;
            if let (Some(rv), Some(meta)) = (rv, meta_mut(&mut merged)) {
                meta.insert("resourceVersion".into(), rv);
            }
            Ok(merged)
        })?;
        Ok((object, false))
    }

    /// Read-modify-write one object under the lock: `op` computes the
    /// candidate from the current object, then the API server's rules
    /// decide what is stored. A write that changes nothing commits nothing.
    pub(crate) fn modify(
        &self,
        sub: Option<&str>,
        via: Via,
        op: impl FnOnce(&Value) -> ApiResult<Value>,
    ) -> ApiResult<Value> {
        let rt = &self.rt;
        let key = rt.key();
        let dry_run = self.call.param("dryRun").is_some();
        self.cluster.write(|state| {
            let old = state
                .get(&key, self.namespace(), self.name())
                .cloned()
                .ok_or_else(|| self.not_found())?;
            let candidate = op(&old)?;
            let mut new = settle(rt, sub, via, &old, candidate)?;
            if key == NAMESPACE_KEY {
                namespaces::prepare_for_update(rt, sub, &old, &mut new)?;
            }
            if sub != Some("status") {
                defaults::apply(rt, &mut new, state)?;
            }
            meta_rules::check(rt, is_builtin(state, rt), Some(&old), &new)?;
            self.check_schema(&mut new, Some(&old))?;
            crate::auth::admit(self, state, Some(&old), &mut new)?;
            if same_object(&old, &new) || dry_run {
                return Ok(if dry_run { new } else { (*old).clone() });
            }
            // An update that takes away the last finalizer of an object
            // being deleted removes it, and answers with its last state.
            let event = delete::store(state, &key, new).ok_or_else(|| self.not_found())?;
            if key == CRD_KEY && event.type_ != EventType::Deleted {
                state.registry.register_crd(&event.object);
            }
            Ok((*event.object).clone())
        })
    }
}

/// Built-in kinds hold their finalizers to stricter names than custom
/// resources do.
fn is_builtin(state: &State, rt: &ResourceType) -> bool {
    let crd_name = format!("{}.{}", rt.plural, rt.group);
    state.get(CRD_KEY, "", &crd_name).is_none()
}

/// Combine the stored object and a candidate as the API server does.
fn settle(
    rt: &ResourceType,
    sub: Option<&str>,
    via: Via,
    old: &Value,
    candidate: Value,
) -> ApiResult<Value> {
    let old_rv = meta_str(old, "resourceVersion");
    let new_rv = meta_str(&candidate, "resourceVersion");
    if !new_rv.is_empty() && new_rv != old_rv {
        return Err(ApiError::stale(
            &rt.group,
            &rt.plural,
            meta_str(old, "name"),
        ));
    }
    let managed = |from: &Value| from.pointer("/metadata/managedFields").cloned();
    let managed_fields = if via == Via::Apply {
        managed(&candidate)
    } else {
        managed(old)
    };
    let mut new = if sub == Some("status") {
        let mut new = old.clone();
        if let Some(map) = new.as_object_mut() {
            match candidate.get("status") {
                Some(status) => map.insert("status".into(), status.clone()),
                None => map.remove("status"),
            };
        }
        new
    } else {
        let mut new = candidate;
        let old_meta = old
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(meta) = meta_mut(&mut new) {
            for field in [
                "uid",
                "creationTimestamp",
                "name",
                "namespace",
                "generation",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "resourceVersion",
            ] {
                match old_meta.get(field) {
                    Some(v) => meta.insert(field.into(), v.clone()),
                    None => meta.remove(field),
                };
            }
        }
        if let Some(map) = new.as_object_mut() {
            map.insert(
                "apiVersion".into(),
                old.get("apiVersion")
                    .cloned()
                    .unwrap_or(json!(rt.api_version())),
            );
            map.insert("kind".into(), json!(rt.kind));
            if rt.has_status {
                match old.get("status") {
                    Some(status) => map.insert("status".into(), status.clone()),
                    None => map.remove("status"),
                };
            }
        }
        if changed_generation(rt, old, &new) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if let Some(meta) = meta_mut(&mut new) {
                meta.insert("generation".into(), json!(generation + 1));
            }
        }
        new
    };
    if let Some(meta) = meta_mut(&mut new) {
        match managed_fields {
            Some(fields) => meta.insert("managedFields".into(), fields),
            None => meta.remove("managedFields"),
        };
    }
    Ok(new)
}

/// `generation` follows `spec` when status is a subresource, and every
/// non-metadata field otherwise.
fn changed_generation(rt: &ResourceType, old: &Value, new: &Value) -> bool {
    if rt.has_status {
        return old.get("spec") != new.get("spec");
    }
    let body = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "apiVersion" | "kind"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    body(old) != body(new)
}

/// Equal apart from the resource version and managed-field timestamps.
fn same_object(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = meta_mut(&mut v) {
            meta.remove("resourceVersion");
            if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
                for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                    entry.remove("time");
                }
            }
        }
        v
    };
    strip(old) == strip(new)
}
