//! A real `nats-server` (Debian's, with JetStream) for the NATS transport
//! tests: on a free loopback port, TLS with a CA minted per server, file
//! storage in a temporary directory, one nkey user per cluster with the
//! permissions `docs/transport-nats.md` gives, plus an admin user. Killed on
//! drop; [`NatsServer::restart`] starts it again on the same port and store.

use super::ports::free_port;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ferry::migration::nats::{
    NatsConfig, NatsLink, NatsTiming, REQUEST_STREAM, STATUS_STREAM, inbox_prefix,
    request_consumer, request_filter, status_consumer, status_filter,
};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

use super::cluster::{WAIT, eventually};

/// One user of the broker: its nkey seed (what the cluster holds) and
/// public key (what the server lists).
pub struct NatsUser {
    pub name: String,
    pub seed: String,
    pub public: String,
}

impl NatsUser {
    fn new(name: &str) -> Self {
        let pair = nkeys::KeyPair::new_user();
        Self {
            name: name.to_owned(),
            seed: pair.seed().expect("an nkey seed"),
            public: pair.public_key(),
        }
    }
}

/// One server of the broker.
struct Node {
    child: Option<Child>,
    port: u16,
    cluster_port: u16,
}

pub struct NatsServer {
    nodes: Vec<Node>,
    dir: tempfile::TempDir,
    tls: bool,
    pub clusters: Vec<NatsUser>,
    pub admin: NatsUser,
}

/// The permissions of cluster `c`'s user: publish requests and statuses
/// only as itself, use only its own two durable consumers, receive only on
/// its own inboxes.
pub fn cluster_permissions(c: &str) -> serde_json::Value {
    let (req, st) = (REQUEST_STREAM, STATUS_STREAM);
    let (rc, sc) = (request_consumer(c), status_consumer(c));
    serde_json::json!({
        "publish": {"allow": [
            format!("ferry.v1.req.*.{c}"),
            format!("ferry.v1.status.*.{c}.*"),
            "$JS.API.INFO",
            format!("$JS.API.STREAM.INFO.{req}"),
            format!("$JS.API.STREAM.INFO.{st}"),
            format!("$JS.API.CONSUMER.CREATE.{req}.{rc}.{}", request_filter(c)),
            format!("$JS.API.CONSUMER.INFO.{req}.{rc}"),
            format!("$JS.API.CONSUMER.MSG.NEXT.{req}.{rc}"),
            format!("$JS.ACK.{req}.{rc}.>"),
            format!("$JS.API.CONSUMER.CREATE.{st}.{sc}.{}", status_filter(c)),
            format!("$JS.API.CONSUMER.INFO.{st}.{sc}"),
            format!("$JS.API.CONSUMER.DELETE.{st}.{sc}"),
            format!("$JS.API.CONSUMER.MSG.NEXT.{st}.{sc}"),
            format!("$JS.ACK.{st}.{sc}.>"),
        ]},
        "subscribe": {"allow": [format!("{}.>", inbox_prefix(c))]},
    })
}

fn server_binary() -> PathBuf {
    for dir in std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .chain(["/usr/sbin", "/usr/bin"])
    {
        let candidate = Path::new(dir).join("nats-server");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("nats-server is not installed: apt-get install nats-server");
}

/// A CA and a server certificate for 127.0.0.1, written to `dir`.
fn write_tls(dir: &Path) {
    let ca_key = KeyPair::generate().expect("key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "ferry test NATS CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("CA");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("params");
    let cert = params.signed_by(&key, &issuer).expect("server certificate");
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).expect("ca.pem");
    std::fs::write(dir.join("server.pem"), cert.pem()).expect("server.pem");
    std::fs::write(dir.join("server-key.pem"), key.serialize_pem()).expect("server-key.pem");
}

impl NatsServer {
    /// A broker with TLS and one user per name in `clusters` (plus `admin`).
    pub async fn start(clusters: &[&str]) -> Self {
        Self::start_with(clusters, true).await
    }

    /// A broker without TLS (to check that Ferry refuses it).
    pub async fn start_plaintext(clusters: &[&str]) -> Self {
        Self::start_with(clusters, false).await
    }

    /// A JetStream cluster of three servers, with TLS and the same users.
    pub async fn start_cluster(clusters: &[&str]) -> Self {
        Self::start_nodes(clusters, true, 3).await
    }

    async fn start_with(clusters: &[&str], tls: bool) -> Self {
        Self::start_nodes(clusters, tls, 1).await
    }

    async fn start_nodes(clusters: &[&str], tls: bool, count: usize) -> Self {
        let dir = tempfile::tempdir().expect("a directory for the broker");
        write_tls(dir.path());
        let nodes = (0..count)
            .map(|_| Node {
                child: None,
                port: free_port(),
                cluster_port: free_port(),
            })
            .collect();
        let mut server = NatsServer {
            nodes,
            dir,
            tls,
            clusters: clusters.iter().map(|c| NatsUser::new(c)).collect(),
            admin: NatsUser::new("admin"),
        };
        for i in 0..count {
            server.write_config(i);
        }
        for i in 0..count {
            server.spawn(i).await;
        }
        server
    }

    fn write_config(&self, index: usize) {
        let d = self.dir.path();
        let node = &self.nodes[index];
        let mut users: Vec<serde_json::Value> = self
            .clusters
            .iter()
            .map(|u| serde_json::json!({"nkey": u.public, "permissions": cluster_permissions(&u.name)}))
            .collect();
        users.push(serde_json::json!({"nkey": self.admin.public}));
        let mut config = serde_json::json!({
            "listen": format!("127.0.0.1:{}", node.port),
            "server_name": format!("ferry-test-{index}"),
            "jetstream": {"store_dir": d.join(format!("js-{index}")).display().to_string()},
            "authorization": {"users": users},
        });
        if self.nodes.len() > 1 {
            let routes: Vec<String> = self
                .nodes
                .iter()
                .map(|n| format!("nats-route://127.0.0.1:{}", n.cluster_port))
                .collect();
            config["cluster"] = serde_json::json!({
                "name": "ferry-test",
                "listen": format!("127.0.0.1:{}", node.cluster_port),
                "routes": routes,
            });
        }
        if self.tls {
            config["tls"] = serde_json::json!({
                "cert_file": d.join("server.pem").display().to_string(),
                "key_file": d.join("server-key.pem").display().to_string(),
                "timeout": 5,
            });
        }
        // The server's configuration format reads JSON.
        std::fs::write(d.join(format!("nats-{index}.conf")), config.to_string())
            .expect("nats.conf");
    }

    async fn spawn(&mut self, index: usize) {
        let child = Command::new(server_binary())
            .arg("-c")
            .arg(self.dir.path().join(format!("nats-{index}.conf")))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        self.nodes[index].child = Some(child);
        let port = self.nodes[index].port;
        eventually("nats-server to listen", WAIT, || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
        })
        .await;
    }

    /// Stops every server of the broker (their stores stay).
    pub fn kill(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill_node(i);
        }
    }

    /// Stops one server of the broker.
    pub fn kill_node(&mut self, index: usize) {
        if let Some(mut child) = self.nodes[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops and starts the broker on the same ports with the same stores.
    pub async fn restart(&mut self) {
        self.kill();
        for i in 0..self.nodes.len() {
            self.spawn(i).await;
        }
    }

    /// Every server, comma-separated.
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("nats://127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn seed_file(&self, user: &NatsUser) -> PathBuf {
        let path = self.dir.path().join(format!("{}.nk", user.name));
        std::fs::write(&path, &user.seed).expect("seed file");
        path
    }

    /// The configuration cluster `name` connects with (quick test timing).
    pub fn config_for(&self, name: &str) -> NatsConfig {
        let user = if name == "admin" {
            &self.admin
        } else {
            self.clusters
                .iter()
                .find(|u| u.name == name)
                .expect("a user for the cluster")
        };
        let mut config = NatsConfig::new(self.url());
        config.ca_file = Some(self.ca_file());
        config.nkey_seed_file = Some(self.seed_file(user));
        config.timing = test_timing();
        config.timing.stream_replicas = self.nodes.len();
        config
    }

    /// Cluster `name`'s link to the broker.
    pub async fn link(&self, name: &str) -> NatsLink {
        let config = self.config_for(name);
        let client = ferry::migration::nats::connect(&config, name)
            .await
            .expect("connected to the broker");
        NatsLink::new(client, name, config.timing)
    }

    /// Creates the two streams as the admin.
    pub async fn provision(&self) {
        let config = self.config_for("admin");
        let client = ferry::migration::nats::connect(&config, "admin")
            .await
            .expect("admin connected");
        let timing = config.timing.clone();
        eventually("the streams to exist", WAIT, || {
            let (client, timing) = (client.clone(), timing.clone());
            async move {
                ferry::migration::nats::ensure_streams(&client, &timing)
                    .await
                    .ok()
            }
        })
        .await;
    }

    /// The admin's JetStream context, for assertions.
    pub async fn admin(&self) -> async_nats::jetstream::Context {
        let config = self.config_for("admin");
        let client = ferry::migration::nats::connect(&config, "admin")
            .await
            .expect("admin connected");
        async_nats::jetstream::new(client)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Timing for tests: quick retries, short waits.
pub fn test_timing() -> NatsTiming {
    NatsTiming {
        ack_wait: Duration::from_secs(2),
        backoff: vec![Duration::from_millis(200), Duration::from_millis(500)],
        fetch_wait: Duration::from_millis(500),
        retry_delay: Duration::from_millis(100),
        connect_timeout: Duration::from_secs(2),
        ..NatsTiming::default()
    }
}
