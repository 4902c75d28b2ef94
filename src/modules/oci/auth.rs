//! Registry credentials and the distribution spec's challenges: a
//! `~/.docker/config.json` (or a `kubernetes.io/dockerconfigjson` Secret,
//! the same format) gives a user name and password per registry; a `401`
//! names the scheme. `Basic` sends them with every request; `Bearer` trades
//! them (or nothing, for anonymous pulls) at the challenge's realm for a
//! token scoped to one repository.

use std::collections::BTreeMap;

use base64::Engine as _;

/// A user name and password (or identity token) for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the password, whatever logs the value.
        write!(f, "Credentials({}, ****)", self.username)
    }
}

impl Credentials {
    /// The `Authorization` value of Basic auth.
    pub(crate) fn basic_header(&self) -> String {
        let pair = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DockerConfigError {
    #[error("the docker config is not JSON with an `auths` object: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error(
        "the docker config entry for {registry} has an `auth` that is not base64 of user:password"
    )]
    BadAuth { registry: String },
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(serde::Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The credentials a docker config holds for `registry` (`host[:port]`),
/// if any. An entry matches when its key, stripped of a scheme and path, is
/// exactly the registry: credentials never go to another host or port.
/// Credential helpers (`credsStore`, `credHelpers`) are not run.
pub fn credentials_for(
    config_json: &[u8],
    registry: &str,
) -> Result<Option<Credentials>, DockerConfigError> {
    let config: DockerConfig = serde_json::from_slice(config_json)?;
    for (key, entry) in config.auths {
        let host = key
            .strip_prefix("https://")
            .or_else(|| key.strip_prefix("http://"))
            .unwrap_or(&key);
        let host = host.split('/').next().unwrap_or_default();
        if host != registry {
            continue;
        }
        if let (Some(username), Some(password)) = (&entry.username, &entry.password) {
            return Ok(Some(Credentials {
                username: username.clone(),
                password: password.clone(),
            }));
        }
        let Some(auth) = entry.auth.filter(|a| !a.is_empty()) else {
            continue;
        };
        let bad = || DockerConfigError::BadAuth {
            registry: registry.to_owned(),
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| bad())?;
        let decoded = String::from_utf8(decoded).map_err(|_| bad())?;
        let (username, password) = decoded.split_once(':').ok_or_else(bad)?;
        return Ok(Some(Credentials {
            username: username.to_owned(),
            password: password.to_owned(),
        }));
    }
    Ok(None)
}

/// What a `WWW-Authenticate` header asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

/// Parses `Basic realm="…"` or `Bearer realm="…",service="…",scope="…"`.
pub(crate) fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, params) = header.split_once(' ').unwrap_or((header, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let params = parse_params(params);
    Some(Challenge::Bearer {
        realm: params.get("realm")?.clone(),
        service: params.get("service").cloned(),
        scope: params.get("scope").cloned(),
    })
}

/// `key="value", key=value` pairs; quoted values may hold commas.
fn parse_params(text: &str) -> BTreeMap<String, String> {
    let mut params = BTreeMap::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            },
            None => match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            },
        };
        params.insert(key, value.to_owned());
        rest = after.trim_start().trim_start_matches(',').trim_start();
    }
    params
}

/// The token a token endpoint answers with (`token`, or OAuth2's
/// `access_token`).
#[derive(serde::Deserialize)]
pub(crate) struct TokenResponse {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

impl TokenResponse {
    pub(crate) fn into_token(self) -> Option<String> {
        self.token
            .or(self.access_token)
            .filter(|token| !token.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_credentials_match_the_registry_exactly() {
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret:x");
        let config = format!(
            r#"{{"auths": {{
                "https://registry.example:5000/v1/": {{"auth": "{auth}"}},
                "other.example": {{"username": "bob", "password": "pw"}}
            }}, "credsStore": "desktop"}}"#
        );
        let found = credentials_for(config.as_bytes(), "registry.example:5000")
            .unwrap()
            .unwrap();
        assert_eq!(found.username, "alice");
        assert_eq!(found.password, "s3cret:x", "only the first colon splits");
        assert_eq!(
            credentials_for(config.as_bytes(), "other.example")
                .unwrap()
                .unwrap()
                .username,
            "bob"
        );
        assert!(
            credentials_for(config.as_bytes(), "registry.example")
                .unwrap()
                .is_none(),
            "another port is another registry"
        );
        assert!(!format!("{found:?}").contains("s3cret"));
        assert!(credentials_for(br#"{"auths": {"r": {"auth": "!!"}}}"#, "r").is_err());
    }

    #[test]
    fn challenges_parse_with_quoted_commas() {
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull,push".into()),
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge("Negotiate"), None);
        assert_eq!(parse_challenge("Bearer service=x"), None, "no realm");
    }
}
