//! What kube-apiserver and kubectl answer, written out from their sources
//! (each function names the file it follows), for the rows to compare with
//! field by field. Pure; no I/O.

use serde_json::{Value, json};

use crate::kinds::Kind;

/// `metav1.StatusDetails` as JSON: every field is `omitempty`
/// (k8s.io/apimachinery/pkg/apis/meta/v1/types.go, `StatusDetails`).
fn details(kind: &Kind, name: &str) -> Value {
    let mut details = json!({"kind": kind.resource});
    if !name.is_empty() {
        details["name"] = json!(name);
    }
    if !kind.group.is_empty() {
        details["group"] = json!(kind.group);
    }
    details
}

fn failure(code: u16, reason: &str, message: String, details: Option<Value>) -> Value {
    let mut status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code});
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}

/// 403 for a resource request: `forbiddenMessage` and `ForbiddenStatusError`
/// (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go) wrapped
/// by `NewForbidden` (k8s.io/apimachinery/pkg/api/errors/errors.go):
/// `<resource>[ "<name>"] is forbidden: User "<u>" cannot <verb> resource
/// "<resource>[/<sub>]" in API group "<g>" in the namespace "<ns>"`, details
/// naming the resource (not the kind) and the name.
pub fn forbidden(user: &str, verb: &str, kind: &Kind, subresource: &str, name: &str) -> Value {
    let what = if name.is_empty() {
        kind.qualified()
    } else {
        format!("{} \"{name}\"", kind.qualified())
    };
    let resource = if subresource.is_empty() {
        kind.resource.to_owned()
    } else {
        format!("{}/{subresource}", kind.resource)
    };
    let message = format!(
        "{what} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{}\" in the namespace \"{}\"",
        kind.group,
        crate::harness::NS
    );
    failure(403, "Forbidden", message, Some(details(kind, name)))
}

/// 404: `NewNotFound` (k8s.io/apimachinery/pkg/api/errors/errors.go).
pub fn not_found(kind: &Kind, name: &str) -> Value {
    let message = format!("{} \"{name}\" not found", kind.qualified());
    failure(404, "NotFound", message, Some(details(kind, name)))
}

/// 409 on create: `NewAlreadyExists` (k8s.io/apimachinery/pkg/api/errors/errors.go).
pub fn already_exists(kind: &Kind, name: &str) -> Value {
    let message = format!("{} \"{name}\" already exists", kind.qualified());
    failure(409, "AlreadyExists", message, Some(details(kind, name)))
}

/// 409 on a stale resourceVersion: `NewConflict` with the generic store's
/// `OptimisticLockErrorMsg` (k8s.io/apiserver/pkg/registry/generic/registry/store.go).
pub fn conflict(kind: &Kind, name: &str) -> Value {
    let message = format!(
        "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
        kind.qualified()
    );
    failure(409, "Conflict", message, Some(details(kind, name)))
}

/// 422: `NewInvalid` with one `field.Error` (k8s.io/apimachinery/pkg/api/errors/errors.go;
/// the cause's message is `ErrorBody()`, k8s.io/apimachinery/pkg/util/validation/field/errors.go).
pub fn invalid(kind: &Kind, name: &str, cause_type: &str, field: &str, body: &str) -> Value {
    let message = format!(
        "{} \"{name}\" is invalid: {field}: {body}",
        kind.qualified_kind()
    );
    let mut details = json!({"name": name, "kind": kind.kind,
        "causes": [{"reason": cause_type, "message": body, "field": field}]});
    if !kind.group.is_empty() {
        details["group"] = json!(kind.group);
    }
    failure(422, "Invalid", message, Some(details))
}

/// 415: `NewUnsupportedMediaTypeError` (k8s.io/apimachinery/pkg/runtime/error.go)
/// as the handlers turn it into a Status (k8s.io/apiserver/pkg/endpoints/handlers/rest.go).
pub fn unsupported_media_type(accepted: &[&str]) -> Value {
    let message = format!(
        "the body of the request was in an unknown format - accepted media types include: {}",
        accepted.join(", ")
    );
    failure(415, "UnsupportedMediaType", message, None)
}

/// 401: the authentication filter answers `NewUnauthorized("Unauthorized")`
/// (k8s.io/apiserver/pkg/endpoints/filters/authentication.go, `Unauthorized`).
pub fn unauthorized() -> Value {
    failure(401, "Unauthorized", "Unauthorized".to_owned(), None)
}

/// The Status of an immediate delete by the generic store, whose
/// `finalizeDelete` answers Success with the name, resource and uid unless
/// the storage sets `ReturnDeletedObject` (k8s.io/apiserver/pkg/registry/generic/registry/store.go).
pub fn deleted(kind: &Kind, name: &str, uid: &str) -> Value {
    let mut details = details(kind, name);
    details["uid"] = json!(uid);
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// The line kubectl prints for an API error: `StandardErrorMessage`
/// (k8s.io/kubectl/pkg/cmd/util/helpers.go) writes
/// `Error from server (<reason>): <message>`.
pub fn kubectl_error(status: &Value) -> String {
    format!(
        "Error from server ({}): {}",
        status["reason"].as_str().expect("a reason"),
        status["message"].as_str().expect("a message")
    )
}

/// The line for an API error on an object read from a file:
/// `AddSourceToErr` (k8s.io/kubectl/pkg/cmd/util/helpers.go) puts
/// `error when <verb> "<file>": ` before the message.
pub fn kubectl_error_from_file(status: &Value, verb: &str, file: &str) -> String {
    format!(
        "Error from server ({}): error when {verb} \"{file}\": {}",
        status["reason"].as_str().expect("a reason"),
        status["message"].as_str().expect("a message")
    )
}

/// kubectl's last line for a 401: its discovery fails first, and client-go
/// words a 401 there as `NewGenericServerResponse` does ("the server has
/// asked for the client to provide credentials",
/// k8s.io/apimachinery/pkg/api/errors/errors.go), which kubectl wraps in
/// `You must be logged in to the server (%s)` (k8s.io/kubectl/pkg/cmd/util/helpers.go,
/// `StandardErrorMessage`, the `IsUnauthorized` case).
pub const KUBECTL_UNAUTHORIZED: &str = "error: You must be logged in to the server (the server has asked for the client to provide credentials)";

/// 403 for a server-side apply that would create without `create`: the
/// patch handler authorizes the create itself and words the refusal as
/// `NewForbidden` with RBAC's empty reason
/// (k8s.io/apiserver/pkg/endpoints/handlers/patch.go).
pub fn forbidden_apply_create(kind: &Kind, name: &str) -> Value {
    let message = format!("{} \"{name}\" is forbidden: ", kind.qualified());
    failure(403, "Forbidden", message, Some(details(kind, name)))
}
