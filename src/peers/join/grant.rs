//! The grant: what a receiving cluster X gives a sending peer Y so that Y
//! can reach X's inbox for Y and verify X's signatures. It is the "join
//! file" of the two-halves workflow, and the value passed between the two
//! halves when one command reaches both clusters.
//!
//! Pure: parsing, validation and the kubeconfig built from a grant. A grant
//! file is outside input (it may have been edited, swapped or forged on its
//! way), so [`Grant::validate`] checks every field before anything is
//! written from it. The token never appears in Debug output or errors.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::error::{JoinError, Result};
use super::names::check_peer_name;
use crate::peers::check_kubeconfig;
use crate::trust::{PublicKeys, validate_public_keys};

/// `apiVersion` of a grant file.
pub const GRANT_API_VERSION: &str = "ferry.dev/v1alpha1";
/// `kind` of a grant file.
pub const GRANT_KIND: &str = "PeerGrant";

/// The longest token a grant may carry (service account tokens are a few
/// kilobytes at most).
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// Everything a sending peer needs to reach a receiving cluster and trust
/// its answers. Serialised as a YAML or JSON "join file"; it holds a bearer
/// token, so it is written readable by its owner only.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grant {
    /// Always [`GRANT_API_VERSION`].
    pub api_version: String,
    /// Always [`GRANT_KIND`].
    pub kind: String,
    /// The granting (receiving) cluster: the name its peers give it.
    pub cluster: String,
    /// The peer the grant is for: the name the granting cluster gives it.
    pub peer: String,
    /// The granting cluster's API server URL, as the peer must reach it.
    pub server: String,
    /// Base64 of the PEM CA bundle of that API server; absent: system roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority_data: Option<String>,
    /// A token of the peer's ServiceAccount in the granting cluster.
    pub token: String,
    /// When the token expires (RFC 3339), as the API server granted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The granting cluster's public keys, current first.
    pub public_keys: Vec<PublicKeys>,
    /// The granting cluster's region, for the peer's ClusterPeer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The granting cluster's labels, for the peer's ClusterPeer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Where the granting cluster's metrics are read, for the peer's ClusterPeer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<String>,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("cluster", &self.cluster)
            .field("peer", &self.peer)
            .field("server", &self.server)
            .field("token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .field("public_keys", &self.public_keys)
            .finish_non_exhaustive()
    }
}

impl Grant {
    /// Parses a grant file (YAML or JSON) and validates it.
    pub fn from_file_text(text: &str, allow_insecure: bool) -> Result<Self> {
        let grant: Grant = serde_saphyr::from_str(text)
            .map_err(|e| JoinError::invalid("the grant file", e.to_string()))?;
        grant.validate(allow_insecure)?;
        Ok(grant)
    }

    /// The grant as YAML, for a file.
    pub fn to_file_text(&self) -> Result<String> {
        serde_saphyr::to_string(self).map_err(|e| JoinError::invalid("grant", e.to_string()))
    }

    /// Checks every field; errors name the field. `allow_insecure` permits
    /// a plain-http server or Prometheus (local test clusters only).
    pub fn validate(&self, allow_insecure: bool) -> Result<()> {
        if self.api_version != GRANT_API_VERSION || self.kind != GRANT_KIND {
            return Err(JoinError::invalid(
                "apiVersion/kind",
                format!(
                    "{}/{} is not a Ferry grant ({GRANT_API_VERSION}/{GRANT_KIND})",
                    self.api_version, self.kind
                ),
            ));
        }
        check_peer_name("cluster", &self.cluster)?;
        check_peer_name("peer", &self.peer)?;
        if self.cluster == self.peer {
            return Err(JoinError::invalid(
                "peer",
                "names the granting cluster itself",
            ));
        }
        check_url("server", &self.server, allow_insecure)?;
        if let Some(ca) = &self.certificate_authority_data {
            let pem = STANDARD.decode(ca).map_err(|e| {
                JoinError::invalid("certificateAuthorityData", format!("is not base64: {e}"))
            })?;
            if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(JoinError::invalid(
                    "certificateAuthorityData",
                    "holds no PEM certificate",
                ));
            }
        }
        check_token(&self.token)?;
        if let Some(at) = &self.expires_at {
            at.parse::<jiff::Timestamp>().map_err(|e| {
                JoinError::invalid("expiresAt", format!("{at:?} is not RFC 3339: {e}"))
            })?;
        }
        validate_public_keys(&self.public_keys)
            .map_err(|e| JoinError::invalid("publicKeys", e.to_string()))?;
        if self.region.as_deref().is_some_and(str::is_empty) {
            return Err(JoinError::invalid("region", "is empty"));
        }
        if let Some(url) = &self.prometheus {
            check_url("prometheus", url, allow_insecure)?;
        }
        // The kubeconfig built from it must pass what the operator checks.
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.kubeconfig()?)
            .map_err(|e| JoinError::invalid("grant", format!("makes no kubeconfig: {e}")))?;
        check_kubeconfig(&kubeconfig, plain_http_allowances(allow_insecure))
            .map_err(|e| JoinError::invalid("grant", e.to_string()))
    }

    /// The kubeconfig the peer uses to reach the granting cluster: its
    /// server and CA, and the token as a bearer token. Nothing that reads a
    /// local file or runs a program.
    pub fn kubeconfig(&self) -> Result<String> {
        let mut cluster = serde_json::json!({"server": self.server});
        if let Some(ca) = &self.certificate_authority_data {
            cluster["certificate-authority-data"] = ca.clone().into();
        }
        let user = format!("ferry-peer-{}", self.peer);
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.cluster, "cluster": cluster}],
            "users": [{"name": user, "user": {"token": self.token}}],
            "contexts": [{"name": self.cluster, "context": {"cluster": self.cluster, "user": user}}],
            "current-context": self.cluster,
        });
        serde_saphyr::to_string(&config)
            .map_err(|e| JoinError::invalid("kubeconfig", e.to_string()))
    }
}

/// What `allow_insecure` lifts for a grant's kubeconfig: plain http and a
/// token sent over it (local test clusters), never anything else.
fn plain_http_allowances(allow_insecure: bool) -> crate::peers::Allowances {
    crate::peers::Allowances {
        switches: crate::crd::InsecureSwitches {
            plain_http: allow_insecure,
            credentials_over_plain_http: allow_insecure,
            ..Default::default()
        },
        credential_plugins: false,
    }
}

pub(crate) fn check_url(field: &str, url: &str, allow_insecure: bool) -> Result<()> {
    let lower = url.to_ascii_lowercase();
    let rest = if let Some(rest) = lower.strip_prefix("https://") {
        rest
    } else if let Some(rest) = lower.strip_prefix("http://") {
        if !allow_insecure {
            return Err(JoinError::invalid(
                field,
                format!(
                    "{url} is plain http; use https (or --allow-insecure for a local test cluster)"
                ),
            ));
        }
        rest
    } else {
        return Err(JoinError::invalid(
            field,
            format!("{url:?} is not an https URL"),
        ));
    };
    if rest.is_empty()
        || rest.starts_with('/')
        || url.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(JoinError::invalid(field, format!("{url:?} names no host")));
    }
    Ok(())
}

fn check_token(token: &str) -> Result<()> {
    if token.is_empty() || token.len() > MAX_TOKEN_LEN {
        return Err(JoinError::invalid(
            "token",
            format!("must hold 1 to {MAX_TOKEN_LEN} characters"),
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(JoinError::invalid(
            "token",
            "holds whitespace or characters a bearer token cannot",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::ClusterKeys;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn grant() -> Grant {
        Grant {
            api_version: GRANT_API_VERSION.into(),
            kind: GRANT_KIND.into(),
            cluster: "east".into(),
            peer: "west".into(),
            server: "https://east.example:6443".into(),
            certificate_authority_data: Some(STANDARD.encode(CA)),
            token: "eyJhbGciOi.abc.def".into(),
            expires_at: Some("2030-01-01T00:00:00Z".into()),
            public_keys: ClusterKeys::generate().unwrap().public_keys(),
            region: Some("eu-west-1".into()),
            labels: BTreeMap::new(),
            prometheus: None,
        }
    }

    #[test]
    fn a_grant_survives_its_file_and_makes_a_kubeconfig_the_operator_accepts() {
        let grant = grant();
        let text = grant.to_file_text().unwrap();
        let read = Grant::from_file_text(&text, false).unwrap();
        assert_eq!(read, grant);
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&grant.kubeconfig().unwrap()).unwrap();
        assert_eq!(check_kubeconfig(&kubeconfig, Default::default()), Ok(()));
        assert_eq!(kubeconfig.current_context.as_deref(), Some("east"));
    }

    #[test]
    fn debug_never_shows_the_token() {
        assert!(!format!("{:?}", grant()).contains("abc.def"));
    }

    /// One edit of a genuine grant.
    type Tamper = Box<dyn Fn(&mut Grant)>;

    #[test]
    fn a_tampered_grant_is_refused_naming_the_field() {
        let other_keys = ClusterKeys::generate().unwrap().public_keys();
        let mut forged_key = other_keys[0].clone();
        forged_key.signing = grant().public_keys[0].signing.clone();
        let cases: Vec<(&str, Tamper)> = vec![
            ("apiVersion/kind", Box::new(|g| g.kind = "Secret".into())),
            ("cluster", Box::new(|g| g.cluster = "East".into())),
            ("cluster", Box::new(|g| g.cluster = "a/../b".into())),
            ("peer", Box::new(|g| g.peer = "x".repeat(60))),
            ("peer", Box::new(|g| g.peer = "east".into())),
            ("server", Box::new(|g| g.server = "http://east:8080".into())),
            (
                "server",
                Box::new(|g| g.server = "file:///etc/passwd".into()),
            ),
            ("server", Box::new(|g| g.server = "https://".into())),
            (
                "certificateAuthorityData",
                Box::new(|g| g.certificate_authority_data = Some("!!".into())),
            ),
            (
                "certificateAuthorityData",
                Box::new(|g| g.certificate_authority_data = Some(STANDARD.encode("hello"))),
            ),
            ("token", Box::new(|g| g.token = String::new())),
            ("token", Box::new(|g| g.token = "abc\nexec: evil".into())),
            (
                "expiresAt",
                Box::new(|g| g.expires_at = Some("tomorrow".into())),
            ),
            ("publicKeys", Box::new(|g| g.public_keys.clear())),
            (
                "publicKeys",
                Box::new(move |g| g.public_keys = vec![forged_key.clone()]),
            ),
            ("region", Box::new(|g| g.region = Some(String::new()))),
            (
                "prometheus",
                Box::new(|g| g.prometheus = Some("http://prom:9090".into())),
            ),
        ];
        for (field, tamper) in cases {
            let mut g = grant();
            tamper(&mut g);
            match g.validate(false) {
                Err(JoinError::Invalid { field: got, .. }) => assert_eq!(got, field),
                other => panic!("{field}: expected a refusal, got {other:?}"),
            }
        }
    }

    #[test]
    fn unknown_fields_in_a_file_are_refused() {
        let text = grant().to_file_text().unwrap() + "exec: /bin/sh\n";
        assert!(Grant::from_file_text(&text, false).is_err());
    }

    #[test]
    fn plain_http_needs_allow_insecure() {
        let mut g = grant();
        g.server = "http://127.0.0.1:8080".into();
        g.certificate_authority_data = None;
        assert!(g.validate(true).is_ok());
    }
}
