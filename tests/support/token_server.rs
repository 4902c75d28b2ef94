//! The token service of the distribution spec's Bearer flow, for a real
//! `docker-registry` configured with `auth: token`: it checks the test
//! user's Basic credentials and answers with an ES256 JWT for the asked
//! scope, signed by a certificate that the registry's `rootcertbundle`
//! holds (sent in the `x5c` header). The registry itself verifies every
//! token. Plain http on a free 127.0.0.1 port; stopped on drop.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use base64::Engine as _;
use rcgen::{CertificateParams, DnType, KeyPair};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

pub const SERVICE: &str = "ferry-test-registry";
pub const ISSUER: &str = "ferry-test-token-issuer";

pub struct TokenServer {
    pub addr: SocketAddr,
    /// The PEM of the certificate that signs tokens, for `rootcertbundle`.
    pub cert_pem: String,
    /// Tokens handed out.
    pub issued: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TokenServer {
    /// Serves tokens to whoever presents `user:password`.
    pub fn start(user: &str, password: &str) -> TokenServer {
        let key = KeyPair::generate().expect("token key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "Ferry test token issuer");
        let cert = params.self_signed(&key).expect("token certificate");
        let rng = ring::rand::SystemRandom::new();
        let signer =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &key.serialize_der(), &rng)
                .expect("token signer");
        let x5c = base64::engine::general_purpose::STANDARD.encode(cert.der());
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind token server");
        let addr = listener.local_addr().expect("address");
        let stop = Arc::new(AtomicBool::new(false));
        let issued = Arc::new(AtomicUsize::new(0));
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        let thread = std::thread::spawn({
            let (stop, issued) = (stop.clone(), issued.clone());
            move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let token = |scope: &str| token(&signer, &rng, &x5c, scope);
                    if answer(stream, &expected, token) {
                        issued.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        });
        TokenServer {
            addr,
            cert_pem: cert.pem(),
            issued,
            stop,
            thread: Some(thread),
        }
    }

    pub fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers one request; true when it handed out a token.
fn answer(stream: TcpStream, expected: &str, token: impl Fn(&str) -> String) -> bool {
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return false;
    }
    let mut authorized = false;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("authorization")
        {
            authorized = value.trim() == expected;
        }
    }
    let target = request_line.split_whitespace().nth(1).unwrap_or_default();
    let scope = target
        .split_once('?')
        .map(|(_, query)| query)
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("scope="))
        .map(|s| {
            s.replace("%3A", ":")
                .replace("%2C", ",")
                .replace("%2F", "/")
        })
        .unwrap_or_default();
    let (status, body, issued) = if authorized {
        let body = serde_json::json!({"token": token(&scope)}).to_string();
        ("200 OK", body, true)
    } else {
        (
            "401 Unauthorized",
            r#"{"errors":[{"code":"UNAUTHORIZED"}]}"#.to_owned(),
            false,
        )
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    issued
}

/// An ES256 JWT granting `scope` (`repository:name:pull,push`).
fn token(signer: &EcdsaKeyPair, rng: &ring::rand::SystemRandom, x5c: &str, scope: &str) -> String {
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = scope.splitn(3, ':');
    let access = match (parts.next(), parts.next(), parts.next()) {
        (Some(kind), Some(name), Some(actions)) => serde_json::json!([{
            "type": kind, "name": name,
            "actions": actions.split(',').collect::<Vec<_>>(),
        }]),
        _ => serde_json::json!([]),
    };
    let now = jiff::Timestamp::now().as_second();
    let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [x5c]});
    let claims = serde_json::json!({
        "iss": ISSUER, "sub": "ferry", "aud": SERVICE,
        "exp": now + 600, "nbf": now - 60, "iat": now,
        "jti": format!("{now}-{}", scope.len()),
        "access": access,
    });
    let signing_input = format!(
        "{}.{}",
        url.encode(header.to_string()),
        url.encode(claims.to_string())
    );
    let signature = signer
        .sign(rng, signing_input.as_bytes())
        .expect("sign token");
    format!("{signing_input}.{}", url.encode(signature.as_ref()))
}
