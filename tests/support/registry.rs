//! A real OCI registry for the distribution tests: Debian's
//! `docker-registry` (distribution 2.8), on a free 127.0.0.1 port, storing
//! in a temporary directory, with TLS from a CA made for the test (or plain
//! http when a test asks for it), optionally behind htpasswd Basic auth or
//! the Bearer token flow ([`TokenServer`]).
//! Killed on drop.

use super::ports::free_port;
use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::token_server::{self, TokenServer};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

/// The user name and password of [`RegistryOptions::basic_auth`].
pub const USER: &str = "ferry";
pub const PASSWORD: &str = "ferry-test-password";
/// bcrypt of [`PASSWORD`], as htpasswd stores it.
const PASSWORD_BCRYPT: &str = "$2b$12$yh0fTnwFkBs/1OOfstZa6OFSiQPCK0Dbew58bJHSbqRSfiILeJtPS";

#[derive(Clone, Copy, Debug, Default)]
pub struct RegistryOptions {
    /// Serve plain http instead of TLS.
    pub plain_http: bool,
    /// Require [`USER`] and [`PASSWORD`] (Basic auth).
    pub basic_auth: bool,
    /// Require Bearer tokens from a [`TokenServer`] that takes [`USER`] and
    /// [`PASSWORD`]; with plain http (the token realm is plain http too).
    pub token_auth: bool,
}

pub struct Registry {
    child: Child,
    pub addr: SocketAddr,
    /// The PEM of the CA that signed the registry's certificate.
    pub ca_pem: String,
    /// Where the CA is written, for `--ca-file`.
    pub ca_file: PathBuf,
    pub dir: tempfile::TempDir,
    /// The token service, with `token_auth`.
    pub tokens: Option<TokenServer>,
}

/// `docker-registry`: `$FERRY_DOCKER_REGISTRY`, else Debian's.
fn binary() -> PathBuf {
    let path = std::env::var_os("FERRY_DOCKER_REGISTRY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/docker-registry"));
    assert!(
        path.is_file(),
        "docker-registry is missing at {} (apt-get install docker-registry, or set FERRY_DOCKER_REGISTRY)",
        path.display()
    );
    path
}

impl Registry {
    pub fn start(options: RegistryOptions) -> Registry {
        let dir = tempfile::tempdir().expect("tempdir");
        let (ca_pem, cert_pem, key_pem) = certificates();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write registry file");
            path
        };
        let ca_file = write("ca.pem", &ca_pem);
        let cert = write("cert.pem", &cert_pem);
        let key = write("key.pem", &key_pem);
        let htpasswd = write("htpasswd", &format!("{USER}:{PASSWORD_BCRYPT}\n"));
        let port = free_port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: ferry-test-secret\n",
            dir.path().join("data").display()
        );
        if !options.plain_http {
            config.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                cert.display(),
                key.display()
            ));
        }
        if options.basic_auth {
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: ferry-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let tokens = options
            .token_auth
            .then(|| TokenServer::start(USER, PASSWORD));
        if let Some(tokens) = &tokens {
            let bundle = write("token-ca.pem", &tokens.cert_pem);
            config.push_str(&format!(
                "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    rootcertbundle: {}\n",
                tokens.realm(),
                token_server::SERVICE,
                token_server::ISSUER,
                bundle.display()
            ));
        }
        let config_path = write("config.yml", &config);
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log file");
        let child = Command::new(binary())
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut registry = Registry {
            child,
            addr,
            ca_pem,
            ca_file,
            dir,
            tokens,
        };
        registry.wait_until_listening();
        registry
    }

    /// `127.0.0.1:port`, the registry part of a reference.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// `oci://127.0.0.1:port/path`.
    pub fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.host())
    }

    /// A docker config.json holding the test user's credentials for it.
    pub fn docker_config(&self) -> String {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
        format!(
            r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#,
            self.host()
        )
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    fn wait_until_listening(&mut self) {
        let started = Instant::now();
        while TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("docker-registry exited ({status}):\n{}", self.log());
            }
            assert!(
                started.elapsed() < super::cluster::WAIT,
                "docker-registry did not listen on {}:\n{}",
                self.addr,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Writes `text` into a file of the registry's directory; its path.
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        let mut file = std::fs::File::create(&path).expect("create");
        file.write_all(text.as_bytes()).expect("write");
        path
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA, and a certificate it signed for 127.0.0.1 and localhost, with its
/// key: (CA PEM, certificate PEM, key PEM).
fn certificates() -> (String, String, String) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Ferry test registry CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("key");
    let mut leaf = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    leaf.subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    let cert = leaf.signed_by(&key, &issuer).expect("certificate");
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}
