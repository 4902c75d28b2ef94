//! Content negotiation: which media type a request body is in
//! (`Content-Type`) and which one an answer takes (`Accept`), with
//! kube-apiserver's 415 and 406 answers. Pure; it must never look at a
//! body, only at the headers and at whether the kind has a protobuf form.

use crate::error::{ApiError, ApiResult};
use crate::proto;

/// What a request body is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyType {
    /// JSON, or YAML (which is read by the same path).
    Json,
    Protobuf,
}

/// The media types of a request body for a kind, in kube-apiserver's order.
fn accepted(protobuf: bool) -> Vec<&'static str> {
    let mut types = vec!["application/json", "application/yaml"];
    if protobuf {
        types.push(proto::MEDIA_TYPE);
    }
    types
}

fn essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The type of a create, update or delete body; `protobuf` says whether the
/// kind has a protobuf form. No Content-Type means JSON.
pub(crate) fn body_type(content_type: &str, protobuf: bool) -> ApiResult<BodyType> {
    match essence(content_type).as_str() {
        "" | "application/json" | "application/yaml" => Ok(BodyType::Json),
        proto::MEDIA_TYPE if protobuf => Ok(BodyType::Protobuf),
        _ => Err(ApiError::unsupported_media_type(&accepted(protobuf))),
    }
}

/// What an answer is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Json,
    Protobuf,
}

/// The answer type for an Accept header, by quality and then order.
///
/// An Accept that names protobuf for a kind without it, and nothing the
/// sandbox can write, gets 406 as from kube-apiserver. Other media types the
/// sandbox does not write (YAML, CBOR) fall back to JSON, as the sandbox has
/// always answered.
pub(crate) fn answer(accept: &str, protobuf: bool) -> ApiResult<Answer> {
    let mut ranges: Vec<(f32, String, bool)> = accept
        .split(',')
        .filter(|r| !r.trim().is_empty())
        .map(|range| {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let mut quality = 1.0;
            // A protobuf Table or PartialObjectMetadata is not served.
            let mut converted = false;
            for param in parts {
                let (key, value) = param.split_once('=').unwrap_or((param, ""));
                match key.trim() {
                    "q" => quality = value.trim().parse().unwrap_or(0.0),
                    "as" => converted = true,
                    _ => {}
                }
            }
            (quality, media, converted)
        })
        .collect();
    if ranges.is_empty() {
        return Ok(Answer::Json);
    }
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut named_protobuf = false;
    for (quality, media, converted) in &ranges {
        if *quality <= 0.0 {
            continue;
        }
        match media.as_str() {
            proto::MEDIA_TYPE => {
                named_protobuf = true;
                if protobuf && !converted {
                    return Ok(Answer::Protobuf);
                }
            }
            "application/json" | "application/*" | "*/*" => return Ok(Answer::Json),
            _ => {}
        }
    }
    if named_protobuf {
        return Err(ApiError::not_acceptable(&accepted(protobuf)));
    }
    Ok(Answer::Json)
}

/// Whether an Accept header prefers protobuf for a kind that has it; an
/// unacceptable header counts as JSON (its 406 is given elsewhere).
pub(crate) fn prefers_protobuf(accept: &str, protobuf: bool) -> bool {
    protobuf && matches!(answer(accept, protobuf), Ok(Answer::Protobuf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_go_accept_prefers_protobuf_only_where_it_exists() {
        let accept = "application/vnd.kubernetes.protobuf,application/json";
        assert_eq!(answer(accept, true).unwrap(), Answer::Protobuf);
        assert_eq!(answer(accept, false).unwrap(), Answer::Json);
        assert_eq!(answer("", true).unwrap(), Answer::Json);
        assert_eq!(answer("*/*", true).unwrap(), Answer::Json);
        let weighted = "application/vnd.kubernetes.protobuf;q=0.5, application/json";
        assert_eq!(answer(weighted, true).unwrap(), Answer::Json);
    }

    #[test]
    fn protobuf_tables_and_protobuf_only_for_custom_resources_are_not_acceptable() {
        let table =
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json";
        assert_eq!(answer(table, true).unwrap(), Answer::Json);
        let error = answer(proto::MEDIA_TYPE, false).unwrap_err();
        assert_eq!(error.code, 406);
        assert_eq!(
            error.message,
            "only the following media types are accepted: application/json, application/yaml"
        );
        assert_eq!(answer("application/yaml", false).unwrap(), Answer::Json);
    }

    #[test]
    fn request_bodies_of_unknown_types_are_unsupported() {
        assert_eq!(body_type("", true).unwrap(), BodyType::Json);
        assert_eq!(
            body_type("application/json; charset=utf-8", false).unwrap(),
            BodyType::Json
        );
        assert_eq!(
            body_type(proto::MEDIA_TYPE, true).unwrap(),
            BodyType::Protobuf
        );
        let custom = body_type(proto::MEDIA_TYPE, false).unwrap_err();
        assert_eq!(custom.code, 415);
        assert_eq!(
            custom.message,
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
        );
        assert_eq!(body_type("text/plain", true).unwrap_err().code, 415);
    }
}
