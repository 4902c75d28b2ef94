//! Typed reads of untrusted JSON that carry their path. A value of the
//! wrong type is a refusal naming the field, never treated as absent: a
//! `privileged: "true"` must not slip through as "not set". Never panics and
//! never recurses on the input's own depth.

use serde_json::{Map, Value};

use super::violation::{Violation, reasons};

/// A place in the request: the value there (if any) and its path.
#[derive(Clone, Debug)]
pub(crate) struct Node<'a> {
    pub(crate) value: Option<&'a Value>,
    pub(crate) path: String,
}

/// An object read from a [`Node`], whose fields are again nodes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Obj<'a, 'p> {
    pub(crate) map: &'a Map<String, Value>,
    pub(crate) path: &'p str,
}

impl<'a> Node<'a> {
    pub(crate) fn new(value: &'a Value, path: impl Into<String>) -> Self {
        Node {
            value: Some(value),
            path: path.into(),
        }
    }

    /// Absent and `null` are both "not set", as the API server reads them.
    fn present(&self) -> Option<&'a Value> {
        self.value.filter(|v| !v.is_null())
    }

    fn wrong_type(&self, expected: &str) -> Violation {
        let found = match self.value {
            Some(Value::Bool(_)) => "a boolean",
            Some(Value::Number(_)) => "a number",
            Some(Value::String(_)) => "a string",
            Some(Value::Array(_)) => "a list",
            Some(Value::Object(_)) => "an object",
            Some(Value::Null) | None => "nothing",
        };
        let what = if self.path.is_empty() {
            "the workload"
        } else {
            &self.path
        };
        Violation::new(
            reasons::INVALID_MANIFEST,
            &self.path,
            format!("{what} must be {expected}, not {found}"),
        )
    }

    pub(crate) fn object(&self) -> Result<Option<Obj<'a, '_>>, Violation> {
        match self.present() {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Obj {
                map,
                path: &self.path,
            })),
            Some(_) => Err(self.wrong_type("an object")),
        }
    }

    /// The elements of a list, each with its `[i]` path.
    pub(crate) fn list(&self) -> Result<Vec<Node<'a>>, Violation> {
        match self.present() {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, item)| Node::new(item, format!("{}[{i}]", self.path)))
                .collect()),
            Some(_) => Err(self.wrong_type("a list")),
        }
    }

    pub(crate) fn str(&self) -> Result<Option<&'a str>, Violation> {
        match self.present() {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(self.wrong_type("a string")),
        }
    }

    /// A string that must be there and not be empty.
    pub(crate) fn required_str(&self) -> Result<&'a str, Violation> {
        match self.str()? {
            Some(text) if !text.is_empty() => Ok(text),
            _ => Err(self.wrong_type("a non-empty string")),
        }
    }

    pub(crate) fn bool(&self) -> Result<Option<bool>, Violation> {
        match self.present() {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.wrong_type("a boolean")),
        }
    }

    pub(crate) fn int(&self) -> Result<Option<i64>, Violation> {
        match self.present() {
            None => Ok(None),
            Some(Value::Number(n)) => n
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.wrong_type("a whole number")),
            Some(_) => Err(self.wrong_type("a whole number")),
        }
    }

    /// A quantity as Kubernetes writes one: a string (`"500m"`) or a number.
    pub(crate) fn quantity(&self) -> Result<Option<f64>, Violation> {
        let parsed = match self.present() {
            None => return Ok(None),
            Some(Value::String(text)) => crate::units::quantity::parse(text),
            Some(Value::Number(n)) => n.as_f64().filter(|v| v.is_finite() && *v >= 0.0),
            Some(_) => None,
        };
        parsed
            .map(Some)
            .ok_or_else(|| self.wrong_type("a Kubernetes quantity such as \"500m\" or \"1Gi\""))
    }
}

impl<'a> Obj<'a, '_> {
    pub(crate) fn get(&self, key: &str) -> Node<'a> {
        let path = if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        };
        Node {
            value: self.map.get(key),
            path,
        }
    }

    /// The object's keys that are set (not `null`), in a stable order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &'a str> {
        self.map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, _)| k.as_str())
    }
}

/// The object at `node`, or an empty one when it is absent: most of a pod
/// spec is optional.
pub(crate) fn object_or_empty<'a, 'p>(node: &'p Node<'a>) -> Result<Obj<'a, 'p>, Violation> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    Ok(node.object()?.unwrap_or(Obj {
        map: EMPTY.get_or_init(Map::new),
        path: &node.path,
    }))
}
