//! RBAC policy rules: reading them from objects, matching a request against
//! them, and deciding whether one set of rules covers another (for the
//! escalation check), with upstream's wording for what is missing. Pure: it
//! must never read the cluster's state.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use super::attributes::Attributes;

/// One `PolicyRule`. Empty lists are absent fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) verbs: Vec<String>,
    pub(crate) api_groups: Vec<String>,
    pub(crate) resources: Vec<String>,
    pub(crate) resource_names: Vec<String>,
    pub(crate) non_resource_urls: Vec<String>,
}

const FIELDS: [&str; 5] = [
    "verbs",
    "apiGroups",
    "resources",
    "resourceNames",
    "nonResourceURLs",
];

impl Rule {
    /// A rule from its JSON form; an error says which field has the wrong
    /// type, in the words of Go's JSON decoder.
    pub(crate) fn parse(value: &Value) -> Result<Self, String> {
        let Value::Object(map) = value else {
            return Err(format!(
                "json: cannot unmarshal {} into Go struct field .rules of type v1.PolicyRule",
                json_type(value)
            ));
        };
        Ok(Self {
            verbs: strings(map, "verbs")?,
            api_groups: strings(map, "apiGroups")?,
            resources: strings(map, "resources")?,
            resource_names: strings(map, "resourceNames")?,
            non_resource_urls: strings(map, "nonResourceURLs")?,
        })
    }

    /// The JSON form, as the API server serializes a `PolicyRule`.
    pub(crate) fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("verbs".into(), json!(self.verbs));
        for (field, list) in FIELDS.iter().skip(1).zip(self.lists().into_iter().skip(1)) {
            if !list.is_empty() {
                map.insert((*field).into(), json!(list));
            }
        }
        Value::Object(map)
    }

    fn lists(&self) -> [&Vec<String>; 5] {
        [
            &self.verbs,
            &self.api_groups,
            &self.resources,
            &self.resource_names,
            &self.non_resource_urls,
        ]
    }

    /// Whether this rule allows the request (upstream's `RuleAllows`).
    pub(crate) fn allows(&self, a: &Attributes) -> bool {
        if !has_or_all(&self.verbs, &a.verb) {
            return false;
        }
        if !a.resource_request {
            return self
                .non_resource_urls
                .iter()
                .any(|url| url_covers(url, &a.path));
        }
        has_or_all(&self.api_groups, &a.api_group)
            && self.resource_matches(&a.resource, &a.subresource)
            && (self.resource_names.is_empty() || self.resource_names.contains(&a.name))
    }

    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|rule| {
            if rule == "*" {
                return true;
            }
            if subresource.is_empty() {
                return rule == resource;
            }
            // `resource/subresource` exactly, or `*/subresource`.
            rule.strip_suffix(subresource)
                .and_then(|head| head.strip_suffix('/'))
                .is_some_and(|head| head == resource || head == "*")
        })
    }
}

/// The rules of an object (`rules` of a Role or ClusterRole).
pub(crate) fn parse_rules(value: Option<&Value>) -> Result<Vec<Rule>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(Rule::parse).collect(),
        Some(other) => Err(format!(
            "json: cannot unmarshal {} into Go struct field .rules of type []v1.PolicyRule",
            json_type(other)
        )),
    }
}

fn strings(map: &Map<String, Value>, field: &str) -> Result<Vec<String>, String> {
    let wrong = |v: &Value| {
        format!(
            "json: cannot unmarshal {} into Go struct field PolicyRule.rules.{field} of type []string",
            json_type(v)
        )
    };
    match map.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| wrong(item)))
            .collect(),
        Some(other) => Err(wrong(other)),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_or_all(set: &[String], item: &str) -> bool {
    set.iter().any(|s| s == "*" || s == item)
}

/// `/foo/*` covers every path under `/foo/`; `*` covers every path.
fn url_covers(owner: &str, path: &str) -> bool {
    owner == path
        || owner
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// The parts of `servant` that no rule of `owner` covers, broken down to one
/// verb, group, resource and name each (upstream's `Covers`).
pub(crate) fn uncovered(owner: &[Rule], servant: &[Rule]) -> Vec<Rule> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| covers(o, sub)))
        .collect()
}

fn breakdown(rule: &Rule) -> Vec<Rule> {
    let one = |s: &String| vec![s.clone()];
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let base = Rule {
                    verbs: one(verb),
                    api_groups: one(group),
                    resources: one(resource),
                    ..Rule::default()
                };
                if rule.resource_names.is_empty() {
                    out.push(base);
                } else {
                    out.extend(rule.resource_names.iter().map(|name| Rule {
                        resource_names: one(name),
                        ..base.clone()
                    }));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(Rule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..Rule::default()
            });
        }
    }
    out
}

/// Whether `owner` grants everything `sub` does (upstream's `ruleCovers`).
fn covers(owner: &Rule, sub: &Rule) -> bool {
    let all = |set: &[String], wanted: &[String]| wanted.iter().all(|w| set.contains(w));
    let verbs = owner.verbs.iter().any(|v| v == "*") || all(&owner.verbs, &sub.verbs);
    let groups =
        owner.api_groups.iter().any(|g| g == "*") || all(&owner.api_groups, &sub.api_groups);
    let resources = owner.resources.iter().any(|r| r == "*")
        || sub.resources.iter().all(|wanted| {
            owner.resources.contains(wanted)
                || wanted
                    .split_once('/')
                    .is_some_and(|(_, sub)| owner.resources.contains(&format!("*/{sub}")))
        });
    let urls = sub
        .non_resource_urls
        .iter()
        .all(|path| owner.non_resource_urls.iter().any(|o| url_covers(o, path)));
    let names = owner.resource_names.is_empty()
        || (!sub.resource_names.is_empty() && all(&owner.resource_names, &sub.resource_names));
    verbs && groups && resources && urls && names
}

/// Missing rules grouped as upstream's `CompactRules` does: simple rules (one
/// group, one resource, at most one name) of the same target merge verbs.
pub(crate) fn compact(rules: Vec<Rule>) -> Vec<Rule> {
    let mut out = Vec::new();
    let mut simple: HashMap<(String, String, Option<String>), usize> = HashMap::new();
    for rule in rules {
        let is_simple = rule.api_groups.len() == 1
            && rule.resources.len() == 1
            && rule.resource_names.len() <= 1
            && rule.non_resource_urls.is_empty();
        if !is_simple {
            out.push(rule);
            continue;
        }
        let key = (
            rule.api_groups[0].clone(),
            rule.resources[0].clone(),
            rule.resource_names.first().cloned(),
        );
        match simple.get(&key) {
            Some(&i) => {
                let existing: &mut Rule = &mut out[i];
                for verb in rule.verbs {
                    if !existing.verbs.contains(&verb) {
                        existing.verbs.push(verb);
                    }
                }
            }
            None => {
                simple.insert(key, out.len());
                out.push(rule);
            }
        }
    }
    out
}

/// Upstream's `CompactString`: `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`.
pub(crate) fn compact_string(rule: &Rule) -> String {
    let parts = [
        ("APIGroups", &rule.api_groups),
        ("Resources", &rule.resources),
        ("NonResourceURLs", &rule.non_resource_urls),
        ("ResourceNames", &rule.resource_names),
        ("Verbs", &rule.verbs),
    ];
    let shown: Vec<String> = parts
        .iter()
        .filter(|(_, list)| !list.is_empty())
        .map(|(name, list)| format!("{name}:{}", go_quoted_list(list)))
        .collect();
    format!("{{{}}}", shown.join(", "))
}

/// A list as Go's `%q` prints a `[]string`: `["a" "b"]`.
pub(crate) fn go_quoted_list(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// The sorted, distinct descriptions of missing rules, one a line.
pub(crate) fn describe_missing(missing: Vec<Rule>) -> String {
    let lines: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
    lines.into_iter().collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(v: Value) -> Rule {
        Rule::parse(&v).unwrap()
    }

    fn request(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        let mut a = Attributes::resource(verb, group, resource, "ns", name);
        a.subresource = sub.into();
        a
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let r = rule(
            json!({"verbs": ["get", "list"], "apiGroups": ["apps"], "resources": ["deployments", "*/scale"], "resourceNames": ["web"]}),
        );
        assert!(r.allows(&request("get", "apps", "deployments", "", "web")));
        assert!(r.allows(&request("get", "apps", "statefulsets", "scale", "web")));
        assert!(!r.allows(&request("get", "apps", "deployments", "", "db")));
        assert!(
            !r.allows(&request("list", "apps", "deployments", "", "")),
            "a list has no name"
        );
        assert!(!r.allows(&request("get", "apps", "deployments", "status", "web")));
        assert!(!r.allows(&request("get", "", "deployments", "", "web")));
        assert!(!r.allows(&request("delete", "apps", "deployments", "", "web")));
        let all = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        assert!(all.allows(&request("escalate", "x.io", "things", "sub", "")));
        let sub = rule(
            json!({"verbs": ["update"], "apiGroups": [""], "resources": ["deployments/scale"]}),
        );
        assert!(sub.allows(&request("update", "", "deployments", "scale", "x")));
        assert!(!sub.allows(&request("update", "", "deployments", "", "x")));
        assert!(!sub.allows(&request("update", "", "statefulsets", "scale", "x")));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_trailing_star() {
        let r = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/apis/*", "/version"]}));
        let path = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Attributes::default()
        };
        assert!(r.allows(&path("/apis/apps/v1")));
        assert!(r.allows(&path("/version")));
        assert!(!r.allows(&path("/version/x")));
        assert!(!r.allows(&path("/apis")));
        assert!(
            !r.allows(&request("get", "", "pods", "", "")),
            "not a resource rule"
        );
    }

    #[test]
    fn wrong_field_types_are_decoding_errors() {
        let error = Rule::parse(&json!({"verbs": "get"})).unwrap_err();
        assert_eq!(
            error,
            "json: cannot unmarshal string into Go struct field PolicyRule.rules.verbs of type []string"
        );
        assert_eq!(
            rule(json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]})).to_json(),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]})
        );
    }

    #[test]
    fn covering_follows_upstream() {
        let owner = [
            rule(
                json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps", "*/status"]}),
            ),
            rule(
                json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}),
            ),
            rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]})),
        ];
        let covered = |r: Value| uncovered(&owner, &[rule(r)]).is_empty();
        assert!(covered(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps", "pods/status"]})
        ));
        assert!(covered(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]})
        ));
        assert!(!covered(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]})
        ));
        assert!(!covered(
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]})
        ));
        assert!(covered(
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz/ready"]})
        ));
        assert!(!covered(
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz"]})
        ));
        let missing = uncovered(
            &owner,
            &[rule(
                json!({"verbs": ["get", "delete", "create"], "apiGroups": [""], "resources": ["configmaps", "secrets"]}),
            )],
        );
        assert_eq!(
            describe_missing(missing),
            "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\" \"create\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\" \"create\"]}"
        );
    }
}
