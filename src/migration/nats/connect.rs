//! The fleet's NATS connection: where the broker is, how this cluster
//! proves who it is, and the two streams every cluster shares.
//!
//! TLS is required unless the operator is started with
//! `--nats-allow-plaintext`, as an insecure kubeconfig is refused unless
//! its peer opts in: over plain `nats://` anyone on the path reads every
//! request, workload manifests included.

use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream::{self, stream};

use super::subjects::{REQUEST_STREAM, REQUEST_SUBJECTS, STATUS_STREAM, STATUS_SUBJECTS};
use crate::migration::error::{Error, Result};

/// How this cluster reaches the fleet's broker.
#[derive(Clone)]
pub struct NatsConfig {
    /// The broker, `tls://host:port` or `nats://host:port` (several,
    /// comma-separated, for a cluster of servers).
    pub url: String,
    /// A PEM bundle of the CAs that sign the broker's certificate.
    pub ca_file: Option<PathBuf>,
    /// A NATS credentials file (user JWT and nkey seed).
    pub creds_file: Option<PathBuf>,
    /// A file holding this cluster's nkey seed (`SU…`).
    pub nkey_seed_file: Option<PathBuf>,
    /// Talk to the broker without TLS.
    pub allow_plaintext: bool,
    /// Streams, consumers and retries.
    pub timing: NatsTiming,
}

impl std::fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsConfig")
            .field("url", &self.url)
            .field("ca_file", &self.ca_file)
            .field("creds_file", &self.creds_file)
            .field("nkey_seed_file", &self.nkey_seed_file)
            .field("allow_plaintext", &self.allow_plaintext)
            .finish_non_exhaustive()
    }
}

/// Streams, consumers and retries of the NATS transport.
#[derive(Clone, Debug)]
pub struct NatsTiming {
    /// Replicas of each stream (3 on a three-server JetStream cluster).
    pub stream_replicas: usize,
    /// How long the streams drop a repeated `Nats-Msg-Id`: at least the
    /// longest request deadline.
    pub duplicate_window: Duration,
    /// How long the streams keep a message: at least the duplicate window.
    pub max_age: Duration,
    /// How long a delivered message waits for its ack before redelivery.
    pub ack_wait: Duration,
    /// How often a message is delivered before the broker gives up on it.
    pub max_deliver: i64,
    /// The delays between deliveries of one message (fewer than `max_deliver`).
    pub backoff: Vec<Duration>,
    /// How long one pull waits for messages.
    pub fetch_wait: Duration,
    /// The pause after a failed pull or publish before the next try.
    pub retry_delay: Duration,
    /// How long a connection attempt may take.
    pub connect_timeout: Duration,
}

impl Default for NatsTiming {
    fn default() -> Self {
        Self {
            stream_replicas: 1,
            duplicate_window: Duration::from_secs(3600),
            max_age: Duration::from_secs(7 * 24 * 3600),
            ack_wait: Duration::from_secs(30),
            max_deliver: 20,
            backoff: vec![
                Duration::from_secs(1),
                Duration::from_secs(5),
                Duration::from_secs(30),
            ],
            fetch_wait: Duration::from_secs(5),
            retry_delay: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl NatsConfig {
    /// A configuration for `url` with default timing and no credentials.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ca_file: None,
            creds_file: None,
            nkey_seed_file: None,
            allow_plaintext: false,
            timing: NatsTiming::default(),
        }
    }

    /// Checks the settings before anything connects: a scheme Ferry
    /// speaks, at most one credential, windows that fit each other.
    pub fn check(&self) -> Result<()> {
        let invalid = |message: String| Err(Error::NatsConfig { message });
        for url in self.url.split(',') {
            let url = url.trim();
            if !(url.starts_with("nats://") || url.starts_with("tls://")) {
                return invalid(format!(
                    "--nats-url {url:?}: use tls://host:port (or nats://host:port with TLS)"
                ));
            }
        }
        if self.creds_file.is_some() && self.nkey_seed_file.is_some() {
            return invalid(
                "--nats-creds-file and --nats-nkey-seed-file: give one credential, not both".into(),
            );
        }
        let t = &self.timing;
        if t.duplicate_window > t.max_age {
            return invalid(format!(
                "the duplicate window ({:?}) is longer than the streams keep messages ({:?})",
                t.duplicate_window, t.max_age
            ));
        }
        if t.max_deliver >= 0 && t.backoff.len() as i64 >= t.max_deliver {
            return invalid("the backoff needs fewer steps than max_deliver".into());
        }
        Ok(())
    }
}

/// Connects this cluster (`cluster` names the connection) to the broker;
/// an unreachable broker or a refused TLS handshake or credential is an
/// error.
pub async fn connect(config: &NatsConfig, cluster: &str) -> Result<async_nats::Client> {
    let (options, addrs) = options(config, cluster).await?;
    options
        .connect(addrs)
        .await
        .map_err(|e| Error::nats(format!("connect to {}", config.url), e))
}

/// As [`connect`], but returns at once and keeps connecting in the
/// background (the operator starts whether the broker is up or not; until
/// it is, moves to `Nats` peers are `PeerUnreachable`). Only the settings
/// and credential files are checked here.
pub async fn connect_in_background(
    config: &NatsConfig,
    cluster: &str,
) -> Result<async_nats::Client> {
    let (options, addrs) = options(config, cluster).await?;
    options
        .retry_on_initial_connect()
        .connect(addrs)
        .await
        .map_err(|e| Error::nats(format!("connect to {}", config.url), e))
}

async fn options(
    config: &NatsConfig,
    cluster: &str,
) -> Result<(async_nats::ConnectOptions, Vec<async_nats::ServerAddr>)> {
    config.check()?;
    let mut options = async_nats::ConnectOptions::new()
        .name(format!("ferry-{cluster}"))
        // Replies come to this cluster's own inboxes, which its NATS user
        // alone may subscribe to.
        .custom_inbox_prefix(inbox_prefix(cluster))
        .connection_timeout(config.timing.connect_timeout)
        .require_tls(!config.allow_plaintext);
    if let Some(ca) = &config.ca_file {
        options = options.add_root_certificates(ca.clone());
    }
    if let Some(path) = &config.creds_file {
        options = options
            .credentials_file(path)
            .await
            .map_err(|e| Error::nats(format!("read the credentials file {}", path.display()), e))?;
    }
    if let Some(path) = &config.nkey_seed_file {
        let seed = std::fs::read_to_string(path)
            .map_err(|e| Error::nats(format!("read the nkey seed file {}", path.display()), e))?;
        options = options.nkey(seed.trim().to_owned());
    }
    let urls: Vec<&str> = config.url.split(',').map(str::trim).collect();
    let addrs: Vec<async_nats::ServerAddr> = urls
        .iter()
        .map(|u| u.parse())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::nats(format!("parse --nats-url {}", config.url), e))?;
    Ok((options, addrs))
}

/// The subject prefix of this cluster's reply inboxes: `_INBOX_ferry_<cluster>`.
pub fn inbox_prefix(cluster: &str) -> String {
    format!("_INBOX_ferry_{cluster}")
}

/// The configuration of one of the two streams.
pub fn stream_config(name: &str, timing: &NatsTiming) -> stream::Config {
    let (subjects, per_subject) = if name == STATUS_STREAM {
        // Only the latest status of each request matters.
        (STATUS_SUBJECTS, 1)
    } else {
        (REQUEST_SUBJECTS, -1)
    };
    stream::Config {
        name: name.to_owned(),
        subjects: vec![subjects.to_owned()],
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        num_replicas: timing.stream_replicas,
        duplicate_window: timing.duplicate_window,
        max_age: timing.max_age,
        max_messages_per_subject: per_subject,
        ..Default::default()
    }
}

/// Creates the two streams if they are missing (a user that may not create
/// streams gets an error naming the one to create).
pub async fn ensure_streams(client: &async_nats::Client, timing: &NatsTiming) -> Result<()> {
    let js = jetstream::new(client.clone());
    for name in [REQUEST_STREAM, STATUS_STREAM] {
        js.get_or_create_stream(stream_config(name, timing))
            .await
            .map_err(|e| Error::nats(format!("find or create the stream {name}"), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nats_and_tls_urls_and_one_credential() {
        assert!(NatsConfig::new("tls://broker:4222").check().is_ok());
        assert!(
            NatsConfig::new("nats://a:4222, nats://b:4222")
                .check()
                .is_ok()
        );
        let error = NatsConfig::new("http://broker").check().unwrap_err();
        assert!(error.to_string().contains("--nats-url"), "{error}");
        let mut both = NatsConfig::new("tls://b:4222");
        both.creds_file = Some("c".into());
        both.nkey_seed_file = Some("s".into());
        assert!(both.check().is_err());
    }

    #[test]
    fn the_duplicate_window_must_fit_in_the_stream() {
        let mut config = NatsConfig::new("tls://b:4222");
        config.timing.duplicate_window = Duration::from_secs(10);
        config.timing.max_age = Duration::from_secs(5);
        assert!(config.check().is_err());
        let status = stream_config(STATUS_STREAM, &NatsTiming::default());
        assert_eq!(status.max_messages_per_subject, 1);
        assert_eq!(status.subjects, [STATUS_SUBJECTS]);
    }
}
