//! The ClusterRole aggregation controller, run at once instead of in the
//! background: every ClusterRole with an `aggregationRule` gets, as its
//! `rules`, the union of the rules of the ClusterRoles its selectors match
//! (kube-controller-manager's `clusterrole-aggregation`). It writes only the
//! `rules` of aggregated ClusterRoles, and only when they change.

use serde_json::{Map, Value};

use super::rules::{Rule, parse_rules};
use crate::object::meta_mut;
use crate::store::{CLUSTER_ROLES_KEY, State};

/// Passes before giving up on roles that aggregate each other in a circle;
/// every chain of aggregation the defaults use settles in two.
const MAX_PASSES: usize = 8;

/// Bring every aggregated ClusterRole's rules up to date.
pub(crate) fn reconcile(state: &mut State) {
    for _ in 0..MAX_PASSES {
        let updates = outdated(state);
        if updates.is_empty() {
            return;
        }
        for mut role in updates {
            if let Some(meta) = meta_mut(&mut role) {
                meta.remove("resourceVersion");
            }
            state.put(CLUSTER_ROLES_KEY, role);
        }
    }
}

/// The aggregated roles whose rules differ from what they aggregate, with
/// their new rules in place.
fn outdated(state: &State) -> Vec<Value> {
    let roles: Vec<&Value> = state
        .range(CLUSTER_ROLES_KEY, None, None)
        .map(|(_, role)| role.as_ref())
        .collect();
    let mut updates = Vec::new();
    for role in &roles {
        let Some(selectors) = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
        else {
            continue;
        };
        let name = crate::object::meta_str(role, "name");
        let mut rules: Vec<Rule> = Vec::new();
        // As upstream: selector by selector, matching roles by name (the
        // range is in name order), each rule once.
        for selector in selectors {
            for other in &roles {
                if crate::object::meta_str(other, "name") == name || !matches(selector, other) {
                    continue;
                }
                for rule in parse_rules(other.get("rules")).unwrap_or_default() {
                    if !rules.contains(&rule) {
                        rules.push(rule);
                    }
                }
            }
        }
        let current = parse_rules(role.get("rules")).unwrap_or_default();
        if current != rules {
            let mut updated = (*role).clone();
            updated["rules"] = Value::Array(rules.iter().map(Rule::to_json).collect());
            updates.push(updated);
        }
    }
    updates
}

/// Whether a `LabelSelector` (matchLabels and matchExpressions) selects the
/// object; an empty selector selects everything, a malformed one nothing.
pub(crate) fn matches(selector: &Value, object: &Value) -> bool {
    let empty = Map::new();
    let labels = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let label = |key: &str| labels.get(key).and_then(Value::as_str);
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let labels_ok = match_labels
        .iter()
        .all(|(key, want)| want.as_str().is_some_and(|want| label(key) == Some(want)));
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    let expressions_ok = expressions.into_iter().flatten().all(|expression| {
        let key = expression.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = expression
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let have = label(key);
        match expression.get("operator").and_then(Value::as_str) {
            Some("In") => have.is_some_and(|h| values.contains(&h)),
            Some("NotIn") => have.is_none_or(|h| !values.contains(&h)),
            Some("Exists") => have.is_some(),
            Some("DoesNotExist") => have.is_none(),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}, "rules": rules})
    }

    #[test]
    fn aggregated_roles_gather_the_rules_of_the_roles_they_select_transitively() {
        let mut state = State::new(100);
        let get = |r: &str| json!([{"verbs": ["get"], "apiGroups": [""], "resources": [r]}]);
        let mut view = role("view", json!({"agg-edit": "true"}), json!([]));
        view["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {"agg-view": "true"}}]});
        let mut edit = role("edit", json!({}), json!([]));
        edit["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {"agg-edit": "true"}}]});
        for object in [
            view,
            edit,
            role("a", json!({"agg-view": "true"}), get("pods")),
            role("b", json!({"agg-view": "true"}), get("pods")),
            role("c", json!({"agg-view": "false"}), get("secrets")),
        ] {
            state.put(CLUSTER_ROLES_KEY, object);
        }
        reconcile(&mut state);
        let rules = |name: &str| state.get(CLUSTER_ROLES_KEY, "", name).unwrap()["rules"].clone();
        assert_eq!(rules("view"), get("pods"), "each rule once, not c's");
        assert_eq!(
            rules("edit"),
            get("pods"),
            "edit aggregates view's aggregate"
        );
        let rv = state.resource_version();
        reconcile(&mut state);
        assert_eq!(state.resource_version(), rv, "nothing changes twice");
    }

    #[test]
    fn selectors_support_expressions() {
        let object = json!({"metadata": {"labels": {"tier": "web"}}});
        let selector = |e: Value| json!({"matchExpressions": [e]});
        assert!(matches(&json!({}), &object));
        assert!(matches(
            &selector(json!({"key": "tier", "operator": "In", "values": ["web"]})),
            &object
        ));
        assert!(!matches(
            &selector(json!({"key": "tier", "operator": "NotIn", "values": ["web"]})),
            &object
        ));
        assert!(matches(
            &selector(json!({"key": "x", "operator": "DoesNotExist"})),
            &object
        ));
        assert!(!matches(
            &selector(json!({"key": "x", "operator": "Exists"})),
            &object
        ));
        assert!(!matches(&json!({"matchLabels": {"tier": "db"}}), &object));
    }
}
