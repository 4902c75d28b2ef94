//! The protobuf schema of the built-in kinds the sandbox serves: field
//! numbers, JSON names and types, parsed once from `messages.txt`, which
//! `scripts/sandbox-proto-schema` generates from upstream's `generated.proto`
//! files and Go types. Pure data; it must never hold per-request state.
//!
//! The format of `messages.txt`, one item a line (`#` starts a comment):
//!
//! ```text
//! kind GROUP VERSION KIND MESSAGE     GROUP is `-` for the core group
//! message NAME [list]                 `list`: in JSON an array of its one repeated field
//!   NUMBER JSON TYPE [repeated] [zero]
//! ```
//!
//! JSON is the field's JSON name, `*` when its message is inlined into the
//! parent's JSON object (Go's embedded structs), `-` when it has none. TYPE is
//! a scalar (`string bytes bool int32 int64 uint32 uint64 double float`), a
//! message name or `map<K,V>`. `zero` keeps a zero value when decoding: the Go
//! field is a pointer (so a sent zero means something) or lacks `omitempty`.

use std::collections::HashMap;
use std::sync::OnceLock;

/// A scalar protobuf type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scalar {
    String,
    Bytes,
    Bool,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Double,
    Float,
}

impl Scalar {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "string" => Self::String,
            "bytes" => Self::Bytes,
            "bool" => Self::Bool,
            "int32" => Self::Int32,
            "int64" => Self::Int64,
            "uint32" => Self::Uint32,
            "uint64" => Self::Uint64,
            "double" => Self::Double,
            "float" => Self::Float,
            _ => return None,
        })
    }
}

/// A field's type; messages by index into [`Schema::messages`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Type {
    Scalar(Scalar),
    Message(usize),
    Map(Scalar, Box<Type>),
}

#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub(crate) number: u32,
    /// The JSON name; `*` inlined, `-` none.
    pub(crate) json: String,
    pub(crate) type_: Type,
    pub(crate) repeated: bool,
    pub(crate) keep_zero: bool,
}

/// Messages whose JSON form is not the object of their fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    /// `metav1.Time`: RFC 3339 to the second.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with six fractional digits.
    MicroTime,
    /// `resource.Quantity`: its one string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`: an embedded object (JSON or protobuf bytes).
    RawExtension,
    /// `metav1.FieldsV1` and apiextensions `JSON`: JSON text as bytes.
    RawJson,
    /// `JSONSchemaPropsOrArray`: a schema or an array of schemas.
    SchemaOrArray,
    /// `JSONSchemaPropsOrBool`: a schema or a bool.
    SchemaOrBool,
    /// `JSONSchemaPropsOrStringArray`: a schema or an array of strings.
    SchemaOrStrings,
    /// A Go slice type (`ExtraValue`): an array of its one repeated field.
    List,
}

#[derive(Debug, Clone)]
pub(crate) struct Message {
    /// Sorted by number.
    pub(crate) fields: Vec<Field>,
    pub(crate) special: Option<Special>,
}

impl Message {
    pub(crate) fn field(&self, number: u32) -> Option<&Field> {
        self.fields
            .binary_search_by_key(&number, |f| f.number)
            .ok()
            .map(|i| &self.fields[i])
    }

    #[cfg(test)]
    pub(crate) fn field_named(&self, json: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.json == json)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Schema {
    pub(crate) messages: Vec<Message>,
    by_name: HashMap<String, usize>,
    /// (group, version, kind) -> message.
    kinds: HashMap<(String, String, String), usize>,
}

impl Schema {
    pub(crate) fn message(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The message of a kind, if the sandbox speaks protobuf for it.
    pub(crate) fn kind(&self, group: &str, version: &str, kind: &str) -> Option<usize> {
        self.kinds
            .get(&(group.to_string(), version.to_string(), kind.to_string()))
            .copied()
    }

    /// Parse the text format; an error names the line.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut schema = Schema::default();
        // Names first, so that fields may refer to messages defined later.
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("message ") {
                let mut words = rest.split_whitespace();
                let name = words.next().unwrap_or_default().to_string();
                let special = match words.next() {
                    Some("list") => Some(Special::List),
                    _ => special_of(&name),
                };
                schema.by_name.insert(name, schema.messages.len());
                schema.messages.push(Message {
                    fields: Vec::new(),
                    special,
                });
            }
        }
        let mut current = None;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            let bad = || format!("messages.txt line {}: {line:?}", n + 1);
            match words.as_slice() {
                [] => {}
                [first, ..] if first.starts_with('#') => {}
                ["message", name, ..] => current = schema.by_name.get(*name).copied(),
                ["kind", group, version, kind, message] => {
                    let index = schema.message(message).ok_or_else(bad)?;
                    let group = if *group == "-" { "" } else { group };
                    let key = (group.to_string(), version.to_string(), kind.to_string());
                    schema.kinds.insert(key, index);
                }
                [number, json, type_, flags @ ..] => {
                    let index = current.ok_or_else(bad)?;
                    let field = Field {
                        number: number.parse().map_err(|_| bad())?,
                        json: json.to_string(),
                        type_: schema.parse_type(type_).ok_or_else(bad)?,
                        repeated: flags.contains(&"repeated"),
                        keep_zero: flags.contains(&"zero"),
                    };
                    schema.messages[index].fields.push(field);
                }
                _ => return Err(bad()),
            }
        }
        for message in &mut schema.messages {
            message.fields.sort_by_key(|f| f.number);
        }
        Ok(schema)
    }

    fn parse_type(&self, name: &str) -> Option<Type> {
        if let Some(inner) = name.strip_prefix("map<").and_then(|s| s.strip_suffix('>')) {
            let (key, value) = inner.split_once(',')?;
            return Some(Type::Map(
                Scalar::parse(key)?,
                Box::new(self.parse_type(value)?),
            ));
        }
        Scalar::parse(name)
            .map(Type::Scalar)
            .or_else(|| self.message(name).map(Type::Message))
    }
}

fn special_of(name: &str) -> Option<Special> {
    Some(match name {
        "meta.v1.Time" => Special::Time,
        "meta.v1.MicroTime" => Special::MicroTime,
        "resource.Quantity" => Special::Quantity,
        "intstr.IntOrString" => Special::IntOrString,
        "runtime.RawExtension" => Special::RawExtension,
        "meta.v1.FieldsV1" | "apiextensions.v1.JSON" => Special::RawJson,
        "apiextensions.v1.JSONSchemaPropsOrArray" => Special::SchemaOrArray,
        "apiextensions.v1.JSONSchemaPropsOrBool" => Special::SchemaOrBool,
        "apiextensions.v1.JSONSchemaPropsOrStringArray" => Special::SchemaOrStrings,
        _ => return None,
    })
}

/// The schema of every built-in kind, parsed on first use.
pub(crate) fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    // The text is compiled in and parsed by a unit test, so this cannot fail
    // at run time; an empty schema would only turn protobuf off.
    SCHEMA.get_or_init(|| Schema::parse(include_str!("messages.txt")).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_schema_parses_and_covers_every_served_kind() {
        let schema = Schema::parse(include_str!("messages.txt")).expect("messages.txt parses");
        for (group, version, kind) in [
            ("", "v1", "Namespace"),
            ("", "v1", "ConfigMap"),
            ("", "v1", "Secret"),
            ("", "v1", "Service"),
            ("", "v1", "Event"),
            ("events.k8s.io", "v1", "Event"),
            ("", "v1", "Pod"),
            ("", "v1", "PersistentVolumeClaim"),
            ("apps", "v1", "Deployment"),
            ("apps", "v1", "StatefulSet"),
            ("batch", "v1", "Job"),
            ("discovery.k8s.io", "v1", "EndpointSlice"),
            ("autoscaling", "v2", "HorizontalPodAutoscaler"),
            ("policy", "v1", "PodDisruptionBudget"),
            ("networking.k8s.io", "v1", "NetworkPolicy"),
            ("coordination.k8s.io", "v1", "Lease"),
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            ("autoscaling", "v1", "Scale"),
        ] {
            assert!(schema.kind(group, version, kind).is_some(), "{kind}");
            let list = format!("{kind}List");
            assert!(
                kind == "Scale" || schema.kind(group, version, &list).is_some(),
                "{list}"
            );
        }
        for name in [
            "runtime.Unknown",
            "meta.v1.Status",
            "meta.v1.DeleteOptions",
            "meta.v1.WatchEvent",
        ] {
            assert!(schema.message(name).is_some(), "{name}");
        }
        let configmap = &schema.messages[schema.kind("", "v1", "ConfigMap").unwrap()];
        let data = configmap.field_named("data").expect("data");
        assert_eq!(data.number, 2);
        assert_eq!(
            data.type_,
            Type::Map(Scalar::String, Box::new(Type::Scalar(Scalar::String)))
        );
        let every_special = [
            "meta.v1.Time",
            "meta.v1.MicroTime",
            "resource.Quantity",
            "intstr.IntOrString",
            "runtime.RawExtension",
            "meta.v1.FieldsV1",
            "apiextensions.v1.JSONSchemaPropsOrBool",
            "authentication.v1.ExtraValue",
        ];
        for name in every_special {
            let message = &schema.messages[schema.message(name).expect(name)];
            assert!(message.special.is_some(), "{name}");
        }
    }

    #[test]
    fn a_field_of_an_unknown_type_is_refused() {
        let error = Schema::parse("message a.B\n  1 x c.D\n").unwrap_err();
        assert!(error.contains("line 2"), "{error}");
    }
}
