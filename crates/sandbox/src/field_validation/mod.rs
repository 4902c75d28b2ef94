//! Server-side field validation: the `fieldValidation` query parameter of
//! create, update and patch (`Ignore`, `Warn` — the default — or
//! `Strict`). It finds the fields kube-apiserver's strict decoding finds —
//! unknown fields (judged by k8s-openapi's schema for a built-in kind, by
//! the structural schema for a custom resource, which respects
//! `x-kubernetes-preserve-unknown-fields`) and duplicate keys in a JSON
//! body — and turns them into upstream's answers: a `Warning` header each
//! under `Warn`, the refusal under `Strict`.
//!
//! Server-side apply is judged as upstream judges it: an applied field no
//! schema declares fails the apply whatever the directive; only duplicate
//! keys follow the directive.
//!
//! Pure: it never changes the object it judges (pruning unknown fields of a
//! custom resource stays `schema.rs`'s job at storage time).

mod answer;
mod find;

pub(crate) use answer::add_warnings;

use crate::ctx::Call;
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::ResourceType;

/// Upstream stops collecting strict decoding errors at this many.
const MAX_ERRORS: usize = 100;

/// What to do with unknown and duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Directive {
    Ignore,
    Warn,
    Strict,
}

/// The request's directive; `options` names the options kind an invalid
/// value is reported against (`CreateOptions`, `UpdateOptions`,
/// `PatchOptions`), as the API server does.
pub(crate) fn directive(call: &Call, options: &str) -> ApiResult<Directive> {
    match call.param("fieldValidation").unwrap_or("") {
        "" | "Warn" => Ok(Directive::Warn),
        "Ignore" => Ok(Directive::Ignore),
        "Strict" => Ok(Directive::Strict),
        other => {
            let quoted = serde_json::to_string(other).unwrap_or_default();
            let cause = Cause {
                reason: "FieldValueNotSupported",
                field: "fieldValidation".into(),
                message: format!(
                    "Unsupported value: {quoted}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
                ),
            };
            Err(ApiError::invalid("meta.k8s.io", options, "", &[cause]))
        }
    }
}

/// Which schema judges an object.
#[derive(Clone, Copy)]
pub(crate) enum Subject<'a> {
    /// A served resource: its CRD schema, or k8s-openapi's for a built-in.
    Resource(&'a ResourceType),
    /// The autoscaling/v1 `Scale` of a `scale` subresource.
    Scale,
}

/// How a patch shows itself in a refusal: the patched object (JSON and
/// merge patches) or the patch as Go prints a map (strategic merge).
pub(crate) enum Shown<'a> {
    Patched,
    Patch(&'a serde_json::Value),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_directive_is_refused_naming_the_options_kind() {
        let call = Call {
            method: http::Method::POST,
            query: [("fieldValidation".to_string(), "strict".to_string())].into(),
            accept: String::new(),
            content_type: String::new(),
            body: bytes::Bytes::new(),
        };
        let error = directive(&call, "CreateOptions").unwrap_err();
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": supported values: "", "Ignore", "Strict", "Warn""#
        );
    }
}
