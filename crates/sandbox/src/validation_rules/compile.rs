//! Compiling the rules of a CRD version's schema into [`Rules`], and the
//! checks kube-apiserver makes of `x-kubernetes-validations` when a CRD is
//! written, with its field paths and messages. Pure.
//!
//! It must never refuse a CRD kube-apiserver accepts for a reason of its
//! own: the checks here are upstream's, in upstream's order.

use std::collections::BTreeMap;

use serde_json::Value;

use super::wording::{cel_go_style, go_struct, located, quote};
use super::{Node, Rule, Rules, check, library};
use crate::error::Cause;

/// The reasons a rule may name.
const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// The variables every rule may use.
const VARIABLES: &[&str] = &["self", "oldSelf"];

/// cel-go's limit on the size of one expression, in code points.
const MAX_CODE_POINTS: usize = 100_000;

/// The stack compiling runs on. The CEL crate's parser recurses once per
/// operator of a chain such as `1 + 1 + …`, so an expression within the size
/// limit can need far more than a request thread's stack; only compiling
/// runs here (CRD writes are rare), and a rule that compiles is at most
/// `check::MAX_DEPTH` deep, which evaluation on any thread can afford.
const COMPILE_STACK_BYTES: usize = 256 << 20;

/// Run `f` on a thread with [`COMPILE_STACK_BYTES`] of stack; `None` if no
/// such thread could be started.
fn on_compile_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Option<T> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-compile".into())
            .stack_size(COMPILE_STACK_BYTES)
            .spawn_scoped(scope, f)
            .ok()?
            .join()
            .ok()
    })
}

impl Rules {
    /// The rules of one version's `openAPIV3Schema`. A rule that does not
    /// compile is kept with its error and reported when evaluated, as
    /// upstream; a CRD that carries one is refused when written, so only a
    /// CRD stored some other way can hold one.
    pub(crate) fn compile(schema: &Value) -> Self {
        let build = || {
            let mut ignored = Vec::new();
            Self {
                root: node(schema, "", true, None, &mut ignored),
            }
        };
        // The rules were checked when the CRD was written, so they are
        // shallow enough to compile here if no thread can be had.
        on_compile_stack(build).unwrap_or_else(build)
    }
}

/// Why the CRD's rules are invalid, for each version whose schema is not
/// `known_valid(version name, schema)`: field paths
/// `spec.versions[i].schema.openAPIV3Schema…x-kubernetes-validations[j].rule`.
pub(crate) fn check_crd(
    crd: &Value,
    known_valid: impl Fn(&str, &Value) -> bool + Sync,
) -> Vec<Cause> {
    on_compile_stack(|| check_versions(crd, &known_valid)).unwrap_or_else(|| {
        vec![cause(
            "InternalError",
            "spec.versions".into(),
            "Internal error: no thread to compile the validation rules on".into(),
        )]
    })
}

fn check_versions(crd: &Value, known_valid: impl Fn(&str, &Value) -> bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    for (i, version) in versions.into_iter().flatten().enumerate() {
        let name = version.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema")
            && !known_valid(name, schema)
        {
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            node(schema, &path, true, None, &mut causes);
        }
    }
    causes
}

/// The node for `schema` at CRD path `path`, or `None` when nothing at or
/// below it has rules. `uncorrelatable` is the path of the nearest list above
/// whose items have no old value (not `listType: map`), where `oldSelf`
/// cannot be used.
fn node(
    schema: &Value,
    path: &str,
    resource_root: bool,
    uncorrelatable: Option<&str>,
    causes: &mut Vec<Cause>,
) -> Option<Node> {
    let rules: Vec<Rule> = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, raw)| {
            let at = format!("{path}.x-kubernetes-validations[{i}]");
            rule(raw, schema, &at, uncorrelatable, causes)
        })
        .collect();

    let mut properties = BTreeMap::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            let sub_path = format!("{path}.properties[{name}]");
            let embedded = flag(sub, "x-kubernetes-embedded-resource");
            if let Some(child) = node(sub, &sub_path, embedded, uncorrelatable, causes) {
                properties.insert(name.clone(), child);
            }
        }
    }
    let additional = schema
        .get("additionalProperties")
        .filter(|a| a.is_object())
        .and_then(|sub| {
            let sub_path = format!("{path}.additionalProperties");
            let embedded = flag(sub, "x-kubernetes-embedded-resource");
            node(sub, &sub_path, embedded, uncorrelatable, causes)
        })
        .map(Box::new);
    let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
    let map_keys = (list_type == Some("map")).then(|| {
        schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect::<Vec<_>>()
    });
    let items = schema
        .get("items")
        .filter(|i| i.is_object())
        .and_then(|sub| {
            let sub_path = format!("{path}.items");
            let within = if map_keys.is_some() {
                uncorrelatable
            } else {
                uncorrelatable.or(Some(path))
            };
            let embedded = flag(sub, "x-kubernetes-embedded-resource");
            node(sub, &sub_path, embedded, within, causes)
        })
        .map(Box::new);

    if rules.is_empty() && properties.is_empty() && additional.is_none() && items.is_none() {
        return None;
    }
    Some(Node {
        schema: schema.clone(),
        type_name: schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        resource_root,
        rules,
        properties,
        additional,
        items,
        map_keys,
    })
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn text<'a>(raw: &'a Value, key: &str) -> &'a str {
    raw.get(key).and_then(Value::as_str).unwrap_or("")
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// A cause of the CRD's own refusal.
fn cause(reason: &'static str, field: String, message: String) -> Cause {
    Cause {
        reason,
        field,
        message,
    }
}

/// Compile one rule, or record why the CRD cannot carry it.
fn rule(
    raw: &Value,
    schema: &Value,
    at: &str,
    uncorrelatable: Option<&str>,
    causes: &mut Vec<Cause>,
) -> Option<Rule> {
    let before = causes.len();
    let source = text(raw, "rule");
    let message = text(raw, "message");
    let message_expression = text(raw, "messageExpression");
    let reason = raw.get("reason").and_then(Value::as_str);
    let field_path = text(raw, "fieldPath");
    let optional_old_self = raw.get("optionalOldSelf").and_then(Value::as_bool);
    let invalid = |field: &str, value: String, detail: &str| {
        cause(
            "FieldValueInvalid",
            format!("{at}.{field}"),
            format!("Invalid value: {value}: {detail}"),
        )
    };
    let required = |field: &str, detail: &str| {
        cause(
            "FieldValueRequired",
            format!("{at}.{field}"),
            format!("Required value: {detail}"),
        )
    };
    if source.trim().is_empty() {
        causes.push(required("rule", "rule is not specified"));
    } else if !message.is_empty() && message.trim().is_empty() {
        causes.push(invalid(
            "message",
            quote(message),
            "message must be non-empty if specified",
        ));
    } else if message.len() > 2048 {
        let short: String = message.chars().take(10).collect();
        causes.push(invalid(
            "message",
            quote(&format!("{short}...")),
            "message must have a maximum length of 2048 characters",
        ));
    } else if has_newlines(message.trim()) {
        causes.push(invalid(
            "message",
            quote(message),
            "message must not contain line breaks",
        ));
    } else if has_newlines(source.trim()) && message.trim().is_empty() {
        causes.push(required(
            "message",
            "message must be specified if rule contains line breaks",
        ));
    }
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        causes.push(required(
            "messageExpression",
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = reason
        && !REASONS.contains(&reason)
    {
        let supported: Vec<String> = REASONS.iter().map(|r| quote(r)).collect();
        causes.push(cause(
            "FieldValueNotSupported",
            format!("{at}.reason"),
            format!(
                "Unsupported value: {}: supported values: {}",
                quote(reason),
                supported.join(", ")
            ),
        ));
    }
    let normalized = if field_path.is_empty() {
        None
    } else if field_path.trim().is_empty() {
        causes.push(invalid(
            "fieldPath",
            quote(field_path),
            "fieldPath must be non-empty if specified",
        ));
        None
    } else if has_newlines(field_path) {
        causes.push(invalid(
            "fieldPath",
            quote(field_path),
            "fieldPath must not contain line breaks",
        ));
        None
    } else {
        let normalized = normalize_field_path(field_path, schema);
        if normalized.is_none() {
            causes.push(invalid(
                "fieldPath",
                quote(field_path),
                "fieldPath must be a valid path",
            ));
        }
        normalized
    };
    if causes.len() > before {
        return None;
    }

    let compiled = compile_rule(raw, uncorrelatable);
    let (program, message_expression, uses_old_self) = match compiled {
        Ok(compiled) => compiled,
        Err((field, value, detail)) => {
            causes.push(invalid(field, value, &detail));
            (Err(detail), None, false)
        }
    };
    Some(Rule {
        text: source.to_string(),
        message: message.to_string(),
        reason: reason.unwrap_or("FieldValueInvalid").to_string(),
        field_path: normalized,
        optional_old_self: optional_old_self.unwrap_or(false),
        program,
        message_expression,
        uses_old_self,
    })
}

/// A compiled rule: the program, its message expression and whether it is a
/// transition rule.
type Compiled = (Result<cel::Program, String>, Option<cel::Program>, bool);

/// Compile a rule whose fields are well-formed; `Err` names the field that
/// fails, the value upstream quotes for it, and the detail.
fn compile_rule(
    raw: &Value,
    uncorrelatable: Option<&str>,
) -> Result<Compiled, (&'static str, String, String)> {
    let source = text(raw, "rule");
    let message_expression = text(raw, "messageExpression");
    // Upstream prints the internal rule struct with Go's %#v.
    let shown = || go_struct(raw);
    let (program, uses_old_self) =
        expression(source, "", "bool", "cel expression must evaluate to a bool")
            .map_err(|detail| ("rule", shown(), detail))?;
    let message_program = if message_expression.trim().is_empty() {
        None
    } else {
        let (program, _) = expression(
            message_expression,
            "messageExpression ",
            "string",
            "messageExpression must evaluate to a string",
        )
        .map_err(|detail| ("messageExpression", shown(), detail))?;
        Some(program)
    };
    if uses_old_self && let Some(list) = uncorrelatable {
        return Err((
            "rule",
            quote(source),
            format!(
                "oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
            ),
        ));
    }
    if !uses_old_self && let Some(set) = raw.get("optionalOldSelf").and_then(Value::as_bool) {
        return Err((
            "optionalOldSelf",
            set.to_string(),
            "may not be set if oldSelf is not used in rule".to_string(),
        ));
    }
    Ok((Ok(program), message_program, uses_old_self))
}

/// Parse and check one expression whose result must be of type `want`.
fn expression(
    source: &str,
    what: &str,
    want: &str,
    wrong_type: &str,
) -> Result<(cel::Program, bool), String> {
    let size = source.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(format!(
            "{what}compilation failed: ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
        ));
    }
    let program = library::env().compile(source).map_err(|errors| {
        format!(
            "{what}compilation failed: {}",
            cel_go_style(&errors.to_string())
        )
    })?;
    let findings = check::references(&program, VARIABLES);
    if !findings.problems.is_empty() {
        return Err(format!(
            "{what}compilation failed: {}",
            located(source, &program, &findings.problems)
        ));
    }
    match check::plain_type(&program) {
        Some(t) if t != want => Err(wrong_type.to_string()),
        _ => Ok((program, findings.uses_old_self)),
    }
}

/// `fieldPath` (`.a.b`, `.map['key']`) as a field path (`a.b`, `map[key]`),
/// if every step names a field the schema declares or a map key.
fn normalize_field_path(path: &str, schema: &Value) -> Option<String> {
    let mut out = String::new();
    let mut schema = schema;
    let mut rest = path;
    while !rest.is_empty() {
        let (name, remainder) = if let Some(after) = rest.strip_prefix("['") {
            let end = after.find("']")?;
            (after[..end].replace("\\'", "'"), &after[end + 2..])
        } else if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            (after[..end].to_string(), &after[end..])
        } else {
            return None;
        };
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            schema = properties.get(&name)?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(additional) =
            schema.get("additionalProperties").filter(|a| a.is_object())
        {
            schema = additional;
            out.push_str(&format!("[{name}]"));
        } else {
            return None;
        }
        rest = remainder;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(rules: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object",
                "properties": {"a": {"type": "string"}, "m": {"type": "object", "additionalProperties": {"type": "string"}},
                    "list": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}},
                "x-kubernetes-validations": rules}}}}}]}})
    }

    #[test]
    fn valid_rules_raise_no_cause() {
        let ok = crd(json!([
            {"rule": "has(self.a) && self.a.startsWith('x')", "messageExpression": "'a is ' + self.a", "fieldPath": ".a"},
            {"rule": "self.m.all(k, k.size() < 5)", "fieldPath": ".m['key']", "reason": "FieldValueForbidden"},
            {"rule": "!has(oldSelf.a) || self.a == oldSelf.a", "optionalOldSelf": true}
        ]));
        let causes = check_crd(&ok, |_, _| false);
        // The list item's transition rule is the one refusal: its items have no old value.
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(
            causes[0].field,
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list].items.x-kubernetes-validations[0].rule"
        );
        assert!(causes[0].message.contains("oldSelf cannot be used on the uncorrelatable portion of the schema within spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[list]"), "{}", causes[0].message);
    }

    #[test]
    fn each_kind_of_bad_rule_is_named_at_its_field() {
        for (rule, field, needle) in [
            (
                json!({"rule": "self.a =="}),
                "rule",
                "compilation failed: ERROR: <input>:1:",
            ),
            (
                json!({"rule": "nope == 1"}),
                "rule",
                "undeclared reference to 'nope'",
            ),
            (
                json!({"rule": "self.a.frobnicate()"}),
                "rule",
                "undeclared reference to 'frobnicate'",
            ),
            (
                json!({"rule": "'text'"}),
                "rule",
                "cel expression must evaluate to a bool",
            ),
            (
                json!({"rule": "true", "messageExpression": "1 + "}),
                "messageExpression",
                "messageExpression compilation failed",
            ),
            (
                json!({"rule": "true", "messageExpression": "42"}),
                "messageExpression",
                "messageExpression must evaluate to a string",
            ),
            (
                json!({"rule": "true", "reason": "Bogus"}),
                "reason",
                "Unsupported value: \"Bogus\"",
            ),
            (
                json!({"rule": "true", "fieldPath": ".missing"}),
                "fieldPath",
                "fieldPath must be a valid path",
            ),
            (
                json!({"rule": "true", "optionalOldSelf": true}),
                "optionalOldSelf",
                "may not be set if oldSelf is not used in rule",
            ),
            (
                json!({"rule": " "}),
                "rule",
                "Required value: rule is not specified",
            ),
            (
                json!({"rule": "true", "message": "two\nlines"}),
                "message",
                "message must not contain line breaks",
            ),
        ] {
            let causes = check_crd(&crd(json!([rule.clone()])), |_, _| false);
            let mine: Vec<&Cause> = causes
                .iter()
                .filter(|c| c.field.contains("properties[spec].x-kubernetes"))
                .collect();
            assert_eq!(mine.len(), 1, "{rule}: {causes:?}");
            assert_eq!(
                mine[0].field,
                format!(
                    "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].{field}"
                ),
                "{rule}"
            );
            assert!(
                mine[0].message.contains(needle),
                "{rule}: {}",
                mine[0].message
            );
        }
    }

    #[test]
    fn a_compile_error_shows_the_rule_as_upstream_prints_it() {
        let causes = check_crd(&crd(json!([{"rule": "nope", "message": "m"}])), |_, _| {
            false
        });
        let message = &causes
            .iter()
            .find(|c| c.field.ends_with("[0].rule") && c.field.contains("[spec].x"))
            .expect("a cause")
            .message;
        assert!(message.starts_with("Invalid value: apiextensions.ValidationRule{Rule:\"nope\", Message:\"m\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope' (in container '')\n | nope\n | ^"), "{message}");
    }

    #[test]
    fn field_paths_normalize_against_the_schema() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"c": {"type": "string"}}}}}});
        assert_eq!(
            normalize_field_path(".a.b", &schema).as_deref(),
            Some("a.b")
        );
        assert_eq!(
            normalize_field_path(".m['k.1'].c", &schema).as_deref(),
            Some("m[k.1].c")
        );
        assert_eq!(normalize_field_path("['a']", &schema).as_deref(), Some("a"));
        assert_eq!(normalize_field_path(".a.x", &schema), None);
        assert_eq!(normalize_field_path("a", &schema), None);
    }

    #[test]
    fn hostile_rules_are_refused_without_exhausting_a_stack() {
        for (rule, needle) in [
            (
                format!("1 {} == 1", "+ 1 ".repeat(24_000)),
                "max recursion depth exceeded",
            ),
            (
                format!("self{} == 1", "[0]".repeat(30_000)),
                "max recursion depth exceeded",
            ),
            (
                format!("self{} == 1", ".a".repeat(40_000)),
                "max recursion depth exceeded",
            ),
            (
                format!("{}true{}", "(".repeat(5_000), ")".repeat(5_000)),
                "compilation failed",
            ),
            (
                format!("'{}' == ''", "x".repeat(100_001)),
                "expression code point size exceeds limit: size: 100009, limit 100000",
            ),
        ] {
            let causes = check_crd(&crd(json!([{"rule": rule}])), |_, _| false);
            let mine = causes
                .iter()
                .find(|c| {
                    c.field
                        .ends_with("properties[spec].x-kubernetes-validations[0].rule")
                })
                .unwrap_or_else(|| panic!("refused: {causes:?}"));
            assert!(
                mine.message.contains(needle),
                "{}",
                &mine.message[mine.message.len().saturating_sub(300)..]
            );
        }
        // A deep but legal rule compiles, and evaluates on an ordinary stack.
        let rule = format!("self.replicas {} >= 0", "+ 1 ".repeat(200));
        let schema = json!({"type": "object", "properties": {"replicas": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": rule}]});
        assert!(check_crd(&json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}}), |_, _| false).is_empty());
        let rules = Rules::compile(&schema);
        assert!(rules.validate(&json!({"replicas": 1}), None).is_empty());
    }
}
