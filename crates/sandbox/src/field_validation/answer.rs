//! Turning what field validation found into the API server's answers:
//! the refusal of each write verb in upstream's words, or the `Warning`
//! headers, written as upstream's warning recorder writes them. It never
//! changes the object or the cluster.

use std::collections::HashSet;

use http::{HeaderValue, Response};
use serde_json::Value;

use super::find::{duplicate_fields, unknown_fields};
use super::{Directive, Shown, Subject};
use crate::ctx::{Body, Ctx};
use crate::error::{ApiError, ApiResult, Cause};
use crate::schema::{FieldPath, Step, dotted};

impl Ctx<'_> {
    /// Judge the body of a create or update, parsed into `object`: the
    /// warnings to send, or the refusal (`400`, `… cannot be handled as a
    /// Kind: strict decoding error: …`).
    pub(crate) fn judge_object(
        &self,
        directive: Directive,
        subject: Subject<'_>,
        object: &Value,
    ) -> ApiResult<Vec<String>> {
        if directive == Directive::Ignore {
            return Ok(Vec::new());
        }
        let mut errors = self.body_duplicates();
        errors.extend(unknown_messages(&unknown_fields(subject, object)));
        let (kind, version) = match subject {
            Subject::Resource(rt) => (rt.kind.as_str(), rt.version.as_str()),
            Subject::Scale => ("Scale", "v1"),
        };
        decide(directive, errors, |errors| {
            let sent_kind = object
                .get("kind")
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty())
                .unwrap_or(kind);
            let sent_version = object
                .get("apiVersion")
                .and_then(Value::as_str)
                .map(|v| v.rsplit('/').next().unwrap_or(v))
                .filter(|v| !v.is_empty())
                .unwrap_or(version);
            ApiError::bad_request(format!(
                "{sent_kind} in version {} cannot be handled as a {kind}: {}",
                quote(sent_version),
                strict_error(errors)
            ))
        })
    }

    /// The strict errors a patch body carries itself: repeated keys, and
    /// for a JSON patch unknown fields of its operations.
    pub(crate) fn patch_errors(
        &self,
        directive: Directive,
        json_patch: bool,
        body: &Value,
    ) -> Vec<String> {
        if directive == Directive::Ignore {
            return Vec::new();
        }
        let mut errors = self.body_duplicates();
        if json_patch {
            for error in &mut errors {
                error.insert_str(0, "json patch ");
            }
            let operations = body.as_array().into_iter().flatten().enumerate();
            for (i, operation) in operations {
                let keys = operation.as_object().into_iter().flat_map(|m| m.keys());
                for key in keys.filter(|k| !matches!(k.as_str(), "op" | "path" | "from" | "value"))
                {
                    errors.push(format!(
                        "json patch unknown field {}",
                        quote(&format!("[{i}].{key}"))
                    ));
                }
            }
        }
        errors
    }

    /// Judge the object a patch produced: the warnings to send, or the
    /// refusal (`422`, `patch: Invalid value: …: strict decoding error: …`).
    pub(crate) fn judge_patch(
        &self,
        directive: Directive,
        subject: Subject<'_>,
        patch_errors: &[String],
        patched: &Value,
        shown: Shown<'_>,
    ) -> ApiResult<Vec<String>> {
        if directive == Directive::Ignore {
            return Ok(Vec::new());
        }
        let mut errors = patch_errors.to_vec();
        errors.extend(unknown_messages(&unknown_fields(subject, patched)));
        decide(directive, errors, |errors| {
            let value = match shown {
                Shown::Patched => serde_json::to_string(patched).unwrap_or_default(),
                Shown::Patch(patch) => go_value(patch),
            };
            let cause = Cause {
                reason: "FieldValueInvalid",
                field: "patch".into(),
                message: format!("Invalid value: {}: {}", quote(&value), strict_error(errors)),
            };
            ApiError::invalid("", "", "", &[cause])
        })
    }

    /// Judge a server-side apply: a field no schema declares fails it
    /// whatever the directive (upstream answers 500, as its typed merge
    /// fails); repeated keys follow the directive.
    pub(crate) fn judge_apply(
        &self,
        directive: Directive,
        applied: &Value,
    ) -> ApiResult<Vec<String>> {
        let unknown = unknown_fields(Subject::Resource(&self.rt), applied);
        if !unknown.is_empty() {
            let lines: Vec<String> = unknown
                .iter()
                .map(|p| format!("{}: field not declared in schema", apply_path(p)))
                .collect();
            let detail = match lines.as_slice() {
                [one] => one.clone(),
                many => format!("errors:\n  {}", many.join("\n  ")),
            };
            let namespace = applied
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(self.namespace());
            let name = applied
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or(self.name());
            let rt = &self.rt;
            return Err(ApiError {
                code: 500,
                reason: "",
                message: format!(
                    "failed to create typed patch object ({namespace}/{name}; {}/{}, Kind={}): {detail}",
                    rt.group, rt.version, rt.kind
                ),
                details: None,
            });
        }
        if directive == Directive::Ignore {
            return Ok(Vec::new());
        }
        match yaml_duplicate(&self.call.body) {
            Some(line) if directive == Directive::Strict => Err(ApiError::bad_request(format!(
                "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {line}"
            ))),
            Some(line) => Ok(vec![line]),
            None => Ok(Vec::new()),
        }
    }

    /// Repeated keys in the request body, by its media type.
    fn body_duplicates(&self) -> Vec<String> {
        let content_type = self.call.content_type.to_ascii_lowercase();
        if content_type.contains("yaml") {
            yaml_duplicate(&self.call.body).into_iter().collect()
        } else if content_type.contains("protobuf") {
            // Protobuf has no keys to repeat.
            Vec::new()
        } else {
            let found = duplicate_fields(&self.call.body).unwrap_or_default();
            duplicate_messages(&found).collect()
        }
    }
}

fn decide(
    directive: Directive,
    errors: Vec<String>,
    refuse: impl FnOnce(&[String]) -> ApiError,
) -> ApiResult<Vec<String>> {
    match directive {
        _ if errors.is_empty() => Ok(Vec::new()),
        Directive::Ignore => Ok(Vec::new()),
        Directive::Warn => Ok(errors),
        Directive::Strict => Err(refuse(&errors)),
    }
}

/// The first repeated key of a YAML document, in the words of upstream's
/// YAML decoder: `line 7: key "data" already set in map` (upstream's names
/// every one). A JSON body (what most clients apply) is scanned first, so
/// the YAML parser runs only when there is something to report.
fn yaml_duplicate(body: &[u8]) -> Option<String> {
    if duplicate_fields(body).is_some_and(|found| found.is_empty()) {
        return None;
    }
    let text = std::str::from_utf8(body).ok()?;
    let error = serde_saphyr::from_str::<Value>(text).err()?;
    let serde_saphyr::Error::DuplicateMappingKey {
        key: Some(key),
        location,
    } = error.without_snippet()
    else {
        return None;
    };
    Some(format!(
        "line {}: key {} already set in map",
        location.line(),
        quote(key)
    ))
}

/// Strict decoding errors, as upstream words them.
pub(crate) fn unknown_messages(paths: &[FieldPath]) -> impl Iterator<Item = String> + '_ {
    paths
        .iter()
        .map(|p| format!("unknown field {}", quote(&dotted(p))))
}

pub(crate) fn duplicate_messages(paths: &[FieldPath]) -> impl Iterator<Item = String> + '_ {
    paths
        .iter()
        .map(|p| format!("duplicate field {}", quote(&dotted(p))))
}

/// Go's `%q`, close enough: JSON string quoting.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `strict decoding error: unknown field "spec.foo", duplicate field "a"`
pub(crate) fn strict_error(errors: &[String]) -> String {
    format!("strict decoding error: {}", errors.join(", "))
}

/// A path as server-side apply names it: `.spec.containers[name="web"].x`.
pub(crate) fn apply_path(path: &[Step]) -> String {
    path.iter()
        .map(|step| match step {
            Step::Key(key) => format!(".{key}"),
            Step::Index(_, Some(name)) => format!("[name={}]", quote(name)),
            Step::Index(i, None) => format!("[{i}]"),
        })
        .collect()
}

/// Go's `%+v` of a decoded JSON value, as upstream quotes a strategic
/// merge patch in its refusal: `map[spec:map[foo:1]]`.
pub(crate) fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_value).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_value(v)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

/// Upstream's warning recorder writes at most this many characters of
/// warning text, and past it shortens each warning to `TRUNCATE_ITEM`.
const TRUNCATE_AT_TOTAL: usize = 4 * 1024;
const TRUNCATE_ITEM: usize = 256;

/// Add one `Warning: 299 - "…"` header per warning, as the API server's
/// warning recorder writes them: repeats dropped, and once the text passes
/// 4096 characters every warning is cut to 256 and the rest are dropped.
pub(crate) fn add_warnings(response: &mut Response<Body>, warnings: &[String]) {
    let mut seen = HashSet::new();
    let mut recorded: Vec<&str> = Vec::new();
    let mut headers: Vec<HeaderValue> = Vec::new();
    let mut written = 0;
    let mut truncating = false;
    for text in warnings {
        if truncating && written >= TRUNCATE_AT_TOTAL {
            break;
        }
        if text.is_empty() || !seen.insert(text.as_str()) {
            continue;
        }
        recorded.push(text);
        let (shown, length) = shorten(text, truncating);
        if written + length <= TRUNCATE_AT_TOTAL || truncating {
            written += length;
            headers.extend(warning_header(shown));
            continue;
        }
        // Over the limit: start again with every warning shortened.
        truncating = true;
        written = 0;
        headers.clear();
        for text in &recorded {
            let (shown, length) = shorten(text, true);
            written += length;
            headers.extend(warning_header(shown));
        }
    }
    for header in headers {
        response.headers_mut().append("warning", header);
    }
}

fn shorten(text: &str, truncating: bool) -> (&str, usize) {
    let length = text.chars().count();
    match text.char_indices().nth(TRUNCATE_ITEM) {
        Some((end, _)) if truncating => (&text[..end], TRUNCATE_ITEM),
        _ => (text, length),
    }
}

/// `299 - "text"`, quotes and backslashes escaped; control characters,
/// which a header cannot carry, become spaces.
fn warning_header(text: &str) -> Option<HeaderValue> {
    let mut header = String::from("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                header.push('\\');
                header.push(c);
            }
            c if c.is_control() => header.push(' '),
            c => header.push(c),
        }
    }
    header.push('"');
    HeaderValue::from_bytes(header.as_bytes()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_repeated_yaml_key_is_named_with_its_line() {
        let yaml = b"apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\ndata:\n  c: d\n";
        assert_eq!(
            yaml_duplicate(yaml).as_deref(),
            Some(r#"line 5: key "data" already set in map"#)
        );
        assert_eq!(yaml_duplicate(b"a: 1\nb: [1, 1]\n"), None);
        assert_eq!(
            yaml_duplicate(br#"{"a": 1, "a": 2}"#).as_deref(),
            Some(r#"line 1: key "a" already set in map"#),
            "an apply body in JSON is YAML too"
        );
        assert_eq!(yaml_duplicate(br#"{"a": {"a": 1}}"#), None);
        assert_eq!(yaml_duplicate(b"a: [unclosed\n"), None);
    }

    #[test]
    fn messages_and_warnings_read_as_upstream_writes_them() {
        let found = vec![vec![Step::Key("spec".into()), Step::Key("foo".into())]];
        let errors: Vec<String> = unknown_messages(&found).collect();
        assert_eq!(
            strict_error(&errors),
            r#"strict decoding error: unknown field "spec.foo""#
        );
        let mut response = crate::ctx::json(http::StatusCode::OK, &json!({}));
        add_warnings(&mut response, &[errors[0].clone(), errors[0].clone()]);
        let values: Vec<_> = response.headers().get_all("warning").iter().collect();
        assert_eq!(values, [r#"299 - "unknown field \"spec.foo\"""#]);
        let long: Vec<String> = (0..40)
            .map(|i| format!("{i:03}{}", "x".repeat(300)))
            .collect();
        let mut response = crate::ctx::json(http::StatusCode::OK, &json!({}));
        add_warnings(&mut response, &long);
        let values: Vec<_> = response.headers().get_all("warning").iter().collect();
        assert_eq!(
            values.len(),
            16,
            "shortened to 256 characters until 4096 are written"
        );
        assert_eq!(values[0].len(), "299 - \"\"".len() + 256);
        assert_eq!(
            go_value(&json!({"spec": {"b": [1, "x"], "a": null}})),
            "map[spec:map[a:<nil> b:[1 x]]]"
        );
        let item = vec![
            Step::Key("spec".into()),
            Step::Index(0, Some("web".into())),
            Step::Key("x".into()),
        ];
        assert_eq!(apply_path(&item), r#".spec[name="web"].x"#);
    }
}
