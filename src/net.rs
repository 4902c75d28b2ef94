//! HTTP clients for what Ferry fetches outside the Kubernetes API:
//! Prometheus servers and policy modules served over https.

use std::time::Duration;

use base64::Engine as _;
use kube::client::ConfigExt;

/// A client for `uri` with kube's rustls setup (ring provider): the system's
/// trust store, or only `ca_pem` when given; no TLS trust at all over plain
/// http, where none is used. Redirects are not followed: a server may not
/// send Ferry somewhere else.
pub fn http_client(
    uri: &http::Uri,
    ca_pem: Option<&[u8]>,
    bearer_token: Option<&str>,
    timeout: Duration,
) -> Result<reqwest::Client, String> {
    let mut tls = kube::Config::new(uri.clone());
    tls.root_cert = match (ca_pem, uri.scheme_str()) {
        (Some(pem), _) => Some(pem_certificates(pem)?),
        (None, Some("https")) => None,
        (None, _) => Some(Vec::new()),
    };
    let mut tls = tls
        .rustls_client_config()
        .map_err(|e| format!("TLS setup: {e}"))?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut headers = http::HeaderMap::new();
    if let Some(token) = bearer_token {
        let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "the bearer token is not a valid header value".to_owned())?;
        value.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, value);
    }
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout)
        .timeout(timeout)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

/// The DER bytes of every `CERTIFICATE` block of a PEM bundle.
pub fn pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "the CA bundle is not PEM text".to_owned())?;
    let mut certs = Vec::new();
    let mut body: Option<String> = None;
    for line in text.lines().map(str::trim) {
        match (&mut body, line) {
            (None, "-----BEGIN CERTIFICATE-----") => body = Some(String::new()),
            (Some(b), "-----END CERTIFICATE-----") => {
                let der = base64::engine::general_purpose::STANDARD
                    .decode(b.as_bytes())
                    .map_err(|_| "the CA bundle holds invalid base64".to_owned())?;
                certs.push(der);
                body = None;
            }
            (Some(b), line) => b.push_str(line),
            (None, _) => {}
        }
    }
    if body.is_some() {
        return Err("the CA bundle ends inside a certificate".to_owned());
    }
    if certs.is_empty() {
        return Err("the CA bundle holds no certificate".to_owned());
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::pem_certificates;

    #[test]
    fn pem_bundle_yields_each_certificate() {
        let pem = b"junk\n-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nAwQF\n-----END CERTIFICATE-----\n";
        assert_eq!(
            pem_certificates(pem).unwrap(),
            vec![vec![0, 1, 2], vec![3, 4, 5]]
        );
        assert!(pem_certificates(b"-----BEGIN CERTIFICATE-----\nAAEC\n").is_err());
        assert!(pem_certificates(b"nothing here").is_err());
        assert!(
            pem_certificates(b"-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n")
                .is_err()
        );
    }
}
