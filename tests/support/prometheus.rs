//! A real Prometheus for tests and benchmarks: OpenMetrics fixtures are
//! backfilled with `promtool tsdb create-blocks-from openmetrics` into a fresh
//! temporary directory and served by `prometheus` on a free loopback port.
//! The server is killed when the handle drops, also when a test panics.

pub use super::ports::free_port;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL_HINT: &str = "Prometheus 2.x and promtool are needed: install them with the \
    README's test command (`apt-get install -y --no-install-recommends prometheus`)";

/// A running Prometheus serving backfilled fixtures.
pub struct Prometheus {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Backfills every OpenMetrics file and starts Prometheus on them.
    pub fn start(openmetrics: &[&Path]) -> Prometheus {
        Self::start_with(openmetrics, "global: {}\nscrape_configs: []\n")
    }

    /// Starts Prometheus scraping `target` (`host:port`, path `/metrics`)
    /// every `interval`, with no backfilled data.
    pub fn scraping(target: &str, interval: Duration) -> Prometheus {
        let every = format!("{}ms", interval.as_millis());
        let config = format!(
            "global:\n  scrape_interval: {every}\n  scrape_timeout: {every}\n\
             scrape_configs:\n  - job_name: fixture\n    static_configs:\n      - targets: [\"{target}\"]\n"
        );
        Self::start_with(&[], &config)
    }

    fn start_with(openmetrics: &[&Path], config_text: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("temporary directory");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("data directory");
        for file in openmetrics {
            let out = Command::new("promtool")
                .args(["tsdb", "create-blocks-from", "openmetrics", "--quiet"])
                .arg(file)
                .arg(&data)
                .output()
                .unwrap_or_else(|e| panic!("cannot run promtool ({e}). {INSTALL_HINT}"));
            assert!(
                out.status.success(),
                "promtool failed on {}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, config_text).expect("config file");
        let log = dir.path().join("prometheus.log");
        let mut last_failure = String::new();
        // A free port can be taken between picking and binding: try a few.
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", data.display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--storage.tsdb.retention.time=100y")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("log file"))
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start prometheus ({e}). {INSTALL_HINT}"));
            let url = format!("http://127.0.0.1:{port}");
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if http_status(port, "/-/ready") == Some(200) {
                    return Prometheus { child, url, dir };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            last_failure = std::fs::read_to_string(&log).unwrap_or_default();
        }
        panic!("prometheus did not become ready:\n{last_failure}");
    }

    /// Base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where the TSDB and the log live.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// A TCP server that accepts connections and never answers: the slow
/// Prometheus. Stops accepting when dropped.
pub struct SilentServer {
    url: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SilentServer {
    pub fn start() -> SilentServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => held.push(stream),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        SilentServer {
            url,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for SilentServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Writes OpenMetrics text that promtool accepts: families contiguous,
/// counters declared without `_total`, timestamps in seconds, `# EOF` last.
#[derive(Default)]
pub struct OpenMetrics {
    /// family name → (type, series lines in insertion order)
    families: BTreeMap<String, (&'static str, Vec<String>)>,
}

impl OpenMetrics {
    pub fn gauge(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        points: impl IntoIterator<Item = (i64, f64)>,
    ) -> &mut Self {
        self.series(name, name, "gauge", labels, points)
    }

    /// `name` without `_total`; samples are written as `name_total`.
    pub fn counter(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        points: impl IntoIterator<Item = (i64, f64)>,
    ) -> &mut Self {
        self.series(name, &format!("{name}_total"), "counter", labels, points)
    }

    fn series(
        &mut self,
        family: &str,
        sample_name: &str,
        kind: &'static str,
        labels: &[(&str, &str)],
        points: impl IntoIterator<Item = (i64, f64)>,
    ) -> &mut Self {
        let labels = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
            .collect::<Vec<_>>()
            .join(",");
        let entry = self
            .families
            .entry(family.to_owned())
            .or_insert((kind, Vec::new()));
        for (t, v) in points {
            entry
                .1
                .push(format!("{sample_name}{{{labels}}} {} {t}", format_value(v)));
        }
        self
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, (kind, lines)) in &self.families {
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for line in lines {
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push_str("# EOF");
        out
    }

    pub fn write(&self, path: &Path) -> PathBuf {
        std::fs::write(path, self.render()).expect("write OpenMetrics");
        path.to_owned()
    }
}

/// Integral values as integers (they survive exactly), NaN and infinities
/// in OpenMetrics spelling.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
