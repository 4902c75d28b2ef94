//! What a `ClusterPeer` spec may make the operator do before anything is
//! read or sent: which Secrets it may point at, and how its Prometheus may be
//! reached. Pure: no client.
//!
//! `ClusterPeer` is cluster-scoped, so whoever may create one is not
//! thereby allowed to read Secrets in any namespace. Its Secret references
//! are honoured only in the operator's own namespace (`ferry run
//! --ferry-namespace`). A CEL rule on the CRD cannot say this, since the namespace
//! is chosen when the operator is installed, so this check is the only guard,
//! and every reader of a peer's Secrets must pass it BEFORE the read.
//!
//! This module must never let a switch lift the namespace rule.

use crate::crd::{ClusterPeerSpec, SecretKeyRef};

use super::kubeconfig::is_https;
use super::reasons;

/// A part of a `ClusterPeer` spec the operator refuses to act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecRefusal {
    /// A Secret reference outside the operator's namespace.
    #[error(
        "{field} is {namespace:?}: a ClusterPeer may reference Secrets only in the operator's namespace {allowed:?}"
    )]
    SecretOutsideNamespace {
        field: &'static str,
        namespace: String,
        allowed: String,
    },
    /// A plain-http Prometheus without `insecure.plainHTTP`.
    #[error("spec.prometheus.url is plain http ({url}); set spec.insecure.plainHTTP to allow it")]
    PlainHttpPrometheus { url: String },
    /// A bearer token bound for a plain-http Prometheus without
    /// `insecure.credentialsOverPlainHTTP`.
    #[error(
        "spec.prometheus.bearerTokenSecretRef would be sent over plain http ({url}); set spec.insecure.credentialsOverPlainHTTP to allow it"
    )]
    TokenOverPlainHttp { url: String },
}

impl SpecRefusal {
    /// The condition reason for this refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            SpecRefusal::SecretOutsideNamespace { .. } => reasons::SECRET_OUTSIDE_NAMESPACE,
            SpecRefusal::PlainHttpPrometheus { .. } | SpecRefusal::TokenOverPlainHttp { .. } => {
                reasons::INSECURE_PROMETHEUS
            }
        }
    }
}

/// The kubeconfig reference, checked against `namespace`, the operator's.
/// No reference: nothing to check (the controller reports the missing
/// kubeconfig of a `Kube` peer itself).
pub fn check_kubeconfig_ref(spec: &ClusterPeerSpec, namespace: &str) -> Result<(), SpecRefusal> {
    match &spec.kubeconfig_secret_ref {
        Some(key) => in_namespace("spec.kubeconfigSecretRef.namespace", key, namespace),
        None => Ok(()),
    }
}

/// `spec.prometheus`: its Secret references in `namespace`, plain http only
/// with `insecure.plainHTTP`, a bearer token over it only with
/// `insecure.credentialsOverPlainHTTP` as well. No prometheus: nothing to
/// check (the peer is read from the shared one, with the operator's settings).
pub fn check_prometheus(spec: &ClusterPeerSpec, namespace: &str) -> Result<(), SpecRefusal> {
    let Some(prometheus) = &spec.prometheus else {
        return Ok(());
    };
    if let Some(token) = &prometheus.bearer_token_secret_ref {
        in_namespace(
            "spec.prometheus.bearerTokenSecretRef.namespace",
            token,
            namespace,
        )?;
    }
    if let Some(ca) = &prometheus.ca_secret_ref {
        in_namespace("spec.prometheus.caSecretRef.namespace", ca, namespace)?;
    }
    if is_https(&prometheus.url) {
        return Ok(());
    }
    let url = prometheus.url.clone();
    if !spec.insecure.plain_http {
        return Err(SpecRefusal::PlainHttpPrometheus { url });
    }
    if prometheus.bearer_token_secret_ref.is_some() && !token_over_plain_http(spec) {
        return Err(SpecRefusal::TokenOverPlainHttp { url });
    }
    Ok(())
}

/// Whether the peer lets its Prometheus bearer token travel over plain http:
/// both switches, whatever a schema that did not run CEL let through.
pub fn token_over_plain_http(spec: &ClusterPeerSpec) -> bool {
    spec.insecure.plain_http && spec.insecure.credentials_over_plain_http
}

fn in_namespace(
    field: &'static str,
    key: &SecretKeyRef,
    namespace: &str,
) -> Result<(), SpecRefusal> {
    if key.namespace == namespace {
        Ok(())
    } else {
        Err(SpecRefusal::SecretOutsideNamespace {
            field,
            namespace: key.namespace.clone(),
            allowed: namespace.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{InsecureSwitches, PrometheusEndpoint};

    const OWN: &str = "ferry-system";

    fn key(namespace: &str) -> SecretKeyRef {
        SecretKeyRef {
            namespace: namespace.into(),
            name: "s".into(),
            key: "k".into(),
        }
    }

    fn spec(url: &str, token: Option<&str>, ca: Option<&str>) -> ClusterPeerSpec {
        serde_json::from_value::<ClusterPeerSpec>(serde_json::json!({
            "kubeconfigSecretRef": {"namespace": OWN, "name": "b", "key": "kubeconfig"},
            "region": "eu",
        }))
        .map(|mut spec| {
            spec.prometheus = Some(PrometheusEndpoint {
                url: url.into(),
                cluster_label: None,
                bearer_token_secret_ref: token.map(key),
                ca_secret_ref: ca.map(key),
            });
            spec
        })
        .expect("spec")
    }

    #[test]
    fn secrets_elsewhere_are_refused_naming_the_field() {
        let mut peer = spec("https://p", None, None);
        peer.kubeconfig_secret_ref = Some(key("kube-system"));
        let refusal = check_kubeconfig_ref(&peer, OWN).unwrap_err();
        assert_eq!(refusal.reason(), reasons::SECRET_OUTSIDE_NAMESPACE);
        assert!(
            refusal
                .to_string()
                .starts_with("spec.kubeconfigSecretRef.namespace is \"kube-system\""),
            "{refusal}"
        );
        let cases = [
            (
                spec("https://p", Some("other"), None),
                "spec.prometheus.bearerTokenSecretRef.namespace",
            ),
            (
                spec("https://p", Some(OWN), Some("other")),
                "spec.prometheus.caSecretRef.namespace",
            ),
        ];
        for (mut peer, field) in cases {
            // Every switch on: none of them lifts the namespace rule.
            peer.insecure = InsecureSwitches {
                skip_tls_verify: true,
                plain_http: true,
                credentials_over_plain_http: true,
                local_files: true,
                credential_plugins: true,
            };
            match check_prometheus(&peer, OWN) {
                Err(SpecRefusal::SecretOutsideNamespace { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        assert_eq!(
            check_prometheus(&spec("https://p", Some(OWN), Some(OWN)), OWN),
            Ok(())
        );
    }

    #[test]
    fn plain_http_prometheus_needs_the_switch_and_a_token_needs_both() {
        let bare = spec("http://p:9090", None, None);
        assert!(matches!(
            check_prometheus(&bare, OWN),
            Err(SpecRefusal::PlainHttpPrometheus { .. })
        ));
        let mut plain = bare.clone();
        plain.insecure.plain_http = true;
        assert_eq!(check_prometheus(&plain, OWN), Ok(()));

        let mut token = spec("http://p:9090", Some(OWN), None);
        token.insecure.plain_http = true;
        let refusal = check_prometheus(&token, OWN).unwrap_err();
        assert!(
            refusal.to_string().contains("credentialsOverPlainHTTP"),
            "{refusal}"
        );
        assert_eq!(refusal.reason(), reasons::INSECURE_PROMETHEUS);
        // credentialsOverPlainHTTP alone (a schema that did not run CEL) is not enough.
        token.insecure.plain_http = false;
        token.insecure.credentials_over_plain_http = true;
        assert!(check_prometheus(&token, OWN).is_err());
        token.insecure.plain_http = true;
        assert_eq!(check_prometheus(&token, OWN), Ok(()));
        assert!(token_over_plain_http(&token));
    }

    #[test]
    fn https_and_no_prometheus_pass() {
        let mut none = spec("https://p", None, None);
        assert_eq!(
            check_prometheus(&spec("HTTPS://p", Some(OWN), None), OWN),
            Ok(())
        );
        none.prometheus = None;
        assert_eq!(check_prometheus(&none, OWN), Ok(()));
    }
}
