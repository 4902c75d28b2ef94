//! From kubeconfig text to a `kube::Client`, refusing what is unsafe to
//! accept from a Secret. Pure except for building the client (no I/O).
//!
//! Each rule is lifted by exactly one switch of `spec.insecure`, never by
//! another one:
//! - `insecure-skip-tls-verify` (anyone on the path can impersonate the
//!   peer): `skipTLSVerify`;
//! - a plain `http://` server: `plainHTTP`; a token, a password or a
//!   credential plugin over it (they travel in clear): `credentialsOverPlainHTTP`
//!   as well;
//! - references to local files (`certificate-authority`,
//!   `client-certificate`, `client-key`, `tokenFile`): a Secret writer could
//!   make the operator read and send its own files (for example its
//!   ServiceAccount token): `localFiles`;
//! - `exec` and `auth-provider` credential plugins (a Secret writer could run
//!   any program inside the operator's pod): `credentialPlugins`, and only
//!   when the operator itself runs with `--allow-credential-plugins`.
//!
//! This module must never build a client from a kubeconfig the checks refused.

use std::time::Duration;

use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::reasons;
use crate::crd::InsecureSwitches;

/// The operator's own flag that must allow credential plugins before any
/// peer may use one.
pub const PLUGINS_FLAG: &str = "--allow-credential-plugins (chart value credentialPlugins.allow)";

/// Why a kubeconfig cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigRefusal {
    /// It does not parse, or names no usable cluster.
    #[error("the kubeconfig is not usable: {0}")]
    Invalid(String),
    /// It is unsafe and the peer does not set the switch that allows it. The
    /// message names each problem and its switch.
    #[error("the kubeconfig is refused: {0}")]
    Insecure(String),
    /// It uses a credential plugin the peer allows but the operator does not.
    #[error("the kubeconfig is refused: {0}")]
    PluginsDisabled(String),
}

impl KubeconfigRefusal {
    /// The condition reason for this refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            KubeconfigRefusal::Invalid(_) => reasons::INVALID_KUBECONFIG,
            KubeconfigRefusal::Insecure(_) => reasons::INSECURE_KUBECONFIG,
            KubeconfigRefusal::PluginsDisabled(_) => reasons::CREDENTIAL_PLUGINS_DISABLED,
        }
    }
}

/// What may lift the kubeconfig rules: the peer's switches, and the
/// operator's own permission for credential plugins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Allowances {
    /// The peer's `spec.insecure`.
    pub switches: InsecureSwitches,
    /// The operator runs with `--allow-credential-plugins`.
    pub credential_plugins: bool,
}

/// One refused part of a kubeconfig: what it is, and who could allow it.
struct Problem {
    what: String,
    /// `None`: the peer allows it and only the operator's flag is missing.
    switch: Option<&'static str>,
}

impl Problem {
    fn needs(what: String, switch: &'static str) -> Self {
        Problem {
            what,
            switch: Some(switch),
        }
    }

    fn describe(&self, plugins_allowed: bool) -> String {
        match (self.switch, plugins_allowed) {
            (Some("credentialPlugins"), false) => format!(
                "{} (set spec.insecure.credentialPlugins, and run the operator with {PLUGINS_FLAG})",
                self.what
            ),
            (Some(switch), _) => format!("{} (set spec.insecure.{switch} to allow it)", self.what),
            (None, _) => format!(
                "{}, which this operator refuses (run it with {PLUGINS_FLAG})",
                self.what
            ),
        }
    }
}

/// Checks every cluster and user of the kubeconfig against the rules in the
/// module documentation; each switch lifts its own rule only.
pub fn check_kubeconfig(
    kubeconfig: &Kubeconfig,
    allow: Allowances,
) -> Result<(), KubeconfigRefusal> {
    let switches = allow.switches;
    let mut problems = Vec::new();
    let mut plain_http = Vec::new();
    for named in &kubeconfig.clusters {
        let Some(cluster) = &named.cluster else {
            continue;
        };
        let name = &named.name;
        if cluster.insecure_skip_tls_verify == Some(true) && !switches.skip_tls_verify {
            problems.push(Problem::needs(
                format!("cluster {name} sets insecure-skip-tls-verify"),
                "skipTLSVerify",
            ));
        }
        if let Some(server) = &cluster.server
            && !is_https(server)
        {
            plain_http.push(name.clone());
            if !switches.plain_http {
                problems.push(Problem::needs(
                    format!("cluster {name} uses plain http ({server})"),
                    "plainHTTP",
                ));
            }
        }
        if cluster.certificate_authority.is_some() && !switches.local_files {
            problems.push(Problem::needs(
                format!(
                    "cluster {name} reads certificate-authority from a local file; use certificate-authority-data"
                ),
                "localFiles",
            ));
        }
    }
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else {
            continue;
        };
        check_user(&named.name, user, allow, &mut problems);
        if !plain_http.is_empty()
            && sends_credentials(user)
            && !switches.credentials_over_plain_http
        {
            problems.push(Problem::needs(
                format!(
                    "user {} would send credentials over plain http to cluster {}",
                    named.name,
                    plain_http.join(", ")
                ),
                "credentialsOverPlainHTTP",
            ));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let only_the_operator = problems.iter().all(|p| p.switch.is_none());
    let message = problems
        .iter()
        .map(|p| p.describe(allow.credential_plugins))
        .collect::<Vec<_>>()
        .join("; ");
    Err(if only_the_operator {
        KubeconfigRefusal::PluginsDisabled(message)
    } else {
        KubeconfigRefusal::Insecure(message)
    })
}

fn check_user(name: &str, user: &AuthInfo, allow: Allowances, problems: &mut Vec<Problem>) {
    let switches = allow.switches;
    let plugins = [
        (user.exec.is_some(), "runs an exec credential plugin"),
        (user.auth_provider.is_some(), "uses an auth-provider plugin"),
    ];
    for (used, what) in plugins {
        if !used {
            continue;
        }
        let what = format!("user {name} {what}");
        if !switches.credential_plugins {
            problems.push(Problem::needs(what, "credentialPlugins"));
        } else if !allow.credential_plugins {
            problems.push(Problem { what, switch: None });
        }
    }
    if (user.token_file.is_some() || user.client_certificate.is_some() || user.client_key.is_some())
        && !switches.local_files
    {
        problems.push(Problem::needs(
            format!("user {name} reads credentials from local files; use token or client-*-data"),
            "localFiles",
        ));
    }
}

/// Whether a request as this user carries a secret a listener could reuse.
/// (A client certificate is not sent over plain http: there is no TLS.)
fn sends_credentials(user: &AuthInfo) -> bool {
    user.token.is_some()
        || user.token_file.is_some()
        || user.username.is_some()
        || user.password.is_some()
        || user.exec.is_some()
        || user.auth_provider.is_some()
}

/// Anything but `https://` counts as plain: a scheme the check does not
/// know must not slip through as safe.
pub(crate) fn is_https(url: &str) -> bool {
    url.trim().to_ascii_lowercase().starts_with("https://")
}

/// Parses, checks and turns kubeconfig text into a client whose requests
/// time out: `connect_timeout` to establish a connection, `read_timeout` per
/// response read (watches are not used on peer clients).
pub async fn client_from_kubeconfig(
    text: &str,
    allow: Allowances,
    connect_timeout: Duration,
    read_timeout: Duration,
) -> Result<Client, KubeconfigRefusal> {
    let kubeconfig =
        Kubeconfig::from_yaml(text).map_err(|e| KubeconfigRefusal::Invalid(e.to_string()))?;
    check_kubeconfig(&kubeconfig, allow)?;
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| KubeconfigRefusal::Invalid(e.to_string()))?;
    config.connect_timeout = Some(connect_timeout);
    config.read_timeout = Some(read_timeout);
    Client::try_from(config).map_err(|e| KubeconfigRefusal::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(cluster: &str, user: &str) -> Kubeconfig {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n{cluster}\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        );
        Kubeconfig::from_yaml(&text).expect("test kubeconfig parses")
    }

    const SAFE_CLUSTER: &str =
        "    server: https://peer.example:6443\n    certificate-authority-data: Zm9v";
    const TOKEN_USER: &str = "    token: abc";
    const NO_USER: &str = "    {}";
    const EXEC_USER: &str =
        "    exec:\n      command: /bin/sh\n      apiVersion: client.authentication.k8s.io/v1";

    fn switches(names: &[&str]) -> InsecureSwitches {
        InsecureSwitches {
            skip_tls_verify: names.contains(&"skipTLSVerify"),
            plain_http: names.contains(&"plainHTTP"),
            credentials_over_plain_http: names.contains(&"credentialsOverPlainHTTP"),
            local_files: names.contains(&"localFiles"),
            credential_plugins: names.contains(&"credentialPlugins"),
        }
    }

    fn peer_allows(names: &[&str]) -> Allowances {
        Allowances {
            switches: switches(names),
            credential_plugins: false,
        }
    }

    #[test]
    fn https_with_ca_data_and_a_token_is_accepted() {
        assert_eq!(
            check_kubeconfig(&kubeconfig(SAFE_CLUSTER, TOKEN_USER), Allowances::default()),
            Ok(())
        );
    }

    /// Each unsafe kubeconfig is refused naming its switch; that switch, and
    /// no other one, lets it through.
    #[test]
    fn each_switch_lifts_its_own_rule_only() {
        let cases = [
            (
                "    server: https://p:6443\n    insecure-skip-tls-verify: true",
                TOKEN_USER,
                "skipTLSVerify",
            ),
            ("    server: http://p:8080", NO_USER, "plainHTTP"),
            ("    server: HTTP://p:8080", NO_USER, "plainHTTP"),
            (
                "    server: https://p:6443\n    certificate-authority: /etc/ca.pem",
                TOKEN_USER,
                "localFiles",
            ),
            (
                SAFE_CLUSTER,
                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
                "localFiles",
            ),
            (
                SAFE_CLUSTER,
                "    client-certificate: /etc/c.pem\n    client-key: /etc/k.pem",
                "localFiles",
            ),
        ];
        let all = [
            "skipTLSVerify",
            "plainHTTP",
            "credentialsOverPlainHTTP",
            "localFiles",
            "credentialPlugins",
        ];
        for (cluster, user, needed) in cases {
            let config = kubeconfig(cluster, user);
            match check_kubeconfig(&config, Allowances::default()) {
                Err(KubeconfigRefusal::Insecure(message)) => assert!(
                    message.contains(&format!("spec.insecure.{needed}")),
                    "{message} does not name {needed}"
                ),
                other => panic!("{needed}: expected a refusal, got {other:?}"),
            }
            let others: Vec<&str> = all.iter().copied().filter(|s| *s != needed).collect();
            assert!(
                check_kubeconfig(&config, peer_allows(&others)).is_err(),
                "{needed}: the other switches lifted it"
            );
            assert_eq!(
                check_kubeconfig(&config, peer_allows(&[needed])),
                Ok(()),
                "{needed}"
            );
        }
    }

    #[test]
    fn credentials_over_plain_http_need_their_own_switch() {
        let plain = "    server: http://p:8080";
        for user in [TOKEN_USER, "    username: a\n    password: b"] {
            let config = kubeconfig(plain, user);
            let refused = check_kubeconfig(&config, peer_allows(&["plainHTTP"]));
            match refused {
                Err(KubeconfigRefusal::Insecure(message)) => {
                    assert!(message.contains("credentialsOverPlainHTTP"), "{message}")
                }
                other => panic!("{user}: expected a refusal, got {other:?}"),
            }
            assert_eq!(
                check_kubeconfig(
                    &config,
                    peer_allows(&["plainHTTP", "credentialsOverPlainHTTP"])
                ),
                Ok(())
            );
        }
    }

    #[test]
    fn credential_plugins_need_the_peer_and_the_operator() {
        let auth_provider = "    auth-provider:\n      name: gcp\n      config: {}";
        for user in [EXEC_USER, auth_provider] {
            let config = kubeconfig(SAFE_CLUSTER, user);
            // Neither allows: the peer's switch and the operator's flag are named.
            match check_kubeconfig(&config, Allowances::default()) {
                Err(KubeconfigRefusal::Insecure(m)) => {
                    assert!(m.contains("spec.insecure.credentialPlugins"), "{m}");
                    assert!(m.contains("--allow-credential-plugins"), "{m}");
                }
                other => panic!("expected a refusal, got {other:?}"),
            }
            // The operator allows, the peer does not.
            let operator_only = Allowances {
                switches: InsecureSwitches::default(),
                credential_plugins: true,
            };
            assert!(matches!(
                check_kubeconfig(&config, operator_only),
                Err(KubeconfigRefusal::Insecure(_))
            ));
            // The peer allows, the operator does not: its own reason.
            let refusal = check_kubeconfig(&config, peer_allows(&["credentialPlugins"]))
                .expect_err("the operator's flag is off");
            assert_eq!(refusal.reason(), reasons::CREDENTIAL_PLUGINS_DISABLED);
            assert!(refusal.to_string().contains("--allow-credential-plugins"));
            // Both allow.
            let both = Allowances {
                switches: switches(&["credentialPlugins"]),
                credential_plugins: true,
            };
            assert_eq!(check_kubeconfig(&config, both), Ok(()));
        }
    }

    #[tokio::test]
    async fn garbage_is_invalid_not_insecure() {
        let result = client_from_kubeconfig(
            "clusters: 7",
            Allowances::default(),
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
        .await;
        match result {
            Err(err) => assert_eq!(err.reason(), reasons::INVALID_KUBECONFIG),
            Ok(_) => panic!("garbage built a client"),
        }
    }
}
