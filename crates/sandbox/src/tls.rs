//! Certificates generated at start: a CA and a serving certificate for
//! 127.0.0.1 and localhost signed by it; the bearer token. The same CA
//! signs client certificates (see `auth/cert.rs`), which the server asks for.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use crate::auth::cert::ClientCa;
use crate::error::Result;

/// What a client needs to trust the server, the server's TLS setup, and the
/// CA's side of client certificates.
pub(crate) struct Tls {
    pub(crate) ca_pem: String,
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) client_ca: ClientCa,
}

pub(crate) fn generate(name: &str) -> Result<Tls> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("ferry-sandbox-ca {name}"));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let provider = Arc::new(rustls::crypto::ring::default_provider());

    let key = KeyPair::generate()?;
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("ferry-sandbox {name}"));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer)?;
    let client_ca = ClientCa::new(issuer, ca_cert.der().clone(), provider.clone())?;

    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(client_ca.handshake_verifier())
        .with_single_cert(
            vec![cert.der().clone(), ca_cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Tls {
        ca_pem: ca_cert.pem(),
        acceptor: TlsAcceptor::from(Arc::new(config)),
        client_ca,
    })
}

/// A random bearer token (hex of 32 bytes from the TLS provider's RNG).
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    let provider = rustls::crypto::ring::default_provider();
    if provider.secure_random.fill(&mut bytes).is_err() {
        // The system RNG failing is not recoverable in any useful way; fall
        // back to the clock so start-up still succeeds.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (nanos >> ((i % 16) * 8)) as u8;
        }
    }
    bytes
}
