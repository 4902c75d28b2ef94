//! Errors: [`Error`] for the Rust API of the sandbox, [`ApiError`] for the
//! answers the HTTP API gives (always a `Status` object, as a real API server
//! does, so `kube::Error::Api` carries it).

use serde_json::{Value, json};

/// What can fail when starting, stopping or serving a sandbox.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listening socket could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}")]
    Bind {
        /// The port asked for (0 = any).
        port: u16,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The CA or serving certificate could not be generated.
    #[error("cannot generate the sandbox certificates")]
    Certificate(#[from] rcgen::Error),
    /// The TLS configuration was refused by rustls.
    #[error("cannot build the TLS configuration")]
    Tls(#[from] rustls::Error),
    /// The client certificate verifier could not be built from the CA.
    #[error("cannot build the client certificate verifier")]
    ClientVerifier(#[source] rustls::server::VerifierBuilderError),
    /// The ServiceAccount token signing key could not be generated or used.
    #[error("cannot generate or use the ServiceAccount token signing key")]
    SigningKey,
    /// A client certificate could not be encoded for a user.
    #[error("cannot encode a client certificate for user {user:?}")]
    ClientCertificate {
        /// The user it was for.
        user: String,
    },
    /// A token was asked for a ServiceAccount the sandbox does not have, or
    /// the ServiceAccount could not be created.
    #[error("cannot issue a token for serviceaccount {namespace}/{name}: {reason}")]
    ServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why, in the API server's words.
        reason: String,
    },
    /// Kubeconfigs for other identities are written beside the admin's,
    /// so they need its path.
    #[error("kubeconfigs for users or ServiceAccounts need a kubeconfig path to write beside")]
    NoKubeconfigPath,
    /// The kubeconfig file could not be written.
    #[error("cannot write the kubeconfig to {path}")]
    WriteKubeconfig {
        /// Where it was to be written.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for a termination signal failed.
    #[error("cannot wait for a termination signal")]
    Signal(#[source] std::io::Error),
    /// The realistic kubelet's rules could not be read or are invalid.
    #[error("invalid kubelet rules: {message}")]
    KubeletRules {
        /// What is wrong and where (file, rule index, field).
        message: String,
    },
    /// The operation needs a running server but it is stopped (or the reverse).
    #[error("sandbox {name} is {state}")]
    State {
        /// The sandbox's name.
        name: String,
        /// `running` or `stopped`.
        state: &'static str,
    },
}

/// A `Result` with the sandbox's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One cause of an `Invalid` answer: a field path and what is wrong with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cause {
    pub(crate) reason: &'static str,
    pub(crate) field: String,
    pub(crate) message: String,
}

/// An error answer of the HTTP API, rendered as a `meta/v1 Status`.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    pub(crate) details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// `details` as `StatusDetails` has them: the core group ("") is left
    /// out, as Go's `omitempty` leaves it out.
    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut details = json!({"name": name, "kind": kind});
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        self.details = Some(details);
        self
    }

    /// Add one `details.causes` entry (`reason`, `message`, `field`).
    pub(crate) fn with_cause(mut self, cause: Value) -> Self {
        let details = self.details.get_or_insert_with(|| json!({}));
        if let Value::Object(details) = details {
            let causes = details.entry("causes").or_insert_with(|| json!([]));
            if let Value::Array(causes) = causes {
                causes.push(cause);
            }
        }
        self
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub(crate) fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let what = qualified(group, plural);
        Self::new(404, "NotFound", format!("{what} \"{name}\" not found"))
            .with_details(group, plural, name)
    }

    /// A path that names no resource at all.
    pub(crate) fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// A refusal, worded as kube-apiserver's `NewForbidden`: `plural.group
    /// "name" is forbidden: why`, without the parts that are empty (a
    /// non-resource path has neither resource nor name). Details name them,
    /// leaving out empty parts as upstream's `omitempty` does. Both RBAC's
    /// refusals and admission's (namespace lifecycle) are worded here.
    pub(crate) fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let message = match (resource.is_empty(), name.is_empty()) {
            (true, _) => format!("forbidden: {why}"),
            (false, true) => format!("{} is forbidden: {why}", qualified(group, resource)),
            (false, false) => format!(
                "{} {name:?} is forbidden: {why}",
                qualified(group, resource)
            ),
        };
        let mut details = serde_json::Map::new();
        for (key, value) in [("name", name), ("group", group), ("kind", resource)] {
            if !value.is_empty() {
                details.insert(key.into(), json!(value));
            }
        }
        let mut error = Self::new(403, "Forbidden", message);
        error.details = Some(Value::Object(details));
        error
    }

    pub(crate) fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let what = qualified(group, plural);
        Self::new(
            409,
            "AlreadyExists",
            format!("{what} \"{name}\" already exists"),
        )
        .with_details(group, plural, name)
    }

    pub(crate) fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let what = qualified(group, plural);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {what} \"{name}\": {why}"),
        )
        .with_details(group, plural, name)
    }

    pub(crate) fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// A server-side apply conflict: fields owned by other managers.
    pub(crate) fn apply_conflict(
        group: &str,
        plural: &str,
        name: &str,
        conflicts: &[(String, String)],
    ) -> Self {
        let list: Vec<String> = conflicts
            .iter()
            .map(|(manager, field)| format!("conflict with \"{manager}\": {field}"))
            .collect();
        let n = conflicts.len();
        let plural_s = if n == 1 { "" } else { "s" };
        let message = format!(
            "Apply failed with {n} conflict{plural_s}: {}",
            list.join("; ")
        );
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(manager, field)| {
                json!({"type": "FieldManagerConflict", "message": format!("conflict with \"{manager}\""), "field": field})
            })
            .collect();
        let mut error = Self::new(409, "Conflict", message).with_details(group, plural, name);
        if let Some(Value::Object(details)) = error.details.as_mut() {
            details.insert("causes".into(), Value::Array(causes));
        }
        error
    }

    pub(crate) fn invalid(group: &str, kind: &str, name: &str, causes: &[Cause]) -> Self {
        let what = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let texts: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let joined = if texts.len() == 1 {
            texts.join("")
        } else {
            format!("[{}]", texts.join(", "))
        };
        let message = format!("{what} \"{name}\" is invalid: {joined}");
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        let mut error = Self::new(422, "Invalid", message).with_details(group, kind, name);
        if let Some(Value::Object(details)) = error.details.as_mut() {
            details.insert("causes".into(), Value::Array(causes));
        }
        error
    }

    /// A patch that cannot be applied to the object.
    pub(crate) fn invalid_patch(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    pub(crate) fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// A body in a media type the resource does not take; `accepted` lists
    /// those it does, as kube-apiserver words it.
    pub(crate) fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// An Accept header naming nothing the resource can be written as.
    pub(crate) fn not_acceptable(accepted: &[&str]) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: {}",
                accepted.join(", ")
            ),
        )
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object for this error.
    pub(crate) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(details), Value::Object(map)) = (&self.details, &mut status) {
            map.insert("details".into(), details.clone());
        }
        status
    }
}

/// `plural.group` as the API server names a resource in messages.
fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// A `Result` of the HTTP API.
pub(crate) type ApiResult<T> = std::result::Result<T, ApiError>;
