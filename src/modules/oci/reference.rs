//! `oci://registry[:port]/repository[:tag][@sha256:hex]` references, as the
//! command line and `spec.module.oci.reference` write them (the `oci://`
//! prefix is optional). The registry is always written out: there is no
//! default registry and no short-name expansion, so a reference means the
//! same thing on every machine.

use std::fmt;

/// A parsed reference. `tag` and `digest` may both be set: the digest wins
/// and the tag is kept only to be shown.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reference {
    /// `host[:port]`, as written.
    pub registry: String,
    /// The repository path, `team/policies/cheapest`.
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:` and 64 lowercase hex digits.
    pub digest: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{reference:?} is not an OCI reference: {problem} (write oci://registry[:port]/repository:tag or …@sha256:<64 hex digits>)"
)]
pub struct ReferenceError {
    pub reference: String,
    pub problem: &'static str,
}

impl Reference {
    /// Parses `[oci://]registry/repository[:tag][@sha256:hex]`.
    pub fn parse(text: &str) -> Result<Self, ReferenceError> {
        let fail = |problem| ReferenceError {
            reference: text.to_owned(),
            problem,
        };
        let rest = text.strip_prefix("oci://").unwrap_or(text);
        if rest.contains("://") {
            return Err(fail("only the oci:// scheme is understood"));
        }
        let (rest, digest) = match rest.split_once('@') {
            Some((name, digest)) => {
                if !is_sha256_digest(digest) {
                    return Err(fail(
                        "the digest must be sha256: and 64 lowercase hex digits",
                    ));
                }
                (name, Some(digest.to_owned()))
            }
            None => (rest, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| fail("it names no repository after the registry"))?;
        if registry.is_empty() || !registry.bytes().all(is_host_byte) {
            return Err(fail(
                "the registry must be a host name or address, with an optional :port",
            ));
        }
        // A tag's colon comes after the last slash; a port's before the first.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag)),
            _ => (path, None),
        };
        if repository.is_empty() || !repository.split('/').all(is_path_component) {
            return Err(fail(
                "the repository must be lowercase letters, digits and . _ - separated by /",
            ));
        }
        if let Some(tag) = tag
            && !is_tag(tag)
        {
            return Err(fail(
                "the tag must be 1 to 128 letters, digits, . _ or -, not starting with . or -",
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(fail("it names neither a tag nor a digest"));
        }
        Ok(Reference {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest,
        })
    }

    /// What the registry's manifest endpoint takes: the digest when known,
    /// else the tag.
    pub fn manifest_ref(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or_default()
    }

    /// The same repository, pinned to `digest` (the tag dropped).
    pub fn pinned(&self, digest: &str) -> Reference {
        Reference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: Some(digest.to_owned()),
        }
    }

    /// The same repository at `tag`.
    pub fn with_tag(&self, tag: &str) -> Reference {
        Reference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: Some(tag.to_owned()),
            digest: None,
        }
    }
}

impl fmt::Display for Reference {
    /// Without the `oci://` prefix, as `status.moduleReference` shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// `sha256:` followed by 64 lowercase hex digits.
pub fn is_sha256_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(is_lower_hex))
}

fn is_lower_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

fn is_host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
}

fn is_path_component(part: &str) -> bool {
    !part.is_empty()
        && part.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
        && part
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
}

fn is_tag(tag: &str) -> bool {
    (1..=128).contains(&tag.len())
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_with_ports_tags_and_digests_parse() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse("oci://127.0.0.1:5000/team/cheapest:v1").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "team/cheapest");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.manifest_ref(), "v1");
        let r = Reference::parse(&format!("registry.example/p@{digest}")).unwrap();
        assert_eq!(r.tag, None);
        assert_eq!(r.manifest_ref(), digest);
        let r = Reference::parse(&format!("registry.example:443/p:v2@{digest}")).unwrap();
        assert_eq!(r.manifest_ref(), digest, "the digest wins over the tag");
        assert_eq!(r.to_string(), format!("registry.example:443/p:v2@{digest}"));
        assert_eq!(
            r.pinned(&digest).to_string(),
            format!("registry.example:443/p@{digest}")
        );
    }

    #[test]
    fn malformed_references_say_what_is_wrong() {
        for (text, problem) in [
            ("https://registry.example/p:v1", "only the oci:// scheme"),
            ("registry.example", "no repository"),
            ("registry.example/p", "neither a tag nor a digest"),
            ("registry.example/P:v1", "lowercase"),
            ("registry.example/p:-v1", "the tag must"),
            ("registry.example/p@sha256:abc", "64 lowercase hex"),
            ("registry.example/p@sha512:abc", "64 lowercase hex"),
            ("user@registry.example/p:v1", "64 lowercase hex"),
            ("/p:v1", "the registry must"),
        ] {
            let err = Reference::parse(text).unwrap_err();
            assert!(err.to_string().contains(problem), "{text}: {err}");
        }
    }
}
