//! Parsing request paths and query strings into what they address. Pure.

use std::collections::HashMap;

/// Where a request goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Version,
    Health,
    OpenApi,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/GROUP`
    Group(String),
    /// `/api/v1` or `/apis/GROUP/VERSION`
    Resources {
        group: String,
        version: String,
    },
    /// A resource, a collection or a subresource.
    Object(Target),
}

/// A resource path, before its resource type is looked up.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
    /// The deprecated `/watch/` path prefix was used.
    pub(crate) watch_path: bool,
}

/// Route a request path; `None` when it names nothing this server serves.
pub(crate) fn route(path: &str) -> Option<Route> {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let s: Vec<&str> = segments.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["version"] => Some(Route::Version),
        ["healthz" | "livez" | "readyz", ..] => Some(Route::Health),
        ["openapi", ..] => Some(Route::OpenApi),
        ["api"] => Some(Route::CoreVersions),
        ["apis"] => Some(Route::Groups),
        ["apis", group] => Some(Route::Group(group.to_string())),
        ["api", version] => Some(Route::Resources {
            group: String::new(),
            version: version.to_string(),
        }),
        ["apis", group, version] => Some(Route::Resources {
            group: group.to_string(),
            version: version.to_string(),
        }),
        ["api", version, rest @ ..] => target("", version, rest).map(Route::Object),
        ["apis", group, version, rest @ ..] => target(group, version, rest).map(Route::Object),
        _ => None,
    }
}

fn target(group: &str, version: &str, rest: &[&str]) -> Option<Target> {
    let (watch_path, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let mut t = Target {
        group: group.into(),
        version: version.into(),
        watch_path,
        ..Target::default()
    };
    let resource_part = match rest {
        // A namespace object itself, possibly with a subresource.
        ["namespaces"] => rest,
        ["namespaces", name] => {
            t.name = Some(name.to_string());
            &rest[..1]
        }
        ["namespaces", name, sub @ ("status" | "finalize")] => {
            t.name = Some(name.to_string());
            t.subresource = Some(sub.to_string());
            &rest[..1]
        }
        ["namespaces", ns, rest @ ..] => {
            t.namespace = Some(ns.to_string());
            rest
        }
        _ => rest,
    };
    match resource_part {
        [plural] => t.plural = plural.to_string(),
        [plural, name] => {
            t.plural = plural.to_string();
            t.name = Some(name.to_string());
        }
        [plural, name, sub] => {
            t.plural = plural.to_string();
            t.name = Some(name.to_string());
            t.subresource = Some(sub.to_string());
        }
        _ => return None,
    }
    Some(t)
}

/// Decoded query parameters (last value wins).
pub(crate) fn query(q: Option<&str>) -> HashMap<String, String> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(&v.replace('+', " ")))
        })
        .collect()
}

/// `%XX` decoding; invalid escapes are kept as they are.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_object_paths_are_split() {
        let Some(Route::Object(t)) = route("/apis/apps/v1/namespaces/ns/deployments/web/scale")
        else {
            panic!("not an object route");
        };
        assert_eq!(
            (t.group.as_str(), t.plural.as_str()),
            ("apps", "deployments")
        );
        assert_eq!(t.namespace.as_deref(), Some("ns"));
        assert_eq!(t.name.as_deref(), Some("web"));
        assert_eq!(t.subresource.as_deref(), Some("scale"));
    }

    #[test]
    fn a_namespace_is_an_object_not_a_scope() {
        let Some(Route::Object(t)) = route("/api/v1/namespaces/team-a") else {
            panic!()
        };
        assert_eq!(
            (t.plural.as_str(), t.name.as_deref(), t.namespace),
            ("namespaces", Some("team-a"), None)
        );
        let Some(Route::Object(t)) = route("/api/v1/watch/namespaces/a/configmaps") else {
            panic!()
        };
        assert!(t.watch_path);
        assert_eq!(
            (t.plural.as_str(), t.namespace.as_deref()),
            ("configmaps", Some("a"))
        );
    }

    #[test]
    fn queries_are_decoded() {
        let q = query(Some("labelSelector=app%3Dweb%2Ctier+in+(a)&watch=1"));
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["watch"], "1");
    }
}
