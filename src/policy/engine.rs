//! The engine: one per process. It compiles each module once per digest,
//! keeps the pre-linked instance, and runs every evaluation in a fresh store
//! on the blocking pool, behind a concurrency limit.
//!
//! Fuel metering is compiled into the code: every basic block pays for it,
//! whether or not a budget is set, which measured 10-20% of a large
//! evaluation. So the engine holds two wasmtime engines. Evaluations without
//! a fuel budget, the usual case, run code compiled without metering; a
//! module is compiled with metering only when an evaluation first asks for
//! fuel, and that build is kept beside the other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Store, Trap, WasmBacktrace};

use super::bindings::{MigrationPolicy, MigrationPolicyPre};
use super::cache::DiskCache;
use crate::contract::{Decision, Snapshot};
use super::error::{LoadError, PolicyError, Result};
use super::limits::{EngineConfig, Limits};
use super::lower::{self, Keeps};
use super::pool::{self, Slots};
use super::store::{LogLine, StoreState};
use super::validate::{Rejected, validate};

/// The policy host. Cheap to clone; clones share compiled modules.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    /// Compiles without fuel metering: for evaluations with no fuel budget.
    plain: Runtime,
    /// Compiles with fuel metering: for evaluations with a budget. Made
    /// when the first one comes, so that an operator that never sets fuel
    /// never reserves a second pool.
    metered: OnceLock<Runtime>,
    /// The engines whose epochs the ticker advances.
    ticked: Arc<Mutex<Vec<wasmtime::Engine>>>,
    compiled: Mutex<HashMap<String, Policy>>,
    permits: Arc<Semaphore>,
    /// Shared by both runtimes, whose pools have `slot_count` slots each.
    slots: Slots,
    slot_count: u32,
    config: EngineConfig,
    ticker_stop: Arc<AtomicBool>,
}

/// A wasmtime engine with its linker and its part of the disk cache.
struct Runtime {
    engine: wasmtime::Engine,
    linker: Linker<StoreState>,
    disk: Option<DiskCache>,
}

impl Runtime {
    fn new(config: &EngineConfig, slots: u32, fuel: bool) -> Result<Self> {
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(true)
            .consume_fuel(fuel)
            .wasm_backtrace_max_frames(std::num::NonZeroUsize::new(32))
            .max_wasm_stack(512 * 1024)
            .allocation_strategy(pool::strategy(slots));
        let engine =
            wasmtime::Engine::new(&wasm).map_err(|err| PolicyError::Host(err.to_string()))?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|err| PolicyError::Host(err.to_string()))?;
        MigrationPolicy::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|err| PolicyError::Host(err.to_string()))?;

        // Each engine's files carry its own configuration key, so the two
        // builds of a module never mistake each other.
        let disk = match &config.cache_dir {
            Some(dir) => Some(DiskCache::new(dir, &engine).map_err(|err| {
                PolicyError::Host(format!(
                    "cannot use cache directory {}: {err}",
                    dir.display()
                ))
            })?),
            None => None,
        };
        Ok(Runtime {
            engine,
            linker,
            disk,
        })
    }

    /// Compiles `bytes` (or takes them from the disk cache) and links them
    /// against the migration-policy world.
    fn prepare(&self, digest: &str, bytes: &[u8]) -> Result<Pre, LoadError> {
        let component = self.compile(digest, bytes)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|err| LoadError::WrongWorld(err_text(&err)))?;
        MigrationPolicyPre::new(pre).map_err(|err| LoadError::WrongWorld(err_text(&err)))
    }

    fn compile(&self, digest: &str, bytes: &[u8]) -> Result<Component, LoadError> {
        if let Some(component) = self
            .disk
            .as_ref()
            .and_then(|d| d.load(&self.engine, digest))
        {
            return Ok(component);
        }
        if !is_component(bytes) {
            let what = if bytes.starts_with(b"\0asm") {
                "a core WebAssembly module"
            } else {
                "not WebAssembly at all"
            };
            return Err(LoadError::NotAComponent(what.to_owned()));
        }
        let component = Component::new(&self.engine, bytes)
            .map_err(|err| LoadError::Compile(err_text(&err)))?;
        if let Some(disk) = &self.disk {
            disk.store(digest, &component);
        }
        Ok(component)
    }
}

type Pre = MigrationPolicyPre<StoreState>;

impl Drop for Inner {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// A compiled module, ready to instantiate. Cheap to clone.
#[derive(Clone)]
pub struct Policy {
    inner: Arc<PolicyInner>,
}

struct PolicyInner {
    name: String,
    digest: String,
    size: usize,
    /// What the module promises to keep of its input, which decides how
    /// much of it may share one allocation (see [`lower::Placement`]).
    keeps_input: Keeps,
    /// Built without fuel metering.
    pre: Pre,
    /// The module again, kept for the metered build.
    bytes: Arc<[u8]>,
    /// Built with fuel metering when an evaluation first sets a budget.
    /// An error is kept too: the same bytes would fail the same way.
    metered: OnceLock<std::result::Result<Pre, String>>,
}

impl Policy {
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Hex sha256 of the module bytes.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// What the module declares it keeps of its input until the instance
    /// ends: modules exported with the policy SDK's `policy!` keep it all.
    pub fn keeps_input(&self) -> Keeps {
        self.inner.keeps_input
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.inner.name)
            .field("digest", &self.inner.digest)
            .finish()
    }
}

/// What `ferry policy check` reports about a module.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModuleInfo {
    pub size: usize,
    pub sha256: String,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// What it declares it keeps of its input (see [`Policy::keeps_input`]).
    #[serde(rename = "keepsInput")]
    pub keeps_input: Keeps,
}

/// The outcome of an evaluation that ran to the end.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evaluation {
    /// Decisions that passed validation, in the policy's order.
    pub decisions: Vec<Decision>,
    /// Decisions that did not, each with its reason.
    pub rejected: Vec<Rejected>,
    pub logs: Vec<LogLine>,
    /// Lines (or cut streams) beyond the log caps.
    pub logs_dropped: usize,
    #[serde(rename = "elapsedMs", serialize_with = "as_millis")]
    pub elapsed: Duration,
    /// The linear memory the module held when it answered, in bytes: its
    /// peak, since WebAssembly memory never shrinks. What to size the
    /// memory limit by.
    #[serde(rename = "memoryBytes")]
    pub memory_bytes: u64,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// Hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Engine {
    /// Builds the engine and starts the epoch ticker that enforces deadlines.
    pub fn new(config: EngineConfig) -> Result<Self> {
        let slots = u32::try_from(config.max_concurrent.max(1)).unwrap_or(u32::MAX);
        let plain = Runtime::new(&config, slots, false)?;

        let ticked = Arc::new(Mutex::new(vec![plain.engine.clone()]));
        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_ticker(ticked.clone(), config.epoch_tick, ticker_stop.clone())?;

        Ok(Engine {
            inner: Arc::new(Inner {
                plain,
                metered: OnceLock::new(),
                ticked,
                compiled: Mutex::new(HashMap::new()),
                // The permits keep waiting callers off the blocking pool; the
                // slots also cover `evaluate_blocking`, which takes no permit.
                permits: Arc::new(Semaphore::new(slots as usize)),
                slots: Slots::new(slots),
                slot_count: slots,
                config,
                ticker_stop,
            }),
        })
    }

    /// Verifies, compiles and links a module, or returns the one already
    /// compiled for the same bytes. `expected_sha256`, when given, must match
    /// before anything is compiled. CPU-heavy on a cache miss: call it from a
    /// blocking context.
    pub fn load(
        &self,
        name: &str,
        bytes: &[u8],
        expected_sha256: Option<&str>,
    ) -> Result<Policy, LoadError> {
        let limit = self.inner.config.max_module_bytes;
        if bytes.len() > limit {
            return Err(LoadError::TooLarge {
                size: bytes.len(),
                limit,
            });
        }
        let digest = sha256_hex(bytes);
        if let Some(expected) = expected_sha256
            && !expected.eq_ignore_ascii_case(&digest)
        {
            return Err(LoadError::DigestMismatch {
                expected: expected.to_owned(),
                actual: digest,
            });
        }
        if let Some(policy) = self.cached(&digest) {
            return Ok(policy);
        }

        let pre = self.inner.plain.prepare(&digest, bytes)?;
        let policy = Policy {
            inner: Arc::new(PolicyInner {
                name: name.to_owned(),
                digest: digest.clone(),
                size: bytes.len(),
                keeps_input: lower::keeps_input(bytes),
                pre,
                bytes: bytes.into(),
                metered: OnceLock::new(),
            }),
        };
        self.lock_compiled().insert(digest, policy.clone());
        Ok(policy)
    }

    /// Loads a module and describes it, for `ferry policy check`.
    pub fn inspect(&self, bytes: &[u8]) -> Result<ModuleInfo, LoadError> {
        let policy = self.load("check", bytes, None)?;
        let component = policy.inner.pre.instance_pre().component();
        let ty = component.component_type();
        let engine = &self.inner.plain.engine;
        Ok(ModuleInfo {
            size: bytes.len(),
            sha256: policy.digest().to_owned(),
            imports: ty
                .imports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
            exports: ty
                .exports(engine)
                .map(|(name, _)| name.to_owned())
                .collect(),
            keeps_input: policy.keeps_input(),
        })
    }

    /// Forgets compiled modules whose digest is not in `keep`.
    pub fn retain(&self, keep: &[&str]) {
        self.lock_compiled()
            .retain(|digest, _| keep.contains(&digest.as_str()));
    }

    fn cached(&self, digest: &str) -> Option<Policy> {
        self.lock_compiled().get(digest).cloned()
    }

    fn lock_compiled(&self) -> std::sync::MutexGuard<'_, HashMap<String, Policy>> {
        self.inner
            .compiled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The build of `policy` that runs under `limits`: the metered one,
    /// compiled on first use, when they set a fuel budget.
    fn build<'a>(&'a self, policy: &'a Policy, limits: &Limits) -> Result<(&'a Runtime, &'a Pre)> {
        if limits.fuel.is_none() {
            return Ok((&self.inner.plain, &policy.inner.pre));
        }
        let runtime = self.metered()?;
        let pre = policy.inner.metered.get_or_init(|| {
            runtime
                .prepare(&policy.inner.digest, &policy.inner.bytes)
                .map_err(|err| err.to_string())
        });
        match pre {
            Ok(pre) => Ok((runtime, pre)),
            Err(err) => Err(PolicyError::Host(format!(
                "cannot compile the module with fuel metering: {err}"
            ))),
        }
    }

    /// The metered runtime, made on first use and then ticked like the
    /// plain one. A failure to make it is not kept: the next call tries
    /// again.
    fn metered(&self) -> Result<&Runtime> {
        if let Some(runtime) = self.inner.metered.get() {
            return Ok(runtime);
        }
        // Made under the ticker's lock, so two first callers make only one.
        let mut ticked = self
            .inner
            .ticked
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(runtime) = self.inner.metered.get() {
            return Ok(runtime);
        }
        let runtime = Runtime::new(&self.inner.config, self.inner.slot_count, true)?;
        ticked.push(runtime.engine.clone());
        Ok(self.inner.metered.get_or_init(|| runtime))
    }

    /// Runs `decide` on a fresh instance, on the blocking pool, once a
    /// concurrency permit is free.
    #[tracing::instrument(skip_all, fields(policy = %policy.name(), digest = %&policy.digest()[..12]))]
    pub async fn evaluate(
        &self,
        policy: &Policy,
        snapshot: Arc<Snapshot>,
        limits: Limits,
    ) -> Result<Evaluation> {
        let _permit = self
            .inner
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| PolicyError::Host("the policy engine is shutting down".to_owned()))?;
        let engine = self.clone();
        let policy = policy.clone();
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            // Blocking-pool threads may block on the runtime: run directly.
            engine.run(&policy, &snapshot, &limits)
        })
        .await
        .map_err(|err| PolicyError::Host(format!("evaluation task failed: {err}")))?
    }

    /// The same as [`Engine::evaluate`], on the calling thread and without a
    /// permit: for the simulator, the CLI and benchmarks.
    ///
    /// WASI's synchronous bindings drive their own futures with a blocking
    /// call, which a tokio worker thread may not make: called from inside a
    /// runtime, the evaluation moves to a short-lived thread of its own.
    pub fn evaluate_blocking(
        &self,
        policy: &Policy,
        snapshot: &Snapshot,
        limits: &Limits,
    ) -> Result<Evaluation> {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.run(policy, snapshot, limits);
        }
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("ferry-evaluate".to_owned())
                .spawn_scoped(scope, || self.run(policy, snapshot, limits))
                .map_err(|err| {
                    PolicyError::Host(format!("cannot start an evaluation thread: {err}"))
                })?
                .join()
                .map_err(|_| PolicyError::Host("the evaluation thread panicked".to_owned()))?
        })
    }

    fn run(&self, policy: &Policy, snapshot: &Snapshot, limits: &Limits) -> Result<Evaluation> {
        let size = lower::input_size(snapshot);
        if size.total > limits.max_input_bytes {
            return Err(PolicyError::InputTooLarge {
                size: size.total,
                limit: limits.max_input_bytes,
            });
        }

        // Taken before the store and released after it: the store's instance
        // lives in the slot.
        let (runtime, pre) = self.build(policy, limits)?;
        let _slot = self.inner.slots.take();
        let mut store = Store::new(
            &runtime.engine,
            StoreState::new(limits, snapshot.timestamp_ms),
        );
        store.limiter(|state| &mut state.limiter);
        store.data_mut().placement = lower::Placement::new(policy.inner.keeps_input, size);
        if let Some(fuel) = limits.fuel {
            store
                .set_fuel(fuel)
                .map_err(|err| PolicyError::Host(err.to_string()))?;
        }
        let tick = self.inner.config.epoch_tick.as_nanos().max(1);
        let ticks = limits.timeout.as_nanos().div_ceil(tick) + 1;
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
        store.epoch_deadline_trap();

        let started = Instant::now();
        let answer = pre
            .instantiate(&mut store)
            .and_then(|instance| instance.call_decide(&mut store, snapshot));
        let elapsed = started.elapsed();

        let answer = match answer {
            Ok(answer) => answer,
            Err(err) => return Err(classify(&err, store.data(), limits)),
        };
        let memory_bytes = store.data().limiter.total;
        let (logs, logs_dropped) = store.data_mut().take_logs(limits);
        emit_logs(policy, &logs, logs_dropped);

        let decisions = answer.map_err(PolicyError::PolicyError)?;
        if decisions.len() > snapshot.workloads.len() {
            return Err(PolicyError::InvalidOutput(format!(
                "{} decisions for {} workloads: no more decisions than workloads are allowed",
                decisions.len(),
                snapshot.workloads.len()
            )));
        }
        let decisions = decisions
            .into_iter()
            .map(|mut d| {
                truncate_at_char(&mut d.reason, limits.max_reason_bytes);
                d
            })
            .collect();
        let (decisions, rejected) = validate(snapshot, decisions);
        Ok(Evaluation {
            decisions,
            rejected,
            logs,
            logs_dropped,
            elapsed,
            memory_bytes,
        })
    }
}

/// A component's preamble: `\0asm`, then a version with layer 1.
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes.starts_with(b"\0asm") && bytes[6..8] == [1, 0]
}

/// The whole error chain on one line, the way a person reads it.
fn err_text(err: &wasmtime::Error) -> String {
    format!("{err:#}")
}

fn classify(err: &wasmtime::Error, state: &StoreState, limits: &Limits) -> PolicyError {
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            return PolicyError::Timeout {
                limit: limits.timeout,
            };
        }
        Some(Trap::OutOfFuel) => {
            return PolicyError::OutOfFuel {
                fuel: limits.fuel.unwrap_or(u64::MAX),
            };
        }
        _ => {}
    }
    if state.limiter.refused {
        return PolicyError::OutOfMemory {
            limit: limits.memory_bytes,
        };
    }
    let mut message = match err.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{err:#}"),
    };
    if let Some(backtrace) = err.downcast_ref::<WasmBacktrace>() {
        message.push_str("\nguest backtrace:");
        message.push_str(&backtrace_text(backtrace));
    }
    // A Rust guest's panic message is the last thing it wrote to stderr.
    let stderr = state.stderr_tail(5);
    if !stderr.is_empty() {
        message.push_str("\nguest stderr:\n");
        message.push_str(&stderr);
    }
    PolicyError::Trap { message }
}

/// One line per frame, with runs of the same function (deep recursion)
/// folded into one.
fn backtrace_text(backtrace: &WasmBacktrace) -> String {
    let mut out = String::new();
    let mut frames = backtrace.frames().iter().peekable();
    let mut index = 0;
    while let Some(frame) = frames.next() {
        let name = frame.func_name().unwrap_or("<unnamed>");
        let mut repeats = 1;
        while frames
            .peek()
            .is_some_and(|next| next.func_name() == frame.func_name())
        {
            frames.next();
            repeats += 1;
        }
        let module = frame.module().name().unwrap_or("<module>");
        let name = rustc_demangle::demangle(name);
        out.push_str(&format!("\n  {index}: {module}!{name:#}"));
        if repeats > 1 {
            out.push_str(&format!(" (×{repeats})"));
        }
        index += repeats;
    }
    out
}

fn truncate_at_char(text: &mut String, max: usize) {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
}

fn emit_logs(policy: &Policy, logs: &[LogLine], dropped: usize) {
    for line in logs {
        let (message, source) = (line.message.as_str(), line.source);
        match line.level {
            "error" => tracing::error!(policy = policy.name(), ?source, "{message}"),
            "warn" => tracing::warn!(policy = policy.name(), ?source, "{message}"),
            "info" => tracing::info!(policy = policy.name(), ?source, "{message}"),
            "debug" => tracing::debug!(policy = policy.name(), ?source, "{message}"),
            _ => tracing::trace!(policy = policy.name(), ?source, "{message}"),
        }
    }
    if dropped > 0 {
        tracing::warn!(
            policy = policy.name(),
            dropped,
            "policy output over the log caps was dropped"
        );
    }
}

fn spawn_ticker(
    engines: Arc<Mutex<Vec<wasmtime::Engine>>>,
    tick: Duration,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    std::thread::Builder::new()
        .name("ferry-epoch".to_owned())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                let engines = engines.lock().unwrap_or_else(|p| p.into_inner());
                for engine in engines.iter() {
                    engine.increment_epoch();
                }
            }
        })
        .map(|_| ())
        .map_err(|err| PolicyError::Host(format!("cannot start the epoch ticker: {err}")))
}
