//! Server-side apply: merging an applied configuration into an object and the
//! `managedFields` bookkeeping that decides ownership and conflicts. Pure.
//!
//! Ownership is tracked per manager (and subresource) as a set of leaf field
//! paths, stored in the object's `metadata.managedFields` in the `FieldsV1`
//! format. Maps merge field by field. Lists whose items are all objects with a
//! string `name`, no two alike, are merged by that name (items are keyed
//! `k:{"name":..}`); every other list is atomic: it is one leaf, replaced as a whole. Only
//! `Apply` operations are recorded; plain updates and patches leave
//! `managedFields` unchanged and take no ownership.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::object::now;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Elem {
    Field(String),
    /// A list item, identified by its `name`.
    Key(String),
}

type Path = Vec<Elem>;

/// Which part of the object an apply addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The main resource; `status_separate` when status is a subresource.
    Main {
        status_separate: bool,
    },
    Status,
}

/// One manager's ownership record.
#[derive(Debug, Clone)]
struct Entry {
    raw: Map<String, Value>,
    manager: String,
    subresource: String,
    paths: BTreeSet<Path>,
}

/// A request to apply `config` as `manager`.
pub(crate) struct Apply<'a> {
    pub(crate) manager: &'a str,
    pub(crate) force: bool,
    pub(crate) scope: Scope,
    pub(crate) api_version: &'a str,
}

/// The fields (as `.spec.x`) another manager owns with a different value.
pub(crate) type Conflicts = Vec<(String, String)>;

impl Apply<'_> {
    /// Merge `applied` into `current` (an empty object when creating) and
    /// update ownership; `Err` lists the conflicts when not forced.
    pub(crate) fn run(&self, current: &Value, applied: &Value) -> Result<Value, Conflicts> {
        let config = self.owned_part(applied);
        let mut new_paths = BTreeSet::new();
        leaves(&config, &mut Vec::new(), &mut new_paths);
        let subresource = if self.scope == Scope::Status {
            "status"
        } else {
            ""
        };

        let mut entries = read_entries(current);
        let mut conflicts = Vec::new();
        for entry in entries
            .iter_mut()
            .filter(|e| !(e.manager == self.manager && e.subresource == subresource))
        {
            let clashing: Vec<Path> = entry
                .paths
                .intersection(&new_paths)
                .filter(|p| get(current, p) != get(&config, p))
                .cloned()
                .collect();
            for path in clashing {
                if self.force {
                    entry.paths.remove(&path);
                } else {
                    conflicts.push((entry.manager.clone(), display(&path)));
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(conflicts);
        }

        let previous: BTreeSet<Path> = entries
            .iter()
            .find(|e| e.manager == self.manager && e.subresource == subresource)
            .map(|e| e.paths.clone())
            .unwrap_or_default();
        let others: BTreeSet<&Path> = entries
            .iter()
            .filter(|e| !(e.manager == self.manager && e.subresource == subresource))
            .flat_map(|e| e.paths.iter())
            .collect();

        let mut result = current.clone();
        merge_apply(&mut result, &config);
        // A path that is still applied below (a list that became keyed) is
        // not dropped.
        let dropped: Vec<&Path> = previous
            .iter()
            .filter(|p| !new_paths.iter().any(|n| n.starts_with(p)) && !others.contains(p))
            .collect();
        // Item names last, so an item is found by name while its fields go.
        let (names, fields): (Vec<&Path>, Vec<&Path>) =
            dropped.into_iter().partition(|p| is_item_name(p));
        for path in fields.into_iter().chain(names) {
            remove_path(&mut result, path);
        }

        entries.retain(|e| !(e.manager == self.manager && e.subresource == subresource));
        let mut managed: Vec<Value> = entries
            .into_iter()
            .filter(|e| !e.paths.is_empty())
            .map(|e| {
                let mut raw = e.raw;
                raw.insert("fieldsV1".into(), encode(&e.paths));
                Value::Object(raw)
            })
            .collect();
        if !new_paths.is_empty() {
            let mut mine = json!({
                "manager": self.manager,
                "operation": "Apply",
                "apiVersion": self.api_version,
                "time": now(),
                "fieldsType": "FieldsV1",
                "fieldsV1": encode(&new_paths),
            });
            if !subresource.is_empty() {
                mine["subresource"] = json!(subresource);
            }
            managed.push(mine);
        }
        if let Some(meta) = result.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("managedFields".into(), Value::Array(managed));
        }
        Ok(result)
    }

    /// The part of an applied configuration whose fields can be owned.
    fn owned_part(&self, applied: &Value) -> Value {
        let mut config = Map::new();
        let Some(map) = applied.as_object() else {
            return Value::Object(config);
        };
        for (key, value) in map {
            let keep = match (key.as_str(), self.scope) {
                ("apiVersion" | "kind", _) => false,
                ("status", Scope::Status) => true,
                (_, Scope::Status) => false,
                ("status", Scope::Main { status_separate }) => !status_separate,
                _ => true,
            };
            if key == "metadata" && self.scope != Scope::Status {
                let mut meta = Map::new();
                for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
                    if let Some(v) = value.get(field).filter(|v| !v.is_null()) {
                        meta.insert(field.into(), v.clone());
                    }
                }
                if !meta.is_empty() {
                    config.insert(key.clone(), Value::Object(meta));
                }
            } else if keep && key != "metadata" {
                config.insert(key.clone(), value.clone());
            }
        }
        Value::Object(config)
    }
}

fn keyed(items: &[Value]) -> bool {
    let mut names = BTreeSet::new();
    !items.is_empty()
        && items
            .iter()
            .all(|i| item_name(i).is_some_and(|n| names.insert(n)))
}

fn item_name(item: &Value) -> Option<&str> {
    item.get("name").and_then(Value::as_str)
}

fn leaves(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                prefix.push(Elem::Field(key.clone()));
                leaves(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) if keyed(items) => {
            for item in items {
                prefix.push(Elem::Key(item_name(item).unwrap_or_default().to_string()));
                leaves(item, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

fn get<'a>(v: &'a Value, path: &[Elem]) -> Option<&'a Value> {
    path.iter().try_fold(v, |node, elem| match elem {
        Elem::Field(f) => node.get(f),
        Elem::Key(name) => node.as_array()?.iter().find(|i| item_name(i) == Some(name)),
    })
}

fn merge_apply(target: &mut Value, config: &Value) {
    match (target, config) {
        (Value::Object(t), Value::Object(c)) => {
            for (key, value) in c {
                match t.get_mut(key) {
                    Some(existing) => merge_apply(existing, value),
                    None => {
                        t.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(c))
            if keyed(c) && (t.is_empty() || keyed(t)) && t.iter().all(Value::is_object) =>
        {
            for item in c {
                match t.iter_mut().find(|e| item_name(e) == item_name(item)) {
                    Some(existing) => merge_apply(existing, item),
                    None => t.push(item.clone()),
                }
            }
        }
        (t, c) => *t = c.clone(),
    }
}

fn is_item_name(path: &[Elem]) -> bool {
    matches!(path, [.., Elem::Key(_), Elem::Field(f)] if f == "name")
}

/// Remove a leaf, then any map (or merged-by-name list) it leaves empty; a
/// list item goes when its `name` goes and nothing else is left in it.
fn remove_path(v: &mut Value, path: &[Elem]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    match (first, v) {
        (Elem::Field(f), Value::Object(map)) => {
            if rest.is_empty() {
                map.remove(f);
            } else if let Some(child) = map.get_mut(f) {
                remove_path(child, rest);
                let emptied_list = matches!(rest.first(), Some(Elem::Key(_)))
                    && child.as_array().is_some_and(Vec::is_empty);
                if emptied_list || child.as_object().is_some_and(Map::is_empty) {
                    map.remove(f);
                }
            }
        }
        // A keyed path means nothing in a list that is atomic now.
        (Elem::Key(name), Value::Array(items)) if keyed(items) => {
            let Some(i) = items.iter().position(|e| item_name(e) == Some(name)) else {
                return;
            };
            let only_name = items[i]
                .as_object()
                .is_some_and(|m| m.keys().all(|k| k == "name"));
            if is_item_name(path) && only_name {
                items.remove(i);
            } else if !is_item_name(path) {
                remove_path(&mut items[i], rest);
            }
        }
        _ => {}
    }
}

/// `.spec.containers[name="app"].image`, as conflicts are reported.
fn display(path: &[Elem]) -> String {
    path.iter()
        .map(|e| match e {
            Elem::Field(f) => format!(".{f}"),
            Elem::Key(n) => format!("[name=\"{n}\"]"),
        })
        .collect()
}

fn encode(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in paths {
        let mut node = &mut root;
        for elem in path {
            let key = match elem {
                Elem::Field(f) => format!("f:{f}"),
                Elem::Key(n) => format!("k:{}", json!({"name": n})),
            };
            let child = node.entry(key).or_insert_with(|| Value::Object(Map::new()));
            if matches!(elem, Elem::Key(_))
                && let Some(m) = child.as_object_mut()
            {
                m.entry(".").or_insert_with(|| Value::Object(Map::new()));
            }
            let Some(next) = child.as_object_mut() else {
                break;
            };
            node = next;
        }
    }
    Value::Object(root)
}

fn decode(fields: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    let Some(map) = fields.as_object() else {
        return;
    };
    let children: Vec<(&String, &Value)> = map.iter().filter(|(k, _)| k.as_str() != ".").collect();
    if children.is_empty() {
        if !prefix.is_empty() && !matches!(prefix.last(), Some(Elem::Key(_))) {
            out.insert(prefix.clone());
        }
        return;
    }
    for (key, child) in children {
        let elem = if let Some(f) = key.strip_prefix("f:") {
            Elem::Field(f.to_string())
        } else if let Some(k) = key.strip_prefix("k:") {
            let name = serde_json::from_str::<Value>(k)
                .ok()
                .and_then(|v| v.get("name").and_then(Value::as_str).map(String::from));
            match name {
                Some(n) => Elem::Key(n),
                None => continue,
            }
        } else {
            continue;
        };
        prefix.push(elem);
        decode(child, prefix, out);
        prefix.pop();
    }
}

fn read_entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let raw = e.as_object()?.clone();
            let mut paths = BTreeSet::new();
            decode(
                raw.get("fieldsV1").unwrap_or(&Value::Null),
                &mut Vec::new(),
                &mut paths,
            );
            Some(Entry {
                manager: raw
                    .get("manager")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                subresource: raw
                    .get("subresource")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                raw,
                paths,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(
        manager: &str,
        force: bool,
        current: &Value,
        applied: Value,
    ) -> Result<Value, Conflicts> {
        Apply {
            manager,
            force,
            scope: Scope::Main {
                status_separate: true,
            },
            api_version: "v1",
        }
        .run(current, &applied)
    }

    #[test]
    fn disjoint_managers_keep_their_fields_and_dropped_fields_go() {
        let base = json!({"metadata": {"name": "a"}});
        let one = apply(
            "a",
            false,
            &base,
            json!({"spec": {"x": 1, "list": [{"name": "c", "image": "i"}]}}),
        )
        .unwrap();
        let two = apply("b", false, &one, json!({"spec": {"y": 2}})).unwrap();
        assert_eq!(
            two["spec"],
            json!({"x": 1, "y": 2, "list": [{"name": "c", "image": "i"}]})
        );
        let three = apply("a", false, &two, json!({"spec": {"x": 1}})).unwrap();
        assert_eq!(three["spec"], json!({"x": 1, "y": 2}));
        assert_eq!(
            three["metadata"]["managedFields"].as_array().map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn a_list_with_repeated_names_is_atomic_and_kept_as_applied() {
        let base = json!({"metadata": {"name": "a"}});
        let item = |kind: &str| json!({"kind": kind, "name": "web"});
        let lists = [
            json!([item("ServiceAccount")]),
            json!([item("ServiceAccount"), item("Service")]),
            json!([item("ServiceAccount"), item("Service"), item("Deployment")]),
            json!([item("Deployment")]),
        ];
        let mut current = base;
        for list in lists {
            current = apply("a", true, &current, json!({"spec": {"applied": list}})).unwrap();
            assert_eq!(current["spec"]["applied"], list);
        }
    }

    #[test]
    fn a_different_value_on_a_field_owned_by_another_manager_conflicts() {
        let base = json!({"metadata": {"name": "a"}});
        let one = apply("a", false, &base, json!({"spec": {"x": 1}})).unwrap();
        let conflicts = apply("b", false, &one, json!({"spec": {"x": 2}})).unwrap_err();
        assert_eq!(conflicts, vec![("a".to_string(), ".spec.x".to_string())]);
        assert!(
            apply("b", false, &one, json!({"spec": {"x": 1}})).is_ok(),
            "same value is shared"
        );
        let forced = apply("b", true, &one, json!({"spec": {"x": 2}})).unwrap();
        assert_eq!(forced["spec"]["x"], 2);
        let back = apply("a", false, &forced, json!({"spec": {"z": 1}})).unwrap();
        assert_eq!(
            back["spec"],
            json!({"x": 2, "z": 1}),
            "a lost x, so it is kept"
        );
    }
}
