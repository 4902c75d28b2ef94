//! What one evaluation's `Store` holds: a WASI context with no capabilities,
//! the memory limiter, and the capture of everything the guest says.
//!
//! Nothing here outlives the evaluation, so no state passes from one
//! evaluation to the next.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use super::bindings::{v1, v2};
use super::limits::Limits;
use super::lower::placement::Placement;

/// Where a captured line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogSource {
    Host,
    Stdout,
    Stderr,
}

/// One line the guest logged or printed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LogLine {
    pub source: LogSource,
    pub level: &'static str,
    pub message: String,
}

/// The data of one evaluation's store.
pub(crate) struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    host_log: LogCapture,
    stdout: CappedPipe,
    stderr: CappedPipe,
    /// How the snapshot's strings and arrays are allocated in the guest.
    pub(crate) placement: Placement,
}

impl StoreState {
    /// A store whose guest sees no files, no environment, no arguments, no
    /// sockets, closed stdin, a wall clock frozen at the snapshot's time and
    /// fixed random bytes: the same input gives the same run.
    pub(crate) fn new(limits: &Limits, timestamp_ms: u64) -> Self {
        let stdout = CappedPipe::new(limits.max_log_bytes);
        let stderr = CappedPipe::new(limits.max_log_bytes);
        let mut builder = WasiCtx::builder();
        builder
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .wall_clock(FrozenClock(timestamp_ms))
            .monotonic_clock(FrozenClock(timestamp_ms))
            .secure_random(wasmtime_wasi::Deterministic::new(
                timestamp_ms.to_le_bytes().to_vec(),
            ))
            .insecure_random(wasmtime_wasi::Deterministic::new(
                timestamp_ms.to_be_bytes().to_vec(),
            ))
            .insecure_random_seed(u128::from(timestamp_ms))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        StoreState {
            wasi: builder.build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory_bytes),
            host_log: LogCapture::new(limits.max_log_lines, limits.max_log_bytes),
            stdout,
            stderr,
            placement: Placement::OneByOne,
        }
    }

    /// Everything captured, host log first, then stdout and stderr, capped as
    /// a whole at the limits' line count; the number of lines dropped.
    pub(crate) fn take_logs(&mut self, limits: &Limits) -> (Vec<LogLine>, usize) {
        let mut lines = std::mem::take(&mut self.host_log.lines);
        let mut dropped = self.host_log.dropped;
        for (pipe, source) in [
            (&self.stdout, LogSource::Stdout),
            (&self.stderr, LogSource::Stderr),
        ] {
            let (text, cut) = pipe.contents();
            dropped += cut;
            lines.extend(
                String::from_utf8_lossy(&text)
                    .lines()
                    .filter(|line| !line.is_empty())
                    .map(|line| LogLine {
                        source,
                        level: if source == LogSource::Stderr {
                            "warn"
                        } else {
                            "info"
                        },
                        message: line.to_owned(),
                    }),
            );
        }
        if lines.len() > limits.max_log_lines {
            dropped += lines.len() - limits.max_log_lines;
            lines.truncate(limits.max_log_lines);
        }
        (lines, dropped)
    }

    /// The last lines of stderr: where a Rust guest's panic message lands.
    pub(crate) fn stderr_tail(&self, lines: usize) -> String {
        let (text, _) = self.stderr.contents();
        let text = String::from_utf8_lossy(&text);
        let all: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The `types` interfaces have no functions: nothing to provide.
impl v1::types::Host for StoreState {}
impl v2::types::Host for StoreState {}

impl v1::ferry::policy::host::Host for StoreState {
    fn log(&mut self, level: v1::ferry::policy::host::Level, message: String) {
        use v1::ferry::policy::host::Level;
        let level = match level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.host_log.push(level, message);
    }
}

impl v2::ferry::policy::host::Host for StoreState {
    fn log(&mut self, level: v2::ferry::policy::host::Level, message: String) {
        use v2::ferry::policy::host::Level;
        let level = match level {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        self.host_log.push(level, message);
    }
}

/// Lines from `host.log`, capped by count and by bytes.
struct LogCapture {
    lines: Vec<LogLine>,
    bytes: usize,
    max_lines: usize,
    max_bytes: usize,
    dropped: usize,
}

impl LogCapture {
    fn new(max_lines: usize, max_bytes: usize) -> Self {
        LogCapture {
            lines: Vec::new(),
            bytes: 0,
            max_lines,
            max_bytes,
            dropped: 0,
        }
    }

    fn push(&mut self, level: &'static str, message: String) {
        if self.lines.len() >= self.max_lines || self.bytes + message.len() > self.max_bytes {
            self.dropped += 1;
            return;
        }
        self.bytes += message.len();
        self.lines.push(LogLine {
            source: LogSource::Host,
            level,
            message,
        });
    }
}

/// A guest stdout or stderr that keeps the first `capacity` bytes and quietly
/// drops the rest. It never reports an error to the guest: a chatty module
/// must not fail because its output was cut.
#[derive(Clone)]
struct CappedPipe {
    inner: Arc<Mutex<PipeBuffer>>,
}

#[derive(Default)]
struct PipeBuffer {
    kept: Vec<u8>,
    capacity: usize,
    dropped_bytes: usize,
}

impl CappedPipe {
    fn new(capacity: usize) -> Self {
        CappedPipe {
            inner: Arc::new(Mutex::new(PipeBuffer {
                capacity,
                ..PipeBuffer::default()
            })),
        }
    }

    fn write(&self, bytes: &[u8]) {
        let mut buffer = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let room = buffer.capacity.saturating_sub(buffer.kept.len());
        let kept = bytes.len().min(room);
        buffer.kept.extend_from_slice(&bytes[..kept]);
        buffer.dropped_bytes += bytes.len() - kept;
    }

    /// The kept bytes, and 1 when anything was dropped (counted as one line).
    fn contents(&self) -> (Vec<u8>, usize) {
        let buffer = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (buffer.kept.clone(), usize::from(buffer.dropped_bytes > 0))
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        CappedPipe::write(self, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Both clocks stand still at the snapshot's time.
struct FrozenClock(u64);

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }

    fn now(&self) -> Duration {
        Duration::from_millis(self.0)
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000
    }

    fn now(&self) -> u64 {
        self.0.saturating_mul(1_000_000)
    }
}

/// Caps the guest's linear memory over all its memories, and remembers a
/// refusal so that the trap that follows is reported as out of memory.
pub(crate) struct MemoryLimiter {
    limit: u64,
    /// The linear memory granted so far, initial sizes included: the peak,
    /// since WebAssembly memory never shrinks.
    pub(crate) total: u64,
    pub(crate) refused: bool,
}

impl MemoryLimiter {
    fn new(limit: u64) -> Self {
        MemoryLimiter {
            limit,
            total: 0,
            refused: false,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grown = self.total + (desired.saturating_sub(current)) as u64;
        if grown > self.limit {
            self.refused = true;
            return Ok(false);
        }
        self.total = grown;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }

    fn instances(&self) -> usize {
        32
    }

    fn tables(&self) -> usize {
        32
    }

    fn memories(&self) -> usize {
        8
    }
}
