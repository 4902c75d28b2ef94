//! Credentials for identities other than the administrator, minted through
//! the Rust API: client certificates the sandbox's CA signs for named users,
//! ServiceAccount tokens signed as `TokenRequest` signs them, and the
//! kubeconfigs that carry either. Tests use them to act as a user or a
//! ServiceAccount; `ferry sandbox serve` writes them for `--user` and
//! `--service-account`.
//!
//! It must never mint what the server would not accept by its own rules:
//! a token names an existing ServiceAccount, a certificate comes from the
//! sandbox's own CA. The holder of a [`Sandbox`] owns its keys, so unlike
//! `TokenRequest` the lifetime of a token is not bounded here.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use super::{Sandbox, new_namespace, stamped, write_private};
use crate::auth::token::{API_AUDIENCES, SERVICE_ACCOUNTS, username};
use crate::auth::token_request::issue;
use crate::error::{Error, Result};
use crate::object::is_dns_subdomain;
use crate::store::NAMESPACE_KEY;

/// Someone a kubeconfig can be minted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// A user with a client certificate: subject CN `name`, one O per group.
    User {
        /// The user name.
        name: String,
        /// The groups (`system:authenticated` is added by the server).
        groups: Vec<String>,
    },
    /// A ServiceAccount, with a token.
    ServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl Identity {
    /// A user from `NAME[:GROUP,...]` (the form of `--user`); the name
    /// therefore cannot contain `:`, nor a group `,`.
    pub fn parse_user(text: &str) -> std::result::Result<Self, String> {
        let (name, groups) = text.split_once(':').unwrap_or((text, ""));
        if name.is_empty() {
            return Err(format!("{text:?}: expected NAME[:GROUP,...]"));
        }
        let groups: Vec<String> = groups
            .split(',')
            .filter(|g| !g.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(Self::User {
            name: name.to_owned(),
            groups,
        })
    }

    /// A ServiceAccount from `NAMESPACE/NAME` (the form of `--service-account`).
    pub fn parse_service_account(text: &str) -> std::result::Result<Self, String> {
        match text.split_once('/') {
            Some((namespace, name)) if is_dns_subdomain(namespace) && is_dns_subdomain(name) => {
                Ok(Self::ServiceAccount {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(format!(
                "{text:?}: expected NAMESPACE/NAME, both lowercase DNS names"
            )),
        }
    }

    /// The user name the server knows it by.
    pub fn username(&self) -> String {
        match self {
            Self::User { name, .. } => name.clone(),
            Self::ServiceAccount { namespace, name } => username(namespace, name),
        }
    }

    /// Where its kubeconfig goes beside the administrator's at `admin`:
    /// `DIR/STEM-user-NAME[.EXT]` or `DIR/STEM-sa-NAMESPACE-NAME[.EXT]`,
    /// with characters other than letters, digits, `.`, `_` and `-` in a
    /// user name written as `_`.
    pub fn kubeconfig_path(&self, admin: &Path) -> PathBuf {
        let stem = admin
            .file_stem()
            .map_or_else(|| "kubeconfig".into(), |s| s.to_string_lossy());
        let who = match self {
            Self::User { name, .. } => {
                let safe: String = name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || "._-".contains(c) {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                format!("user-{safe}")
            }
            Self::ServiceAccount { namespace, name } => format!("sa-{namespace}-{name}"),
        };
        let mut file = format!("{stem}-{who}");
        if let Some(extension) = admin.extension() {
            file.push('.');
            file.push_str(&extension.to_string_lossy());
        }
        admin.with_file_name(file)
    }
}

impl Sandbox {
    /// A kubeconfig for the user `name` in `groups`, with a client
    /// certificate the sandbox's CA signed (valid for the sandbox's life).
    pub fn kubeconfig_for_user(&self, name: &str, groups: &[&str]) -> Result<String> {
        let groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        let (certificate, key) = self.cluster.keys.client_ca.mint(name, &groups)?;
        let credential = format!(
            "client-certificate-data: {}\nclient-key-data: {}",
            STANDARD.encode(certificate),
            STANDARD.encode(key)
        );
        Ok(self.kubeconfig_with_user(name, &credential))
    }

    /// A kubeconfig for the existing ServiceAccount `namespace/name`, with
    /// a token valid for `ttl` (see [`service_account_token`](Self::service_account_token)).
    pub fn kubeconfig_for_service_account(
        &self,
        namespace: &str,
        name: &str,
        ttl: Duration,
    ) -> Result<String> {
        let token = self.service_account_token(namespace, name, ttl)?;
        let token = serde_json::Value::String(token).to_string();
        Ok(self.kubeconfig_with_user(&username(namespace, name), &format!("token: {token}")))
    }

    /// The kubeconfig of `identity`; `ttl` is a ServiceAccount token's lifetime.
    pub fn kubeconfig_for(&self, identity: &Identity, ttl: Duration) -> Result<String> {
        match identity {
            Identity::User { name, groups } => {
                let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
                self.kubeconfig_for_user(name, &groups)
            }
            Identity::ServiceAccount { namespace, name } => {
                self.kubeconfig_for_service_account(namespace, name, ttl)
            }
        }
    }

    /// Write [`kubeconfig_for`](Self::kubeconfig_for) to `path` (mode 0600).
    pub fn write_kubeconfig_for(
        &self,
        path: impl AsRef<Path>,
        identity: &Identity,
        ttl: Duration,
    ) -> Result<()> {
        write_private(path.as_ref(), &self.kubeconfig_for(identity, ttl)?)
    }

    /// A token for the existing ServiceAccount `namespace/name`, for the
    /// API's audience, valid for `ttl` from now: what `kubectl create token`
    /// returns, without `TokenRequest`'s bounds on the lifetime.
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        ttl: Duration,
    ) -> Result<String> {
        let now = jiff::Timestamp::now().as_second();
        let seconds = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
        self.token_between(namespace, name, now, now.saturating_add(seconds))
    }

    /// A token for the existing ServiceAccount `namespace/name` that
    /// expires at `expires_at`, which may lie in the past: for testing how
    /// clients meet an expired credential. The server honours `exp` with
    /// kube-apiserver's leeway of 60 seconds.
    pub fn service_account_token_expiring_at(
        &self,
        namespace: &str,
        name: &str,
        expires_at: SystemTime,
    ) -> Result<String> {
        let now = jiff::Timestamp::now().as_second();
        let exp = match expires_at.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
            Err(before) => -i64::try_from(before.duration().as_secs()).unwrap_or(i64::MAX),
        };
        self.token_between(namespace, name, now.min(exp), exp)
    }

    fn token_between(
        &self,
        namespace: &str,
        name: &str,
        issued: i64,
        expires: i64,
    ) -> Result<String> {
        let audiences = API_AUDIENCES.map(str::to_owned).to_vec();
        issue(
            &self.cluster,
            (namespace, name),
            audiences,
            (issued, expires),
            None,
        )
        .map_err(|e| Error::ServiceAccount {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            reason: e.message,
        })
    }

    /// Create the ServiceAccount `namespace/name`, and its namespace, where
    /// they do not exist yet.
    pub fn create_service_account(&self, namespace: &str, name: &str) -> Result<()> {
        if !(is_dns_subdomain(namespace) && is_dns_subdomain(name)) {
            return Err(Error::ServiceAccount {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                reason: "namespace and name must be lowercase DNS names".into(),
            });
        }
        let cluster = &self.cluster;
        cluster.write(|state| {
            if state.get(NAMESPACE_KEY, "", namespace).is_none() {
                state.put(NAMESPACE_KEY, new_namespace(cluster, namespace));
            }
            if state.get(SERVICE_ACCOUNTS, namespace, name).is_none() {
                let account = json!({
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": name, "namespace": namespace},
                });
                state.put(SERVICE_ACCOUNTS, stamped(cluster, account));
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_into_identities() {
        assert_eq!(
            Identity::parse_user("alice:dev,ops"),
            Ok(Identity::User {
                name: "alice".into(),
                groups: vec!["dev".into(), "ops".into()]
            })
        );
        assert_eq!(
            Identity::parse_user("bob"),
            Ok(Identity::User {
                name: "bob".into(),
                groups: vec![]
            })
        );
        assert!(Identity::parse_user(":dev").is_err());
        assert_eq!(
            Identity::parse_service_account("team/bot"),
            Ok(Identity::ServiceAccount {
                namespace: "team".into(),
                name: "bot".into()
            })
        );
        for bad in ["bot", "team/", "/bot", "Team/bot", "a/b/c"] {
            assert!(Identity::parse_service_account(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kubeconfigs_go_beside_the_admins() {
        let admin = Path::new("/tmp/x/trial.kubeconfig");
        let user = Identity::User {
            name: "system:node:a/b".into(),
            groups: vec![],
        };
        assert_eq!(
            user.kubeconfig_path(admin),
            Path::new("/tmp/x/trial-user-system_node_a_b.kubeconfig")
        );
        let sa = Identity::parse_service_account("team/bot").expect("sa");
        assert_eq!(
            sa.kubeconfig_path(Path::new("/tmp/x/kubeconfig")),
            Path::new("/tmp/x/kubeconfig-sa-team-bot")
        );
        assert_eq!(sa.username(), "system:serviceaccount:team:bot");
    }
}
