//! Label and field selectors, as `labelSelector` and `fieldSelector` query
//! parameters carry them. Pure.

use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::object::{label, meta_str};

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector plus field selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Selector {
    labels: Vec<Requirement>,
    /// (field, value, equal?) for metadata.name / metadata.namespace.
    fields: Vec<(String, String, bool)>,
}

impl Selector {
    pub(crate) fn parse(labels: Option<&str>, fields: Option<&str>) -> ApiResult<Self> {
        let mut selector = Self::default();
        for term in split_terms(labels.unwrap_or("")) {
            selector.labels.push(parse_requirement(&term)?);
        }
        for term in fields
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {term}"
                )));
            };
            let field = field.trim();
            if !matches!(field, "metadata.name" | "metadata.namespace") {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field} (only metadata.name and metadata.namespace)"
                )));
            }
            selector
                .fields
                .push((field.to_string(), value.trim().to_string(), equal));
        }
        Ok(selector)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let fields_ok = self.fields.iter().all(|(field, want, equal)| {
            let have = match field.as_str() {
                "metadata.name" => meta_str(obj, "name"),
                _ => meta_str(obj, "namespace"),
            };
            (have == want) == *equal
        });
        fields_ok
            && self.labels.iter().all(|r| match r {
                Requirement::Equals(k, v) => label(obj, k) == Some(v.as_str()),
                Requirement::NotEquals(k, v) => label(obj, k) != Some(v.as_str()),
                Requirement::In(k, vs) => label(obj, k).is_some_and(|l| vs.iter().any(|v| v == l)),
                Requirement::NotIn(k, vs) => {
                    label(obj, k).is_none_or(|l| vs.iter().all(|v| v != l))
                }
                Requirement::Exists(k) => label(obj, k).is_some(),
                Requirement::NotExists(k) => label(obj, k).is_none(),
            })
    }
}

/// Split on commas that are not inside parentheses.
fn split_terms(s: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    terms.push(current);
    terms
        .into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

fn parse_requirement(term: &str) -> ApiResult<Requirement> {
    let invalid = || ApiError::bad_request(format!("unable to parse requirement: {term}"));
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::NotExists(key.trim().to_string()));
    }
    for (op, set) in [(" notin ", false), (" in ", true)] {
        if let Some((key, values)) = term.split_once(op) {
            let values = values.trim();
            let inner = values
                .strip_prefix('(')
                .and_then(|v| v.strip_suffix(')'))
                .ok_or_else(invalid)?;
            let list = inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            let key = key.trim().to_string();
            return Ok(if set {
                Requirement::In(key, list)
            } else {
                Requirement::NotIn(key, list)
            });
        }
    }
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Requirement::NotEquals(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Requirement::Equals(k.trim().into(), v.trim().into()));
    }
    if term.contains(|c: char| c.is_whitespace() || "()<>".contains(c)) {
        return Err(invalid());
    }
    Ok(Requirement::Exists(term.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn set_based_and_equality_selectors_combine() {
        let s = Selector::parse(
            Some("app=web,tier in (front, back),!legacy,env!=prod,team"),
            None,
        )
        .unwrap();
        assert!(s.matches(&obj(json!({"app": "web", "tier": "front", "team": "x"}))));
        assert!(!s.matches(&obj(json!({"app": "web", "tier": "db", "team": "x"}))));
        assert!(!s.matches(&obj(
            json!({"app": "web", "tier": "front", "team": "x", "legacy": "1"})
        )));
        assert!(!s.matches(&obj(
            json!({"app": "web", "tier": "front", "team": "x", "env": "prod"})
        )));
        assert!(!s.matches(&obj(json!({"app": "web", "tier": "front"}))));
    }

    #[test]
    fn field_selectors_match_name_and_namespace() {
        let s = Selector::parse(None, Some("metadata.name=a,metadata.namespace!=other")).unwrap();
        assert!(s.matches(&obj(json!({}))));
        assert!(Selector::parse(None, Some("spec.x=1")).is_err());
        let notin = Selector::parse(Some("tier notin (db)"), None).unwrap();
        assert!(notin.matches(&obj(json!({}))));
    }
}
