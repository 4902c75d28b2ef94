//! Decoding, defaults and validation of the RBAC kinds, as kube-apiserver's
//! `rbac/v1` defaults and `rbac/validation` do them: rules, roleRefs,
//! subjects, aggregation rules, and a roleRef that may not change. Pure: it
//! shapes and judges an object, and must never decide who may write it.

use serde_json::{Value, json};

use super::rbac::GROUP;
use super::rules::{Rule, parse_rules};
use crate::error::{ApiError, ApiResult, Cause};
use crate::object::{DNS_SUBDOMAIN_PROBLEM, is_dns_subdomain, path_segment_problem};

/// Put an RBAC object in the form the API server stores: rules decoded
/// (a wrongly typed field is a 400, as a failed decode is upstream) and
/// re-encoded, roleRef and subject API groups defaulted.
pub(crate) fn normalize(kind: &str, object: &mut Value) -> ApiResult<()> {
    let Some(map) = object.as_object_mut() else {
        return Ok(());
    };
    let undecodable = |error: String| {
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: {error}"
        ))
    };
    if let Some(rules) = map.get("rules").filter(|r| !r.is_null()) {
        let rules = parse_rules(Some(rules)).map_err(undecodable)?;
        map.insert(
            "rules".into(),
            Value::Array(rules.iter().map(Rule::to_json).collect()),
        );
    }
    if let Some(role_ref) = map.get_mut("roleRef").and_then(Value::as_object_mut) {
        let empty = role_ref
            .get("apiGroup")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if empty {
            role_ref.insert("apiGroup".into(), json!(GROUP));
        }
    }
    if let Some(Value::Array(subjects)) = map.get_mut("subjects") {
        for subject in subjects.iter_mut().filter_map(Value::as_object_mut) {
            let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
            let empty = subject
                .get("apiGroup")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty);
            if empty && matches!(kind, "User" | "Group") {
                subject.insert("apiGroup".into(), json!(GROUP));
            }
        }
    }
    Ok(())
}

/// What is wrong with an RBAC object (of `resource`, its plural), with its
/// stored form `old` when it is an update.
pub(crate) fn validate(resource: &str, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    match resource {
        "roles" | "clusterroles" => {
            let namespaced = resource == "roles";
            let rules = object.get("rules").and_then(Value::as_array);
            for (i, rule) in rules.into_iter().flatten().enumerate() {
                if let Ok(rule) = Rule::parse(rule) {
                    policy_rule(&rule, namespaced, &format!("rules[{i}]"), &mut causes);
                }
            }
            if !namespaced
                && let Some(aggregation) = object.get("aggregationRule").filter(|a| !a.is_null())
            {
                let selectors = aggregation
                    .get("clusterRoleSelectors")
                    .and_then(Value::as_array);
                if selectors.is_none_or(Vec::is_empty) {
                    causes.push(required(
                        "aggregationRule.clusterRoleSelectors",
                        "at least one clusterRoleSelector required if aggregationRule is non-nil",
                    ));
                }
            }
        }
        "rolebindings" | "clusterrolebindings" => {
            let namespaced = resource == "rolebindings";
            role_ref(object, namespaced, &mut causes);
            let subjects = object.get("subjects").and_then(Value::as_array);
            for (i, s) in subjects.into_iter().flatten().enumerate() {
                subject(s, namespaced, &format!("subjects[{i}]"), &mut causes);
            }
            if let Some(old) = old
                && old.get("roleRef") != object.get("roleRef")
            {
                causes.push(invalid(
                    "roleRef",
                    role_ref_go(object.get("roleRef")),
                    "cannot change roleRef",
                ));
            }
        }
        _ => {}
    }
    causes
}

fn policy_rule(rule: &Rule, namespaced: bool, path: &str, causes: &mut Vec<Cause>) {
    if rule.verbs.is_empty() {
        causes.push(required(
            &format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    if !rule.non_resource_urls.is_empty() {
        let urls = format!(
            "[]string{{{}}}",
            rule.non_resource_urls
                .iter()
                .map(|u| format!("{u:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let field = format!("{path}.nonResourceURLs");
        if namespaced {
            causes.push(invalid(
                &field,
                urls.clone(),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if !rule.api_groups.is_empty()
            || !rule.resources.is_empty()
            || !rule.resource_names.is_empty()
        {
            causes.push(invalid(
                &field,
                urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if rule.api_groups.is_empty() {
        causes.push(required(
            &format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if rule.resources.is_empty() {
        causes.push(required(
            &format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

fn role_ref(object: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    let at = |field: &str| {
        object
            .pointer(&format!("/roleRef/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    if at("apiGroup") != GROUP {
        causes.push(not_supported("roleRef.apiGroup", at("apiGroup"), &[GROUP]));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&at("kind")) {
        causes.push(not_supported("roleRef.kind", at("kind"), kinds));
    }
    let name = at("name");
    if name.is_empty() {
        causes.push(required("roleRef.name", ""));
    } else if let Some(problem) = path_segment_problem(name) {
        causes.push(invalid("roleRef.name", format!("{name:?}"), problem));
    }
}

fn subject(subject: &Value, namespaced: bool, path: &str, causes: &mut Vec<Cause>) {
    let at = |field: &str| subject.get(field).and_then(Value::as_str).unwrap_or("");
    let name = at("name");
    if name.is_empty() {
        causes.push(required(&format!("{path}.name"), ""));
    }
    match at("kind") {
        "ServiceAccount" => {
            if !name.is_empty() && !is_dns_subdomain(name) {
                causes.push(invalid(
                    &format!("{path}.name"),
                    format!("{name:?}"),
                    DNS_SUBDOMAIN_PROBLEM,
                ));
            }
            if !at("apiGroup").is_empty() {
                causes.push(not_supported(
                    &format!("{path}.apiGroup"),
                    at("apiGroup"),
                    &[""],
                ));
            }
            if !namespaced && at("namespace").is_empty() {
                causes.push(required(&format!("{path}.namespace"), ""));
            }
        }
        "User" | "Group" => {
            if at("apiGroup") != GROUP {
                causes.push(not_supported(
                    &format!("{path}.apiGroup"),
                    at("apiGroup"),
                    &[GROUP],
                ));
            }
        }
        other => causes.push(not_supported(
            &format!("{path}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

/// A roleRef as Go's `%#v` prints the internal type in upstream's message.
fn role_ref_go(role_ref: Option<&Value>) -> String {
    let at = |field: &str| {
        role_ref
            .and_then(|r| r.get(field))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    format!(
        "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
        at("apiGroup"),
        at("kind"),
        at("name")
    )
}

fn required(field: &str, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_owned()
    } else {
        format!("Required value: {detail}")
    };
    Cause {
        reason: "FieldValueRequired",
        field: field.to_owned(),
        message,
    }
}

fn invalid(field: &str, value: String, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.to_owned(),
        message: format!("Invalid value: {value}: {detail}"),
    }
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let listed: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause {
        reason: "FieldValueNotSupported",
        field: field.to_owned(),
        message: format!(
            "Unsupported value: {value:?}: supported values: {}",
            listed.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(resource: &str, object: Value, old: Option<Value>) -> Vec<String> {
        validate(resource, &object, old.as_ref())
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn rules_need_verbs_and_targets_and_roles_no_urls() {
        let found = messages(
            "roles",
            json!({"rules": [{"verbs": [], "apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "nonResourceURLs": ["/x"]}, {"verbs": ["get"]}]}),
            None,
        );
        assert_eq!(
            found,
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[1].nonResourceURLs: Invalid value: []string{\"/x\"}: namespaced rules cannot apply to non-resource URLs",
                "rules[2].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[2].resources: Required value: resource rules must supply at least one resource",
            ]
        );
        assert!(
            messages(
                "clusterroles",
                json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]}),
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn bindings_check_role_refs_and_subjects() {
        let mut binding = json!({
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Robot", "name": "x"}],
        });
        normalize("ClusterRoleBinding", &mut binding).unwrap();
        assert_eq!(
            messages("clusterrolebindings", binding.clone(), None),
            [
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[0].namespace: Required value",
                "subjects[1].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
            ]
        );
        let mut changed = binding.clone();
        changed["roleRef"]["name"] = json!("other");
        assert!(
            messages("rolebindings", changed, Some(binding))
                .contains(&"roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"other\"}: cannot change roleRef".to_owned())
        );
    }

    #[test]
    fn normalizing_defaults_groups_and_refuses_wrong_types() {
        let mut binding = json!({"roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "User", "name": "bob"}, {"kind": "ServiceAccount", "name": "sa"}]});
        normalize("RoleBinding", &mut binding).unwrap();
        assert_eq!(binding["roleRef"]["apiGroup"], GROUP);
        assert_eq!(binding["subjects"][0]["apiGroup"], GROUP);
        assert!(binding["subjects"][1].get("apiGroup").is_none());
        let mut role = json!({"rules": [{"verbs": "get"}]});
        let error = normalize("Role", &mut role).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            error.message.starts_with(
                "Role in version \"v1\" cannot be handled as a Role: json: cannot unmarshal string"
            ),
            "{}",
            error.message
        );
    }
}
