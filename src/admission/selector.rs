//! Label selectors of the objects that travel beside a workload, and the
//! one rule they all meet: a selector concerns the moved workload only when
//! it holds the Deployment's own selector (so it can pick no pod the
//! Deployment does not own) and matches the pod template's labels (so it
//! picks the workload's pods at all). Pure; a malformed selector never
//! matches.

use std::collections::BTreeMap;

use serde_json::Value;

/// A label selector as `policy/v1` and `networking.k8s.io/v1` write one; a
/// Service's plain `selector` map reads as `matchLabels` alone.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Selector<'a> {
    pub(crate) labels: BTreeMap<&'a str, &'a str>,
    pub(crate) expressions: Vec<&'a Value>,
}

impl<'a> Selector<'a> {
    /// A `LabelSelector` object; `None` when it is not one.
    pub(crate) fn label_selector(value: &'a Value) -> Option<Self> {
        let object = value.as_object()?;
        let labels = match object.get("matchLabels") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(map) => string_map(map)?,
        };
        let expressions = match object.get("matchExpressions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list.iter().collect(),
            Some(_) => return None,
        };
        Some(Selector {
            labels,
            expressions,
        })
    }

    /// A Service's `spec.selector` map; `None` when it is not one.
    pub(crate) fn service(value: &'a Value) -> Option<Self> {
        Some(Selector {
            labels: string_map(value)?,
            expressions: Vec::new(),
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.expressions.is_empty()
    }

    /// Whether a pod with `labels` is selected; a malformed expression
    /// selects nothing.
    pub(crate) fn matches(&self, labels: &BTreeMap<&str, &str>) -> bool {
        self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self
                .expressions
                .iter()
                .all(|e| expression_matches(e, labels) == Some(true))
    }

    /// The first part of `owner` (the Deployment's selector) this selector
    /// lacks, as `key=value` or an expression: `None` when it holds all of
    /// it, so that it selects a subset of the Deployment's pods.
    pub(crate) fn lacks(&self, owner: &Selector<'_>) -> Option<String> {
        for (key, value) in &owner.labels {
            if self.labels.get(key) != Some(value) {
                return Some(format!("{key}={value}"));
            }
        }
        owner
            .expressions
            .iter()
            .find(|e| !self.expressions.contains(e))
            .map(|e| e.to_string())
    }
}

/// A JSON object of strings, as labels are.
pub(crate) fn string_map(value: &Value) -> Option<BTreeMap<&str, &str>> {
    value
        .as_object()?
        .iter()
        .map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        .collect()
}

fn expression_matches(expression: &Value, labels: &BTreeMap<&str, &str>) -> Option<bool> {
    let key = expression.get("key")?.as_str()?;
    let values = || -> Option<Vec<&str>> {
        match expression.get("values") {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(list) => list.as_array()?.iter().map(Value::as_str).collect(),
        }
    };
    let found = labels.get(key);
    match expression.get("operator")?.as_str()? {
        "In" => Some(found.is_some_and(|v| values().is_some_and(|list| list.contains(v)))),
        "NotIn" => {
            let list = values()?;
            Some(found.is_none_or(|v| !list.contains(v)))
        }
        "Exists" => Some(found.is_some()),
        "DoesNotExist" => Some(found.is_none()),
        _ => None,
    }
}

/// What of a Deployment its dependents are judged against.
pub(crate) struct Owner<'a> {
    /// `metadata.name`.
    pub(crate) name: &'a str,
    /// `spec.selector`.
    pub(crate) selector: Selector<'a>,
    /// `spec.template.metadata.labels`.
    pub(crate) pod_labels: BTreeMap<&'a str, &'a str>,
}

impl<'a> Owner<'a> {
    /// Reads the Deployment; `None` when its name, selector or pod labels
    /// are malformed (the workload's own review names the field).
    pub(crate) fn read(workload: &'a Value) -> Option<Self> {
        let name = workload.pointer("/metadata/name")?.as_str()?;
        let selector = Selector::label_selector(workload.pointer("/spec/selector")?)?;
        let pod_labels = match workload.pointer("/spec/template/metadata/labels") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(labels) => string_map(labels)?,
        };
        Some(Owner {
            name,
            selector,
            pod_labels,
        })
    }

    /// Why `selector` may select pods other than the workload's, or none
    /// of them; `None` when it concerns the workload only.
    pub(crate) fn stray(&self, selector: &Selector<'_>) -> Option<String> {
        if self.selector.is_empty() {
            return Some("the Deployment's own selector is empty, so no selector can be told to pick only its pods".into());
        }
        if let Some(missing) = selector.lacks(&self.selector) {
            return Some(format!(
                "it does not hold the Deployment's selector term {missing}, so it may select pods that are not the moved workload's"
            ));
        }
        if !selector.matches(&self.pod_labels) {
            return Some("it selects none of the moved workload's pods".into());
        }
        None
    }
}

/// Whether `selector` (of a travelling kind: a Service's `spec.selector`
/// with `service`, else a `LabelSelector`) concerns only the pods of
/// `workload`: what the sender carries and the receiver admits.
pub fn selects_only_workload(workload: &Value, selector: &Value, service: bool) -> bool {
    let Some(owner) = Owner::read(workload) else {
        return false;
    };
    let selector = if service {
        Selector::service(selector)
    } else {
        Selector::label_selector(selector)
    };
    selector.is_some_and(|s| owner.stray(&s).is_none())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn workload() -> Value {
        json!({"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}}}})
    }

    #[test]
    fn a_selector_concerns_the_workload_only_when_it_holds_its_selector_and_picks_its_pods() {
        let cases = [
            (json!({"matchLabels": {"app": "web"}}), true),
            (
                json!({"matchLabels": {"app": "web", "tier": "front"}}),
                true,
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}),
                true,
            ),
            (json!({}), false),
            (json!({"matchLabels": {"tier": "front"}}), false),
            (json!({"matchLabels": {"app": "db"}}), false),
            (
                json!({"matchLabels": {"app": "web", "tier": "back"}}),
                false,
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
                false,
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Bogus"}]}),
                false,
            ),
            (json!({"matchLabels": {"app": 1}}), false),
            (json!("app=web"), false),
        ];
        for (selector, expected) in cases {
            assert_eq!(
                selects_only_workload(&workload(), &selector, false),
                expected,
                "{selector}"
            );
        }
    }

    #[test]
    fn a_service_selector_is_a_plain_map() {
        assert!(selects_only_workload(
            &workload(),
            &json!({"app": "web"}),
            true
        ));
        assert!(!selects_only_workload(&workload(), &json!({}), true));
        assert!(!selects_only_workload(
            &workload(),
            &json!({"tier": "front"}),
            true
        ));
    }

    #[test]
    fn expressions_read_as_kubernetes_reads_them() {
        let labels: BTreeMap<&str, &str> = [("a", "1")].into();
        let e = |v: Value| expression_matches(&v, &labels);
        assert_eq!(
            e(json!({"key": "a", "operator": "In", "values": ["1", "2"]})),
            Some(true)
        );
        assert_eq!(
            e(json!({"key": "a", "operator": "NotIn", "values": ["1"]})),
            Some(false)
        );
        assert_eq!(
            e(json!({"key": "b", "operator": "NotIn", "values": ["1"]})),
            Some(true)
        );
        assert_eq!(e(json!({"key": "a", "operator": "Exists"})), Some(true));
        assert_eq!(
            e(json!({"key": "a", "operator": "DoesNotExist"})),
            Some(false)
        );
        assert_eq!(e(json!({"operator": "Exists"})), None);
    }
}
