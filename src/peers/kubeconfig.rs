//! From kubeconfig text to a `kube::Client`, refusing what is unsafe to
//! accept from a Secret. Pure except for building the client (no I/O).
//!
//! Refused unless the peer sets `allowInsecure`:
//! - `insecure-skip-tls-verify` (anyone on the path can impersonate the peer);
//! - a plain `http://` server (the token travels in clear);
//! - `exec` and `auth-provider` credential plugins (a Secret writer could run
//!   any program inside the operator's pod);
//! - references to local files (`certificate-authority`, `client-certificate`,
//!   `client-key`, `tokenFile`): a Secret writer could make the operator read
//!   and send its own files (for example its service account token).

use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::reasons;

/// Why a kubeconfig cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigRefusal {
    /// It does not parse, or names no usable cluster.
    #[error("the kubeconfig is not usable: {0}")]
    Invalid(String),
    /// It is unsafe and the peer does not set `allowInsecure`.
    #[error("the kubeconfig is refused without allowInsecure: {0}")]
    Insecure(String),
}

impl KubeconfigRefusal {
    /// The condition reason for this refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            KubeconfigRefusal::Invalid(_) => reasons::INVALID_KUBECONFIG,
            KubeconfigRefusal::Insecure(_) => reasons::INSECURE_KUBECONFIG,
        }
    }
}

/// Checks every cluster and user of the kubeconfig against the rules in the
/// module documentation. `allow_insecure` lifts all of them.
pub fn check_kubeconfig(
    kubeconfig: &Kubeconfig,
    allow_insecure: bool,
) -> Result<(), KubeconfigRefusal> {
    if allow_insecure {
        return Ok(());
    }
    let mut problems = Vec::new();
    for named in &kubeconfig.clusters {
        let Some(cluster) = &named.cluster else {
            continue;
        };
        let name = &named.name;
        if cluster.insecure_skip_tls_verify == Some(true) {
            problems.push(format!("cluster {name} sets insecure-skip-tls-verify"));
        }
        if let Some(server) = &cluster.server
            && server.trim().to_ascii_lowercase().starts_with("http://")
        {
            problems.push(format!("cluster {name} uses plain http ({server})"));
        }
        if cluster.certificate_authority.is_some() {
            problems.push(format!(
                "cluster {name} reads certificate-authority from a local file; use certificate-authority-data"
            ));
        }
    }
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else {
            continue;
        };
        let name = &named.name;
        if user.exec.is_some() {
            problems.push(format!("user {name} runs an exec credential plugin"));
        }
        if user.auth_provider.is_some() {
            problems.push(format!("user {name} uses an auth-provider plugin"));
        }
        if user.token_file.is_some()
            || user.client_certificate.is_some()
            || user.client_key.is_some()
        {
            problems.push(format!(
                "user {name} reads credentials from local files; use token or client-*-data"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(KubeconfigRefusal::Insecure(problems.join("; ")))
    }
}

/// Parses, checks and turns kubeconfig text into a client whose requests
/// time out: `connect_timeout` to establish a connection, `read_timeout` per
/// response read (watches are not used on peer clients).
pub async fn client_from_kubeconfig(
    text: &str,
    allow_insecure: bool,
    connect_timeout: Duration,
    read_timeout: Duration,
) -> Result<Client, KubeconfigRefusal> {
    let kubeconfig =
        Kubeconfig::from_yaml(text).map_err(|e| KubeconfigRefusal::Invalid(e.to_string()))?;
    check_kubeconfig(&kubeconfig, allow_insecure)?;
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

    #[test]
    fn https_with_ca_data_and_a_token_is_accepted() {
        assert_eq!(
            check_kubeconfig(&kubeconfig(SAFE_CLUSTER, TOKEN_USER), false),
            Ok(())
        );
    }

    #[test]
    fn unsafe_kubeconfigs_are_refused_with_the_reason() {
        let cases = [
            (
                "    server: https://p:6443\n    insecure-skip-tls-verify: true",
                TOKEN_USER,
                "insecure-skip-tls-verify",
            ),
            ("    server: http://p:8080", TOKEN_USER, "plain http"),
            (
                "    server: https://p:6443\n    certificate-authority: /etc/ca.pem",
                TOKEN_USER,
                "local file",
            ),
            (
                SAFE_CLUSTER,
                "    exec:\n      command: /bin/sh\n      apiVersion: client.authentication.k8s.io/v1",
                "exec credential plugin",
            ),
            (
                SAFE_CLUSTER,
                "    auth-provider:\n      name: gcp\n      config: {}",
                "auth-provider",
            ),
            (
                SAFE_CLUSTER,
                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
                "local files",
            ),
        ];
        for (cluster, user, expected) in cases {
            let config = kubeconfig(cluster, user);
            match check_kubeconfig(&config, false) {
                Err(KubeconfigRefusal::Insecure(message)) => {
                    assert!(message.contains(expected), "{message} lacks {expected}")
                }
                other => panic!("{expected}: expected a refusal, got {other:?}"),
            }
            assert_eq!(check_kubeconfig(&config, true), Ok(()), "{expected}");
        }
    }

    #[tokio::test]
    async fn garbage_is_invalid_not_insecure() {
        let result = client_from_kubeconfig(
            "clusters: 7",
            false,
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
