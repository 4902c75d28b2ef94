//! The limits every evaluation runs under, each with a safe default.

use std::time::Duration;

/// Limits of one evaluation. `MigrationPolicy.spec.limits` sets the first
/// three; the rest are operator-wide.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Wall-clock deadline for instantiation plus the `decide` call.
    pub timeout: Duration,
    /// Cap on the guest's linear memory, in bytes, over all its memories.
    pub memory_bytes: u64,
    /// Fuel for a deterministic budget (same input, same cut-off point);
    /// `None` leaves only the deadline.
    pub fuel: Option<u64>,
    /// Cap on the size of the snapshot handed to the guest, in bytes.
    pub max_input_bytes: usize,
    /// Longest `reason`, and `reasons.detail`, kept in a decision; longer
    /// ones are cut.
    pub max_reason_bytes: usize,
    /// Caps on captured output (host.log, stdout, stderr together).
    pub max_log_lines: usize,
    pub max_log_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(1),
            memory_bytes: 64 * 1024 * 1024,
            fuel: None,
            max_input_bytes: 64 * 1024 * 1024,
            max_reason_bytes: 1024,
            max_log_lines: 1000,
            max_log_bytes: 64 * 1024,
        }
    }
}

/// Operator-wide settings of the host, decided before the first module loads.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Evaluations allowed to run at once. Each holds a blocking thread and
    /// one slot of the instance pool, which has exactly this many.
    pub max_concurrent: usize,
    /// Interval of the epoch ticker that enforces deadlines.
    pub epoch_tick: Duration,
    /// Largest module accepted, in bytes. 64 MiB by default: a Python
    /// policy embeds CPython (about 18 MiB) and a JavaScript one
    /// SpiderMonkey (about 12 MiB), with room for their libraries. A large
    /// module costs its compilation once per digest (kept in memory and in
    /// the disk cache), not per evaluation; such modules come by https, as a
    /// ConfigMap holds at most 768 KiB.
    pub max_module_bytes: usize,
    /// Where compiled components are kept between runs (on disk:
    /// [`crate::modules::DiskCache`]); `None` keeps them in memory only.
    pub cache: Option<std::sync::Arc<dyn super::ArtifactStore>>,
    /// Most compiled modules kept in memory; loading one more forgets the
    /// least recently loaded. A policy holding its module keeps it running
    /// either way: this bounds only what a later load finds compiled.
    pub max_compiled: usize,
    /// Linear memory, in bytes, that all evaluations in flight may hold
    /// together: each reserves its `Limits::memory_bytes` before it runs.
    /// The operator sets it to fit its pod (see `ferry run
    /// --evaluation-memory-mib`); the default admits one evaluation at the
    /// largest limit a policy may set.
    pub memory_budget: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_concurrent: std::thread::available_parallelism().map_or(2, |n| n.get()),
            epoch_tick: Duration::from_millis(5),
            max_module_bytes: 64 * 1024 * 1024,
            cache: None,
            max_compiled: 64,
            memory_budget: 1 << 30,
        }
    }
}
