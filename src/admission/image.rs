//! Image references read the way container runtimes read them, so that a
//! registry allow-list cannot be dodged by spelling: `nginx` is
//! `docker.io/library/nginx`, `index.docker.io/x` is `docker.io/x`, a first
//! segment is a registry only when it has a `.` or `:` or is `localhost`.
//! Pure parsing; never contacts a registry.

/// The registry and repository path of an image reference, lower-cased
/// registry, without tag or digest.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ImageName {
    pub(crate) registry: String,
    pub(crate) repository: String,
}

/// Parses `[registry/]path[:tag][@digest]`. `None` for anything that is
/// not a valid reference.
pub(crate) fn parse(reference: &str) -> Option<ImageName> {
    let name = match reference.split_once('@') {
        Some((name, digest)) => {
            let (algorithm, hex) = digest.split_once(':')?;
            let valid = !algorithm.is_empty()
                && algorithm
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+._-".contains(&b))
                && hex.len() >= 32
                && hex.bytes().all(|b| b.is_ascii_hexdigit());
            valid.then_some(name)?
        }
        None => reference,
    };
    let (registry, rest) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest),
        _ => ("docker.io", name),
    };
    // A tag follows the last ':' only when no '/' comes after it.
    let path = match rest.rsplit_once(':') {
        Some((path, tag)) if !tag.contains('/') => {
            let valid_tag = !tag.is_empty()
                && tag.len() <= 128
                && tag
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
                && !tag.starts_with(['.', '-']);
            valid_tag.then_some(path)?
        }
        _ => rest,
    };
    if !valid_registry(registry) || !path.split('/').all(valid_component) {
        return None;
    }
    let registry = registry.to_ascii_lowercase();
    let registry = match registry.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_owned(),
        _ => registry,
    };
    let repository = if registry == "docker.io" && !path.contains('/') {
        format!("library/{path}")
    } else {
        path.to_owned()
    };
    Some(ImageName {
        registry,
        repository,
    })
}

fn valid_registry(registry: &str) -> bool {
    let (host, port) = match registry.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (registry, None),
    };
    let port_ok =
        port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok
        && !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// A path component: lower-case alphanumerics separated by `.`, `_`, `__`
/// or dashes.
fn valid_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    edge(bytes.first())
        && edge(bytes.last())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(b))
}

/// Whether `image` comes from `allowed`: a registry (`ghcr.io`) or a
/// registry and path prefix (`ghcr.io/acme`), matched segment by segment
/// so `ghcr.io/acme` does not admit `ghcr.io/acme-evil`.
pub(crate) fn allowed_by(image: &ImageName, allowed: &str) -> bool {
    let allowed = allowed.trim_end_matches('/');
    let (registry, prefix) = allowed.split_once('/').unwrap_or((allowed, ""));
    let registry = registry.to_ascii_lowercase();
    let registry = match registry.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io",
        other => other,
    };
    if registry != image.registry {
        return false;
    }
    prefix.is_empty()
        || image.repository == prefix
        || image
            .repository
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(reference: &str) -> Option<(String, String)> {
        parse(reference).map(|i| (i.registry, i.repository))
    }

    #[test]
    fn references_normalise_like_a_container_runtime() {
        let cases = [
            ("nginx", "docker.io", "library/nginx"),
            ("nginx:1.27", "docker.io", "library/nginx"),
            ("acme/web", "docker.io", "acme/web"),
            ("index.docker.io/acme/web:v1", "docker.io", "acme/web"),
            ("ghcr.io/acme/web:v1", "ghcr.io", "acme/web"),
            ("GHCR.io/acme/web", "ghcr.io", "acme/web"),
            ("localhost/web", "localhost", "web"),
            (
                "registry.example:5000/team/web:2",
                "registry.example:5000",
                "team/web",
            ),
            (
                "ghcr.io/acme/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "ghcr.io",
                "acme/web",
            ),
        ];
        for (reference, registry, repository) in cases {
            assert_eq!(
                parsed(reference),
                Some((registry.to_owned(), repository.to_owned())),
                "{reference}"
            );
        }
    }

    #[test]
    fn malformed_references_do_not_parse() {
        for reference in [
            "",
            "UPPER/case",
            "ghcr.io/",
            "ghcr.io//x",
            "a:b:c",
            "web@sha256:xyz",
            "ghcr.io:port/x",
            " nginx",
        ] {
            assert_eq!(parsed(reference), None, "{reference:?}");
        }
    }

    #[test]
    fn allow_list_entries_match_whole_segments() {
        let image = parse("ghcr.io/acme-evil/web").unwrap();
        assert!(!allowed_by(&image, "ghcr.io/acme"));
        assert!(allowed_by(&image, "ghcr.io"));
        let image = parse("ghcr.io/acme/web").unwrap();
        assert!(allowed_by(&image, "ghcr.io/acme"));
        assert!(allowed_by(&image, "ghcr.io/acme/web"));
        assert!(!allowed_by(&image, "docker.io"));
        assert!(allowed_by(&parse("nginx").unwrap(), "docker.io/library"));
        assert!(!allowed_by(
            &parse("evil.io/docker.io/x").unwrap(),
            "docker.io"
        ));
    }
}
