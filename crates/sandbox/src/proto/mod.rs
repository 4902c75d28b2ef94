//! `application/vnd.kubernetes.protobuf` for the built-in kinds: request
//! bodies to the JSON the sandbox stores, stored JSON to answers, in
//! kube-apiserver's envelope (`k8s\0` and a `runtime.Unknown` holding the
//! type, the message and its encoding) and its watch framing (a 4-byte
//! big-endian length before each `WatchEvent`).
//!
//! The conversion is driven by a schema of field numbers and names generated
//! from upstream's `.proto` files for just the kinds the sandbox serves
//! (`messages.txt`), not by generated Rust types: the sandbox stores JSON,
//! and the schema is the whole of what a conversion needs. Custom resources
//! have no schema here and so no protobuf, as in kube-apiserver. This module
//! must never panic on request bytes, and never decides what is stored: it
//! only translates.

mod decode;
mod encode;
mod schema;
mod wire;

use std::sync::Arc;

use serde_json::Value;

use self::decode::Decoder;
use self::encode::Encoder;
use self::schema::schema;
use self::wire::{Reader, WireError, WireResult, put_bytes};

/// The media type, in requests and answers.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// Every protobuf body starts with it.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

/// Whether the sandbox speaks protobuf for a kind.
pub(crate) fn supports(group: &str, version: &str, kind: &str) -> bool {
    schema().kind(group, version, kind).is_some()
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// The message of a kind; the meta kinds (Status, DeleteOptions, WatchEvent)
/// belong to every group version, as in kube-apiserver's scheme.
fn message_for(api_version: &str, kind: &str) -> Option<usize> {
    let (group, version) = split_api_version(api_version);
    schema().kind(group, version, kind).or_else(|| match kind {
        "Status" | "DeleteOptions" | "WatchEvent" => schema().message(&format!("meta.v1.{kind}")),
        _ => None,
    })
}

/// Why a protobuf request body cannot be read, worded as kube-apiserver does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// No readable envelope: the message names the expected kind.
    Unrecognized(String),
    /// An envelope whose content cannot be decoded as the expected kind.
    Undecodable(String),
}

impl BodyError {
    pub(crate) fn message(&self) -> &str {
        match self {
            BodyError::Unrecognized(m) | BodyError::Undecodable(m) => m,
        }
    }
}

/// A request body in protobuf, as the JSON object the sandbox works with.
/// `api_version` and `kind` say what the request expects: the resource's
/// kind, or `DeleteOptions` or `Scale`.
pub(crate) fn decode_body(bytes: &[u8], api_version: &str, kind: &str) -> Result<Value, BodyError> {
    let unrecognized = |error: &str| {
        BodyError::Unrecognized(format!(
            "the object provided is unrecognized (must be of type {kind}): {error} ({})",
            summary(bytes)
        ))
    };
    let Some(index) = message_for(api_version, kind) else {
        return Err(unrecognized("no protobuf schema for this kind"));
    };
    let envelope = unwrap_envelope(bytes).map_err(|e| unrecognized(&e.0))?;
    let (_, version) = split_api_version(api_version);
    let sent_version = split_api_version(&envelope.api_version).1;
    let sent_kind = if envelope.kind.is_empty() {
        kind
    } else {
        &envelope.kind
    };
    let sent_version = if sent_version.is_empty() {
        version
    } else {
        sent_version
    };
    let cannot = |error: &str| {
        BodyError::Undecodable(format!(
            "{sent_kind} in version \"{sent_version}\" cannot be handled as a {kind}: {error}"
        ))
    };
    if sent_kind != kind {
        return Err(cannot(&format!(
            "converting ({sent_version}.{sent_kind}) to ({version}.{kind}): unknown conversion"
        )));
    }
    if !envelope.content_encoding.is_empty() {
        return Err(cannot(&format!(
            "unsupported content encoding {:?}",
            envelope.content_encoding
        )));
    }
    let mut value = decoder()
        .message(index, envelope.raw, 0)
        .map_err(|e| cannot(&e.0))?;
    if let Value::Object(object) = &mut value {
        let api_version = if envelope.api_version.is_empty() {
            api_version
        } else {
            &envelope.api_version
        };
        object.insert("apiVersion".into(), Value::from(api_version));
        object.insert("kind".into(), Value::from(kind));
    }
    Ok(value)
}

/// One object, enveloped; `None` when the kind has no protobuf form.
pub(crate) fn encode_object(object: &Value) -> Option<Vec<u8>> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let index = message_for(api_version, kind)?;
    let mut raw = Vec::new();
    Encoder { schema: schema() }.message(index, object, &mut raw);
    Some(envelope(api_version, kind, &raw))
}

/// A `<Kind>List` of `items`, enveloped, written item by item without
/// building the list as JSON.
pub(crate) fn encode_list(
    api_version: &str,
    list_kind: &str,
    metadata: &Value,
    items: &[Arc<Value>],
) -> Option<Vec<u8>> {
    let index = message_for(api_version, list_kind)?;
    let message = &schema().messages[index];
    let encoder = Encoder { schema: schema() };
    let mut raw = Vec::new();
    for field in &message.fields {
        let schema::Type::Message(inner) = field.type_ else {
            continue;
        };
        let mut bytes = Vec::new();
        match field.json.as_str() {
            "metadata" => {
                encoder.message(inner, metadata, &mut bytes);
                put_bytes(&mut raw, field.number, &bytes);
            }
            "items" => {
                for item in items {
                    bytes.clear();
                    encoder.message(inner, item, &mut bytes);
                    put_bytes(&mut raw, field.number, &bytes);
                }
            }
            _ => {}
        }
    }
    Some(envelope(api_version, list_kind, &raw))
}

/// One frame of a protobuf watch stream: the length, then a `WatchEvent`
/// (unenveloped) whose object is the enveloped object.
pub(crate) fn watch_frame(type_: &str, object: &[u8]) -> Vec<u8> {
    let mut raw_extension = Vec::new();
    put_bytes(&mut raw_extension, 1, object);
    let mut event = Vec::new();
    put_bytes(&mut event, 1, type_.as_bytes());
    put_bytes(&mut event, 2, &raw_extension);
    let mut frame = Vec::with_capacity(event.len() + 4);
    frame.extend_from_slice(&u32::try_from(event.len()).unwrap_or(u32::MAX).to_be_bytes());
    frame.extend_from_slice(&event);
    frame
}

fn decoder() -> Decoder<'static> {
    Decoder {
        schema: schema(),
        envelope: decode_envelope,
    }
}

/// An enveloped object of any kind the schema knows (a `RawExtension`'s
/// content), as JSON.
fn decode_envelope(bytes: &[u8], depth: usize) -> WireResult<Value> {
    let envelope = unwrap_envelope(bytes)?;
    let index = message_for(&envelope.api_version, &envelope.kind)
        .ok_or_else(|| WireError(format!("no protobuf schema for kind {:?}", envelope.kind)))?;
    let mut value = decoder().message(index, envelope.raw, depth)?;
    if let Value::Object(object) = &mut value {
        object.insert("apiVersion".into(), Value::from(envelope.api_version));
        object.insert("kind".into(), Value::from(envelope.kind));
    }
    Ok(value)
}

struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

fn unwrap_envelope(bytes: &[u8]) -> WireResult<Envelope<'_>> {
    let data = match bytes.strip_prefix(MAGIC) {
        _ if bytes.is_empty() => return Err(WireError("empty data".into())),
        Some([]) => return Err(WireError("empty body".into())),
        Some(data) => data,
        None => {
            return Err(WireError(
                "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
                    .into(),
            ));
        }
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut envelope = Envelope {
        api_version: String::new(),
        kind: String::new(),
        raw: &[],
        content_encoding: String::new(),
    };
    let mut reader = Reader::new(data);
    while let Some((number, payload)) = reader.next_record()? {
        let wire::Payload::Bytes(b) = payload else {
            return Err(WireError(format!(
                "proto: wrong wireType = {} for field {number}",
                payload.wire_type()
            )));
        };
        match number {
            1 => {
                let mut type_meta = Reader::new(b);
                while let Some((n, p)) = type_meta.next_record()? {
                    match (n, p) {
                        (1, wire::Payload::Bytes(v)) => envelope.api_version = text(v),
                        (2, wire::Payload::Bytes(v)) => envelope.kind = text(v),
                        (1 | 2, _) => {
                            return Err(WireError("proto: wrong wireType in TypeMeta".into()));
                        }
                        _ => {}
                    }
                }
            }
            2 => envelope.raw = b,
            3 => envelope.content_encoding = text(b),
            _ => {}
        }
    }
    Ok(envelope)
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(raw.len() + type_meta.len() + 16);
    out.extend_from_slice(MAGIC);
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    // contentEncoding and contentType, empty, as kube-apiserver writes them.
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}

/// The start of a body, as kube-apiserver quotes it in errors.
fn summary(bytes: &[u8]) -> String {
    const MAX: usize = 30;
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    match bytes {
        [] => "<empty>".into(),
        [b'{', ..] => {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]).into_owned();
            if bytes.len() > MAX {
                text + " ..."
            } else {
                text
            }
        }
        _ if bytes.len() > MAX => hex(&bytes[..MAX]) + " ...",
        _ => hex(bytes),
    }
}

#[cfg(test)]
mod tests;
