//! JSON to protobuf: writes a stored object of a built-in kind as the
//! message a Go client decodes, driven by the schema. Pure.
//!
//! Fields are written in number order, map entries by key, as gogo-protobuf
//! writes them. JSON the schema does not know, or of the wrong type, is left
//! out rather than guessed at: a Go client decoding the answer would have no
//! field to put it in. It must never panic on any JSON.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::schema::{Field, Scalar, Schema, Special, Type};
use super::wire::{put_bytes, put_key, put_varint};

pub(crate) struct Encoder<'s> {
    pub(crate) schema: &'s Schema,
}

impl Encoder<'_> {
    /// The fields of message `index` taken from `value`.
    pub(crate) fn message(&self, index: usize, value: &Value, out: &mut Vec<u8>) {
        let message = &self.schema.messages[index];
        if let Some(special) = message.special {
            self.special(special, &message.fields, value, out);
            return;
        }
        let Value::Object(object) = value else { return };
        for field in &message.fields {
            match field.json.as_str() {
                "-" => {}
                // An embedded struct: its fields sit in this same object.
                "*" => {
                    if let Type::Message(inner) = field.type_ {
                        let mut bytes = Vec::new();
                        self.message(inner, value, &mut bytes);
                        if !bytes.is_empty() {
                            put_bytes(out, field.number, &bytes);
                        }
                    }
                }
                name => match object.get(name) {
                    None | Some(Value::Null) => {}
                    Some(value) => self.field(field, value, out),
                },
            }
        }
    }

    fn field(&self, field: &Field, value: &Value, out: &mut Vec<u8>) {
        match (&field.type_, value) {
            (Type::Map(key, value_type), Value::Object(entries)) => {
                for (k, v) in entries {
                    let mut entry = Vec::new();
                    if !scalar(*key, 1, &Value::String(k.clone()), &mut entry) {
                        continue;
                    }
                    // The value is written even when zero, so that an empty
                    // string stays an entry.
                    self.single(value_type, 2, v, &mut entry);
                    put_bytes(out, field.number, &entry);
                }
            }
            (_, Value::Array(items)) if field.repeated => {
                for item in items {
                    self.single(&field.type_, field.number, item, out);
                }
            }
            (type_, value) if !field.repeated => self.single(type_, field.number, value, out),
            _ => {}
        }
    }

    fn single(&self, type_: &Type, number: u32, value: &Value, out: &mut Vec<u8>) {
        match type_ {
            Type::Scalar(s) => {
                scalar(*s, number, value, out);
            }
            Type::Message(inner) => {
                let mut bytes = Vec::new();
                self.message(*inner, value, &mut bytes);
                put_bytes(out, number, &bytes);
            }
            Type::Map(..) => {}
        }
    }

    fn special(&self, special: Special, fields: &[Field], value: &Value, out: &mut Vec<u8>) {
        // The message type of field `n` of this special message.
        let message_of = |n: u32| {
            fields
                .iter()
                .find(|f| f.number == n)
                .and_then(|f| match f.type_ {
                    Type::Message(i) => Some(i),
                    _ => None,
                })
        };
        match (special, value) {
            (Special::Time | Special::MicroTime, Value::String(text)) => {
                if let Ok(at) = text.parse::<jiff::Timestamp>() {
                    let nanos = if special == Special::MicroTime {
                        at.subsec_nanosecond() / 1000 * 1000
                    } else {
                        0
                    };
                    put_key(out, 1, 0);
                    put_varint(out, at.as_second() as u64);
                    put_key(out, 2, 0);
                    put_varint(out, i64::from(nanos) as u64);
                }
            }
            (Special::Quantity, Value::String(_)) => {
                scalar(Scalar::String, 1, value, out);
            }
            (Special::Quantity, Value::Number(n)) => {
                scalar(Scalar::String, 1, &Value::String(n.to_string()), out);
            }
            (Special::IntOrString, Value::Number(_)) => {
                scalar(Scalar::Int64, 1, &Value::from(0), out);
                scalar(Scalar::Int32, 2, value, out);
                scalar(Scalar::String, 3, &Value::String(String::new()), out);
            }
            (Special::IntOrString, Value::String(_)) => {
                scalar(Scalar::Int64, 1, &Value::from(1), out);
                scalar(Scalar::Int32, 2, &Value::from(0), out);
                scalar(Scalar::String, 3, value, out);
            }
            (Special::RawExtension | Special::RawJson, value) => {
                if let Ok(json) = serde_json::to_vec(value) {
                    put_bytes(out, 1, &json);
                }
            }
            (Special::SchemaOrArray, Value::Array(items)) => {
                if let Some(schema) = message_of(2) {
                    for item in items {
                        self.single(&Type::Message(schema), 2, item, out);
                    }
                }
            }
            (Special::SchemaOrArray | Special::SchemaOrStrings, Value::Object(_)) => {
                if let Some(schema) = message_of(1) {
                    self.single(&Type::Message(schema), 1, value, out);
                }
            }
            (Special::SchemaOrBool, Value::Bool(allows)) => {
                scalar(Scalar::Bool, 1, &Value::Bool(*allows), out);
            }
            (Special::SchemaOrBool, Value::Object(_)) => {
                scalar(Scalar::Bool, 1, &Value::Bool(true), out);
                if let Some(schema) = message_of(2) {
                    self.single(&Type::Message(schema), 2, value, out);
                }
            }
            (Special::SchemaOrStrings, Value::Array(items)) => {
                for item in items {
                    scalar(Scalar::String, 2, item, out);
                }
            }
            (Special::List, Value::Array(items)) => {
                if let Some(field) = fields.first() {
                    for item in items {
                        self.single(&field.type_, field.number, item, out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Write one scalar; false (and nothing written) when the JSON value does
/// not fit the type.
fn scalar(scalar: Scalar, number: u32, value: &Value, out: &mut Vec<u8>) -> bool {
    let integer = || {
        value
            .as_i64()
            .or_else(|| value.as_u64().map(|u| u as i64))
            .or_else(|| {
                value
                    .as_f64()
                    .filter(|f| f.fract() == 0.0)
                    .map(|f| f as i64)
            })
    };
    match scalar {
        Scalar::String => match value.as_str() {
            Some(s) => put_bytes(out, number, s.as_bytes()),
            None => return false,
        },
        Scalar::Bytes => match value.as_str().and_then(|s| STANDARD.decode(s).ok()) {
            Some(bytes) => put_bytes(out, number, &bytes),
            None => return false,
        },
        Scalar::Bool => match value.as_bool() {
            Some(b) => {
                put_key(out, number, 0);
                put_varint(out, u64::from(b));
            }
            None => return false,
        },
        Scalar::Int32 | Scalar::Int64 | Scalar::Uint32 | Scalar::Uint64 => match integer() {
            Some(i) => {
                // Go sign-extends an int32 to 64 bits on the wire.
                let i = if scalar == Scalar::Int32 {
                    i64::from(i as i32)
                } else {
                    i
                };
                put_key(out, number, 0);
                put_varint(out, i as u64);
            }
            None => return false,
        },
        Scalar::Double => match value.as_f64() {
            Some(f) => {
                put_key(out, number, 1);
                out.extend_from_slice(&f.to_le_bytes());
            }
            None => return false,
        },
        Scalar::Float => match value.as_f64() {
            Some(f) => {
                put_key(out, number, 5);
                out.extend_from_slice(&(f as f32).to_le_bytes());
            }
            None => return false,
        },
    }
    true
}
