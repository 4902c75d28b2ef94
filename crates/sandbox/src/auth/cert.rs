//! Client certificates: the sandbox's CA signs them for named users, the TLS
//! layer asks every client for one, and a leaf the CA signed names its user
//! (subject CN) and groups (subject O), as kube-apiserver's x509
//! authenticator reads them.
//!
//! Like kube-apiserver (Go's `RequestClientCert`), the handshake accepts any
//! certificate whose key the client proves it holds, and the chain is judged
//! after the handshake: a certificate from another CA then leaves the
//! request without a certificate identity (a 401 unless a bearer token
//! authenticates it), instead of failing the connection. This must never
//! name a user from a certificate the sandbox's CA did not sign.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    CertificateParams, DistinguishedName, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SigningKey,
};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::attributes::AUTHENTICATED;
use super::{ClientCertificate, UserInfo, der};
use crate::error::{Error, Result};

/// The sandbox CA's side of client certificates: it signs them and checks them.
pub(crate) struct ClientCa {
    issuer: Issuer<'static, KeyPair>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCa").finish_non_exhaustive()
    }
}

impl ClientCa {
    /// Trust `ca` (the certificate of `issuer`) for client certificates.
    pub(crate) fn new(
        issuer: Issuer<'static, KeyPair>,
        ca: CertificateDer<'static>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self> {
        let mut roots = RootCertStore::empty();
        roots.add(ca)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(Error::ClientVerifier)?;
        Ok(Self { issuer, verifier })
    }

    /// The verifier the TLS server uses: it asks for a certificate, does not
    /// require one, and leaves the chain to [`identify`](Self::identify).
    pub(crate) fn handshake_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::new(Requested(self.verifier.clone()))
    }

    /// The identity in a chain the client presented, if the sandbox's CA
    /// signed its leaf for client authentication and it names a user.
    pub(crate) fn identify(&self, chain: &[CertificateDer<'_>]) -> Option<ClientCertificate> {
        let (leaf, intermediates) = chain.split_first()?;
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .ok()?;
        let subject = der::subject(leaf)?;
        // kube-apiserver ignores a certificate without a common name.
        if subject.common_name.is_empty() {
            return None;
        }
        Some(ClientCertificate {
            common_name: subject.common_name,
            organizations: subject.organizations,
        })
    }

    /// A client certificate and its private key (both PEM) for `user` in
    /// `groups`, signed by the sandbox's CA. It is valid as long as the CA,
    /// that is for the sandbox's life.
    pub(crate) fn mint(&self, user: &str, groups: &[String]) -> Result<(String, String)> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name = DistinguishedName::new();
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        let signed = params.signed_by(&key, &self.issuer)?;
        // rcgen writes one value per attribute type; groups need one O each.
        let subject = der::name(user, groups);
        let issuer_key = self.issuer.key();
        let der = der::with_subject(signed.der(), &subject, |tbs| issuer_key.sign(tbs).ok())
            .ok_or_else(|| Error::ClientCertificate {
                user: user.to_owned(),
            })?;
        Ok((pem("CERTIFICATE", &der), key.serialize_pem()))
    }
}

/// The user a verified certificate names.
pub(crate) fn user(certificate: &ClientCertificate) -> UserInfo {
    let mut groups = certificate.organizations.clone();
    groups.push(AUTHENTICATED.to_owned());
    UserInfo {
        name: certificate.common_name.clone(),
        uid: String::new(),
        groups,
    }
}

/// PEM armour, 64 base64 characters a line.
fn pem(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Asks for a client certificate, accepts the handshake with or without one,
/// and checks only that the client holds the key of the certificate it sent.
#[derive(Debug)]
struct Requested(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for Requested {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> std::result::Result<ClientCertVerified, rustls::Error> {
        // Judged after the handshake by `ClientCa::identify`.
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::BasicConstraints;

    fn ca(name: &str) -> ClientCa {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let cert = params.self_signed(&key).expect("ca");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        ClientCa::new(Issuer::new(params, key), cert.der().clone(), provider).expect("ca")
    }

    fn chain(pem_text: &str) -> Vec<CertificateDer<'static>> {
        let body: String = pem_text
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        vec![CertificateDer::from(STANDARD.decode(body).expect("base64"))]
    }

    #[test]
    fn a_minted_certificate_names_its_user_and_every_group() {
        let ca = ca("one");
        let groups = vec!["system:masters".to_string(), "team-a".to_string()];
        let (cert, key) = ca.mint("alice", &groups).expect("minted");
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        let identity = ca.identify(&chain(&cert)).expect("verified");
        assert_eq!(identity.common_name, "alice");
        assert_eq!(identity.organizations, groups);
        let user = user(&identity);
        assert_eq!(
            user.groups,
            vec!["system:masters", "team-a", "system:authenticated"]
        );
    }

    #[test]
    fn a_certificate_from_another_ca_names_nobody() {
        let (cert, _) = ca("other").mint("mallory", &[]).expect("minted");
        assert_eq!(ca("ours").identify(&chain(&cert)), None);
        assert_eq!(ca("ours").identify(&[]), None);
    }
}
