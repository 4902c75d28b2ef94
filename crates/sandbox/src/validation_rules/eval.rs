//! Evaluating [`Rules`] on a write: walk the new object (and the old one on
//! update) along the compiled nodes, run each rule with `self` (and
//! `oldSelf`) bound, and turn failures into the causes kube-apiserver
//! reports. Pure.
//!
//! As upstream: only non-null values are validated; a transition rule runs
//! only where the old object has a correlated value (object fields and map
//! entries by key, `listType: map` items by their keys) unless it sets
//! `optionalOldSelf`; and a failure of a rule without `oldSelf` on a value
//! that did not change is let through (validation ratcheting), so objects
//! stored before a rule was added can still be updated elsewhere.

use cel::common::types::CelOptional;
use cel::common::value::Val;
use cel::{Context, ExecutionError, Program, Value as Cel};
use serde_json::Value;

use super::{Node, Rule, Rules, library, value};
use crate::error::Cause;

/// The longest message a `messageExpression` may produce.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

impl Rules {
    /// The causes for which `new` is invalid; `old` is the stored object on
    /// update, `None` on create.
    pub(crate) fn validate(&self, new: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(root) = &self.root {
            walk(root, new, old, false, "", &mut causes);
        }
        causes
    }
}

/// `parent_unchanged`: the nearest correlated ancestor equals its old value.
fn walk(
    node: &Node,
    new: &Value,
    old: Option<&Value>,
    parent_unchanged: bool,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    if new.is_null() {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    let unchanged = old.map_or(parent_unchanged, |o| o == new);
    if !node.rules.is_empty() {
        run_rules(node, new, old, unchanged, path, causes);
    }
    match new {
        Value::Object(map) => {
            let old_map = old.and_then(Value::as_object);
            for (key, field) in map {
                let old_field = old_map.and_then(|m| m.get(key));
                if let Some(child) = node.properties.get(key) {
                    walk(
                        child,
                        field,
                        old_field,
                        unchanged,
                        &child_path(path, key),
                        causes,
                    );
                } else if let Some(child) = &node.additional {
                    walk(
                        child,
                        field,
                        old_field,
                        unchanged,
                        &format!("{path}[{key}]"),
                        causes,
                    );
                }
            }
        }
        Value::Array(items) => {
            let Some(child) = &node.items else { return };
            let old_items = old.and_then(Value::as_array);
            for (i, item) in items.iter().enumerate() {
                let old_item = match (&node.map_keys, old_items) {
                    (Some(keys), Some(olds)) => olds.iter().find(|o| same_keys(keys, o, item)),
                    _ => None,
                };
                walk(
                    child,
                    item,
                    old_item,
                    unchanged,
                    &format!("{path}[{i}]"),
                    causes,
                );
            }
        }
        _ => {}
    }
}

fn child_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn same_keys(keys: &[String], a: &Value, b: &Value) -> bool {
    keys.iter().all(|k| a.get(k) == b.get(k))
}

/// The variables of one node: `self`, and `oldSelf` as a value or an optional.
struct Bindings {
    this: Cel,
    old: Option<Cel>,
}

impl Bindings {
    fn context(&self, optional_old_self: bool) -> Context<'static, 'static> {
        let mut ctx = Context::with_env(library::env());
        ctx.add_variable_from_value("self", self.this.clone());
        let boxed = |v: &Cel| -> Option<Box<dyn Val>> { v.clone().try_into().ok() };
        match (&self.old, optional_old_self) {
            (Some(old), false) => ctx.add_variable_from_value("oldSelf", old.clone()),
            (old, true) => {
                let optional = match old.as_ref().and_then(boxed) {
                    Some(inner) => CelOptional::of(inner),
                    None => CelOptional::none(),
                };
                ctx.add_variable_as_val("oldSelf", Box::new(optional));
            }
            (None, false) => {}
        }
        ctx
    }
}

fn run_rules(
    node: &Node,
    new: &Value,
    old: Option<&Value>,
    unchanged: bool,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let bindings = Bindings {
        this: value::to_cel(new, &node.schema, node.resource_root),
        old: old
            .filter(|_| node.rules.iter().any(|r| r.uses_old_self))
            .map(|o| value::to_cel(o, &node.schema, node.resource_root)),
    };
    let field = if path.is_empty() { "<nil>" } else { path };
    let invalid = |detail: String| Cause {
        reason: "FieldValueInvalid",
        field: field.to_string(),
        message: format!("Invalid value: \"{}\": {detail}", node.type_name),
    };
    for rule in &node.rules {
        let program = match &rule.program {
            Ok(program) => program,
            Err(error) => {
                causes.push(invalid(format!("rule compile error: {error}")));
                continue;
            }
        };
        // Transition rules need an old value, unless it may be absent.
        if rule.uses_old_self && bindings.old.is_none() && !rule.optional_old_self {
            continue;
        }
        let ctx = bindings.context(rule.optional_old_self);
        match program.execute(&ctx) {
            Ok(Cel::Bool(true)) => continue,
            Ok(Cel::Bool(false)) => {}
            Ok(other) => {
                causes.push(invalid(format!(
                    "rule evaluated to {} instead of a bool: {}",
                    other.type_of(),
                    rule.error_string()
                )));
                continue;
            }
            Err(error) => {
                causes.push(invalid(evaluation_error(&error, rule)));
                continue;
            }
        }
        if !rule.uses_old_self && unchanged {
            continue;
        }
        // The message expression sees oldSelf as a plain value, as upstream.
        let detail = rule
            .message_expression
            .as_ref()
            .and_then(|expression| message(expression, &bindings.context(false)))
            .unwrap_or_else(|| rule.message_or_default());
        let at = match &rule.field_path {
            Some(relative) if path.is_empty() => relative.clone(),
            Some(relative) => format!("{path}.{relative}"),
            None => field.to_string(),
        };
        causes.push(failure(rule, at, &node.type_name, detail));
    }
}

/// A `messageExpression`'s result, if it is a usable message.
fn message(expression: &Program, ctx: &Context<'_, '_>) -> Option<String> {
    match expression.execute(ctx) {
        Ok(Cel::String(s)) => {
            let trimmed = s.trim();
            let usable = !trimmed.is_empty()
                && !trimmed.contains('\n')
                && trimmed.len() <= MAX_MESSAGE_BYTES;
            usable.then(|| trimmed.to_string())
        }
        Ok(_) | Err(_) => {
            tracing::debug!("a messageExpression gave no message; using the rule's message");
            None
        }
    }
}

/// The cause of a failed rule, by its `reason`.
fn failure(rule: &Rule, field: String, type_name: &str, detail: String) -> Cause {
    let (reason, message) = match rule.reason.as_str() {
        "FieldValueForbidden" => ("FieldValueForbidden", format!("Forbidden: {detail}")),
        "FieldValueRequired" => ("FieldValueRequired", format!("Required value: {detail}")),
        "FieldValueDuplicate" => (
            "FieldValueDuplicate",
            format!("Duplicate value: \"{type_name}\""),
        ),
        _ => (
            "FieldValueInvalid",
            format!("Invalid value: \"{type_name}\": {detail}"),
        ),
    };
    Cause {
        reason,
        field,
        message,
    }
}

/// A rule's runtime error worded as cel-go words it in upstream's message.
fn evaluation_error(error: &ExecutionError, rule: &Rule) -> String {
    let rule_name = rule.error_string();
    let text = match error {
        ExecutionError::NoSuchOverload(_) => {
            return format!(
                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule_name}"
            );
        }
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::IndexOutOfBounds(index) => format!("index out of bounds: {index:?}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        other => other.to_string(),
    };
    format!("{text} evaluating rule: {rule_name}")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Rules;

    fn rules(spec: Value) -> Rules {
        Rules::compile(&json!({"type": "object", "properties": {"spec": spec}}))
    }

    fn immutable() -> Rules {
        rules(json!({"type": "object", "properties": {
            "id": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "is immutable"}]},
            "note": {"type": "string"}}}))
    }

    #[test]
    fn a_transition_rule_runs_only_on_update() {
        let r = immutable();
        let first = json!({"spec": {"id": "a"}});
        assert!(
            r.validate(&first, None).is_empty(),
            "no old value on create"
        );
        let changed = json!({"spec": {"id": "b"}});
        let causes = r.validate(&changed, Some(&first));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.id");
        assert_eq!(causes[0].reason, "FieldValueInvalid");
        assert_eq!(causes[0].message, "Invalid value: \"string\": is immutable");
        let other = json!({"spec": {"id": "a", "note": "x"}});
        assert!(
            r.validate(&other, Some(&first)).is_empty(),
            "other fields may change"
        );
        let added = json!({"spec": {"id": "a"}});
        assert!(
            r.validate(&added, Some(&json!({"spec": {}}))).is_empty(),
            "a field without an old value is not a transition"
        );
    }

    #[test]
    fn optional_old_self_runs_without_an_old_value() {
        let r = rules(
            json!({"type": "object", "properties": {"id": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "oldSelf.hasValue() || self.id == 'first'", "optionalOldSelf": true, "message": "must start first"}]}),
        );
        let causes = r.validate(&json!({"spec": {"id": "second"}}), None);
        assert_eq!(causes.len(), 1, "runs on create");
        assert!(
            r.validate(&json!({"spec": {"id": "first"}}), None)
                .is_empty()
        );
        assert!(
            r.validate(
                &json!({"spec": {"id": "second"}}),
                Some(&json!({"spec": {"id": "first"}}))
            )
            .is_empty()
        );
    }

    #[test]
    fn message_expression_reason_and_field_path_shape_the_cause() {
        let r = rules(
            json!({"type": "object", "properties": {"replicas": {"type": "integer"}, "max": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= self.max", "messageExpression": "'replicas must be at most ' + string(self.max)", "fieldPath": ".replicas", "reason": "FieldValueForbidden"},
                {"rule": "self.replicas != 7", "messageExpression": "self.missing", "message": "not seven"},
                {"rule": "self.replicas != 8"}
            ]}),
        );
        let causes = r.validate(&json!({"spec": {"replicas": 9, "max": 3}}), None);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.replicas");
        assert_eq!(causes[0].reason, "FieldValueForbidden");
        assert_eq!(causes[0].message, "Forbidden: replicas must be at most 3");
        let fallback = r.validate(&json!({"spec": {"replicas": 7, "max": 9}}), None);
        assert_eq!(
            fallback[0].message, "Invalid value: \"object\": not seven",
            "a failing messageExpression falls back to message"
        );
        let default = r.validate(&json!({"spec": {"replicas": 8, "max": 9}}), None);
        assert_eq!(
            default[0].message,
            "Invalid value: \"object\": failed rule: self.replicas != 8"
        );
        assert_eq!(default[0].field, "spec");
    }

    #[test]
    fn an_evaluation_error_is_a_cause_worded_as_upstream() {
        let r = rules(
            json!({"type": "object", "properties": {"url": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.url.startsWith('https://')"}]}),
        );
        let causes = r.validate(&json!({"spec": {}}), None);
        assert_eq!(
            causes[0].message,
            "Invalid value: \"object\": no such key: url evaluating rule: self.url.startsWith('https://')"
        );
    }

    #[test]
    fn unchanged_values_are_not_refused_again() {
        let r = rules(
            json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 3"}]},
            "b": {"type": "string"}}}),
        );
        let stored = json!({"spec": {"a": "long", "b": "x"}});
        assert_eq!(r.validate(&stored, None).len(), 1, "refused when written");
        let other = json!({"spec": {"a": "long", "b": "y"}});
        assert!(
            r.validate(&other, Some(&stored)).is_empty(),
            "ratcheted: a did not change"
        );
        let worse = json!({"spec": {"a": "longer", "b": "x"}});
        assert_eq!(r.validate(&worse, Some(&stored)).len(), 1);
    }

    #[test]
    fn map_list_items_pair_with_their_old_items_by_key() {
        let r = rules(
            json!({"type": "object", "properties": {"ports": {"type": "array",
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}]}}}}),
        );
        let old = json!({"spec": {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}});
        let reordered = json!({"spec": {"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 1}, {"name": "c", "port": 3}]}});
        assert!(r.validate(&reordered, Some(&old)).is_empty());
        let changed = json!({"spec": {"ports": [{"name": "b", "port": 5}]}});
        let causes = r.validate(&changed, Some(&old));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.ports[0]");
    }

    #[test]
    fn null_values_are_not_validated_and_root_rules_have_no_field() {
        let r = Rules::compile(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "nullable": true, "x-kubernetes-validations": [{"rule": "false"}]}},
            "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('ok')", "message": "bad name"}]}));
        assert!(
            r.validate(&json!({"metadata": {"name": "ok-1"}, "spec": null}), None)
                .is_empty()
        );
        let causes = r.validate(&json!({"metadata": {"name": "no"}}), None);
        assert_eq!(causes[0].field, "<nil>");
        assert_eq!(causes[0].message, "Invalid value: \"object\": bad name");
    }

    #[test]
    fn a_message_expression_cannot_forge_a_multi_line_or_huge_message() {
        for expression in [
            "'line one\\nspec.other: Invalid value: forged'",
            "self.missing",
            "'   '",
            "' y '",
        ] {
            let r = rules(json!({"type": "object", "x-kubernetes-validations": [
                {"rule": "false", "message": "the rule's own message", "messageExpression": expression}]}));
            let causes = r.validate(&json!({"spec": {}}), None);
            let message = &causes[0].message;
            if expression.contains('y') {
                assert_eq!(
                    message, "Invalid value: \"object\": y",
                    "a plain message is used"
                );
            } else {
                assert_eq!(
                    message, "Invalid value: \"object\": the rule's own message",
                    "{expression}"
                );
            }
        }
        let huge = rules(
            json!({"type": "object", "properties": {"s": {"type": "string"}}, "x-kubernetes-validations": [
            {"rule": "false", "message": "short", "messageExpression": "self.s"}]}),
        );
        let causes = huge.validate(&json!({"spec": {"s": "z".repeat(6 * 1024)}}), None);
        assert_eq!(
            causes[0].message, "Invalid value: \"object\": short",
            "over 5 KiB falls back"
        );
    }
}
