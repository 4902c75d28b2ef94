//! Protobuf to JSON: turns a message of a built-in kind into the JSON object
//! kube-apiserver would show for it, driven by the schema. Pure.
//!
//! The JSON is what Go's `encoding/json` makes of the decoded struct: a zero
//! scalar disappears unless its field is a pointer or lacks `omitempty`
//! (gogo-protobuf writes every non-pointer field, so presence on the wire
//! says nothing about them), a present message stays even when empty (an
//! `emptyDir: {}` means something), and the special types take their JSON
//! forms. It must never panic on hostile bytes: every error is a
//! [`WireError`], and nesting is bounded.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Number, Value};

use super::schema::{Field, Scalar, Schema, Special, Type};
use super::wire::{Payload, Reader, WireError, WireResult};

/// Deeper nesting than any real object has; it bounds recursion.
const MAX_DEPTH: usize = 100;

pub(crate) struct Decoder<'s> {
    pub(crate) schema: &'s Schema,
    /// Decodes the protobuf envelope a `RawExtension` may hold.
    pub(crate) envelope: fn(&[u8], usize) -> WireResult<Value>,
}

impl<'s> Decoder<'s> {
    pub(crate) fn message(&self, index: usize, bytes: &[u8], depth: usize) -> WireResult<Value> {
        if depth > MAX_DEPTH {
            return Err(WireError("exceeded maximum nesting depth".into()));
        }
        let message = &self.schema.messages[index];
        let records = self.records(index, bytes, depth)?;
        if let Some(special) = message.special {
            return self.special(special, records, depth);
        }
        let mut object = Map::new();
        let mut inlined = Vec::new();
        for (field, value) in records {
            match field.json.as_str() {
                "-" => {}
                "*" => inlined.push(value),
                name => match (&field.type_, field.repeated) {
                    (Type::Map(..), _) => {
                        let entries = object
                            .entry(name)
                            .or_insert_with(|| Value::Object(Map::new()));
                        if let (Value::Object(entries), Value::Object(entry)) = (entries, value) {
                            entries.extend(entry);
                        }
                    }
                    (_, true) => {
                        let items = object
                            .entry(name)
                            .or_insert_with(|| Value::Array(Vec::new()));
                        if let Value::Array(items) = items {
                            items.push(value);
                        }
                    }
                    (Type::Scalar(_), false) if is_zero(&value) && !field.keep_zero => {
                        object.remove(name);
                    }
                    _ if value.is_null() => {
                        object.remove(name);
                    }
                    _ => {
                        object.insert(name.to_string(), value);
                    }
                },
            }
        }
        // Go's encoding/json flattens an embedded struct into its parent.
        for value in inlined {
            if let Value::Object(fields) = value {
                for (key, value) in fields {
                    object.entry(key).or_insert(value);
                }
            }
        }
        Ok(Value::Object(object))
    }

    /// Every record of a message with its field, decoded; unknown fields
    /// are skipped, as gogo-protobuf does.
    fn records(
        &self,
        index: usize,
        bytes: &[u8],
        depth: usize,
    ) -> WireResult<Vec<(&'s Field, Value)>> {
        let message = &self.schema.messages[index];
        let mut records = Vec::new();
        let mut reader = Reader::new(bytes);
        while let Some((number, payload)) = reader.next_record()? {
            let Some(field) = message.field(number) else {
                continue;
            };
            let wrong = || {
                WireError(format!(
                    "proto: wrong wireType = {} for field {}",
                    payload.wire_type(),
                    field.json
                ))
            };
            match (&field.type_, payload) {
                (Type::Scalar(scalar), Payload::Bytes(packed))
                    if field.repeated && !matches!(scalar, Scalar::String | Scalar::Bytes) =>
                {
                    let mut inner = Reader::new(packed);
                    while !inner.at_end() {
                        let item = match scalar {
                            Scalar::Double => Payload::Fixed64(inner.fixed64()?),
                            Scalar::Float => Payload::Fixed32(inner.fixed32()?),
                            _ => Payload::Varint(inner.varint()?),
                        };
                        records.push((field, scalar_value(*scalar, item).ok_or_else(wrong)?));
                    }
                }
                (Type::Scalar(scalar), payload) => {
                    records.push((field, scalar_value(*scalar, payload).ok_or_else(wrong)?));
                }
                (Type::Message(inner), Payload::Bytes(bytes)) => {
                    records.push((field, self.message(*inner, bytes, depth + 1)?));
                }
                (Type::Map(key, value), Payload::Bytes(bytes)) => {
                    let entry = self.map_entry(*key, value, bytes, depth)?;
                    records.push((field, entry));
                }
                _ => return Err(wrong()),
            }
        }
        Ok(records)
    }

    /// One map entry (key = 1, value = 2) as a one-key JSON object.
    fn map_entry(
        &self,
        key: Scalar,
        value: &Type,
        bytes: &[u8],
        depth: usize,
    ) -> WireResult<Value> {
        let mut reader = Reader::new(bytes);
        let mut k = None;
        let mut v = None;
        while let Some((number, payload)) = reader.next_record()? {
            let bad = || WireError("proto: invalid map entry".into());
            match (number, value) {
                (1, _) => k = Some(scalar_value(key, payload).ok_or_else(bad)?),
                (2, Type::Scalar(scalar)) => {
                    v = Some(scalar_value(*scalar, payload).ok_or_else(bad)?)
                }
                (2, Type::Message(inner)) => match payload {
                    Payload::Bytes(bytes) => v = Some(self.message(*inner, bytes, depth + 1)?),
                    _ => return Err(bad()),
                },
                _ => {}
            }
        }
        let k = match k {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let v = match (v, value) {
            (Some(v), _) => v,
            (None, Type::Scalar(scalar)) => zero(*scalar),
            (None, Type::Message(inner)) => self.message(*inner, &[], depth + 1)?,
            (None, Type::Map(..)) => Value::Null,
        };
        Ok(Value::Object(Map::from_iter([(k, v)])))
    }

    fn special(
        &self,
        special: Special,
        records: Vec<(&Field, Value)>,
        depth: usize,
    ) -> WireResult<Value> {
        let by_number = |n: u32| {
            records
                .iter()
                .filter(move |(f, _)| f.number == n)
                .map(|(_, v)| v)
        };
        let last = |n: u32| by_number(n).next_back().cloned();
        let int = |n: u32| last(n).and_then(|v| v.as_i64()).unwrap_or(0);
        let bytes = || -> WireResult<Vec<u8>> {
            match last(1) {
                Some(Value::String(b64)) => STANDARD
                    .decode(b64)
                    .map_err(|_| WireError("invalid bytes".into())),
                _ => Ok(Vec::new()),
            }
        };
        Ok(match special {
            Special::Time | Special::MicroTime if records.is_empty() => Value::Null,
            Special::Time => Value::String(time(int(1), 0, false)?),
            Special::MicroTime => Value::String(time(int(1), int(2), true)?),
            Special::Quantity => match last(1) {
                Some(Value::String(s)) if !s.is_empty() => Value::String(s),
                _ => Value::String("0".into()),
            },
            Special::IntOrString if int(1) == 1 => last(3).unwrap_or(Value::String(String::new())),
            Special::IntOrString => Value::from(int(2)),
            Special::RawExtension | Special::RawJson => {
                let raw = bytes()?;
                if raw.is_empty() {
                    Value::Null
                } else if special == Special::RawExtension && raw.starts_with(super::MAGIC) {
                    (self.envelope)(&raw, depth + 1)?
                } else {
                    serde_json::from_slice(&raw)
                        .map_err(|e| WireError(format!("invalid JSON in a raw field: {e}")))?
                }
            }
            Special::SchemaOrArray => {
                let schemas: Vec<Value> = by_number(2).cloned().collect();
                match last(1) {
                    _ if !schemas.is_empty() => Value::Array(schemas),
                    Some(schema) => schema,
                    None => Value::Null,
                }
            }
            Special::SchemaOrBool => match last(2) {
                Some(schema) => schema,
                None => Value::Bool(last(1).and_then(|v| v.as_bool()).unwrap_or(false)),
            },
            Special::SchemaOrStrings => {
                let strings: Vec<Value> = by_number(2).cloned().collect();
                match last(1) {
                    _ if !strings.is_empty() => Value::Array(strings),
                    Some(schema) => schema,
                    None => Value::Null,
                }
            }
            Special::List => Value::Array(by_number(1).cloned().collect()),
        })
    }
}

/// RFC 3339 in UTC; `metav1.Time` drops the fraction, `MicroTime` keeps
/// six digits, as their Go JSON forms do.
fn time(seconds: i64, nanos: i64, micro: bool) -> WireResult<String> {
    let out_of_range = || WireError(format!("timestamp out of range: {seconds}s"));
    let nanos = if micro { nanos } else { 0 };
    let nanos = i32::try_from(nanos).map_err(|_| out_of_range())?;
    let at = jiff::Timestamp::new(seconds, nanos).map_err(|_| out_of_range())?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(at.strftime(format).to_string())
}

fn scalar_value(scalar: Scalar, payload: Payload<'_>) -> Option<Value> {
    Some(match (scalar, payload) {
        (Scalar::String, Payload::Bytes(b)) => {
            Value::String(String::from_utf8_lossy(b).into_owned())
        }
        (Scalar::Bytes, Payload::Bytes(b)) => Value::String(STANDARD.encode(b)),
        (Scalar::Bool, Payload::Varint(v)) => Value::Bool(v != 0),
        // Go truncates a varint to the field's width.
        (Scalar::Int32, Payload::Varint(v)) => Value::from(v as i32),
        (Scalar::Int64, Payload::Varint(v)) => Value::from(v as i64),
        (Scalar::Uint32, Payload::Varint(v)) => Value::from(v as u32),
        (Scalar::Uint64, Payload::Varint(v)) => Value::from(v),
        (Scalar::Double, Payload::Fixed64(v)) => float(f64::from_bits(v)),
        (Scalar::Float, Payload::Fixed32(v)) => float(f64::from(f32::from_bits(v))),
        _ => return None,
    })
}

/// JSON has no NaN or infinity; Go's encoder refuses them, the sandbox
/// drops them.
fn float(v: f64) -> Value {
    Number::from_f64(v).map_or(Value::Null, Value::Number)
}

fn zero(scalar: Scalar) -> Value {
    match scalar {
        Scalar::String | Scalar::Bytes => Value::String(String::new()),
        Scalar::Bool => Value::Bool(false),
        Scalar::Double | Scalar::Float => float(0.0),
        _ => Value::from(0),
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}
