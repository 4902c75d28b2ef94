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
//!
//! The parts: [`runtime`] configures the wasmtime engines and links
//! modules; [`call`] calls `decide` in the module's contract; [`load`] verifies and compiles them once per digest; [`trap`]
//! explains an evaluation that failed; [`outcome`] is what one that ran
//! gives back. This file holds the engine and runs evaluations. It must
//! never act on an answer: it only reports it, validated.

mod call;
mod load;
mod outcome;
mod runtime;
mod trap;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use wasmtime::Store;

use self::load::Compiled;
use self::outcome::{emit_logs, truncate_at_char};
use self::runtime::{Pre, Runtime, spawn_ticker};
use self::trap::classify;
use super::error::{LoadError, PolicyError, Result};
use super::gate::Gate;
use super::limits::{EngineConfig, Limits};
use super::lower;
use super::pool::Slots;
use super::store::StoreState;
use super::validate::validate;
use crate::contract::Snapshot;

pub use self::load::{ModuleInfo, Policy, sha256_hex};
pub use self::outcome::Evaluation;

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
    /// Every module compiled so far, by digest.
    compiled: Compiled,
    /// Slots and the evaluation memory budget, shared fairly by owner.
    gate: Arc<Gate>,
    /// Shared by both runtimes, whose pools have `slot_count` slots each.
    slots: Slots,
    slot_count: u32,
    config: EngineConfig,
    ticker_stop: Arc<AtomicBool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
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
                compiled: Compiled::new(config.max_compiled),
                // The gate keeps waiting callers off the blocking pool; the
                // slots also cover `evaluate_blocking`, which skips the gate.
                gate: Arc::new(Gate::new(slots, config.memory_budget)),
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
        self.inner.compiled.load(
            &self.inner.plain,
            self.inner.config.max_module_bytes,
            name,
            bytes,
            expected_sha256,
        )
    }

    /// Loads a module and describes it, for `ferry policy check`.
    pub fn inspect(&self, bytes: &[u8]) -> Result<ModuleInfo, LoadError> {
        let policy = self.load("check", bytes, None)?;
        Ok(policy.info(&self.inner.plain.engine, bytes))
    }

    /// Forgets compiled modules whose digest is not in `keep`.
    pub fn retain(&self, keep: &[&str]) {
        self.inner.compiled.retain(keep);
    }

    /// The digests of the modules held compiled in memory, sorted.
    pub fn compiled_digests(&self) -> Vec<String> {
        self.inner.compiled.digests()
    }

    /// The build of `policy` that runs under `limits`: the metered one,
    /// compiled on first use, when they set a fuel budget.
    fn build<'a>(&'a self, policy: &'a Policy, limits: &Limits) -> Result<(&'a Runtime, &'a Pre)> {
        if limits.fuel.is_none() {
            return Ok((&self.inner.plain, policy.plain()));
        }
        let runtime = self.metered()?;
        Ok((runtime, policy.metered(runtime)?))
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

    /// Runs `decide` on a fresh instance, on the blocking pool, once a slot
    /// and the memory its limits allow are free; owned by the module's name.
    pub async fn evaluate(
        &self,
        policy: &Policy,
        snapshot: Arc<Snapshot>,
        limits: Limits,
    ) -> Result<Evaluation> {
        self.evaluate_for(policy.name(), policy, snapshot, limits)
            .await
    }

    /// [`Engine::evaluate`] on behalf of `owner` (the operator passes the
    /// policy's `namespace/name`): waiting evaluations are served by their
    /// owners' fair share of slot time, and all evaluations in flight
    /// together stay within [`Engine::memory_budget`].
    #[tracing::instrument(skip_all, fields(policy = %owner, digest = %&policy.digest()[..12]))]
    pub async fn evaluate_for(
        &self,
        owner: &str,
        policy: &Policy,
        snapshot: Arc<Snapshot>,
        limits: Limits,
    ) -> Result<Evaluation> {
        let grant = self
            .inner
            .gate
            .acquire(owner, limits.memory_bytes)
            .await
            .map_err(|over| PolicyError::OverBudget {
                asked: over.asked,
                budget: over.budget,
            })?;
        let engine = self.clone();
        let policy = policy.clone();
        let span = tracing::Span::current();
        let started = Instant::now();
        let result = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            // Blocking-pool threads may block on the runtime: run directly.
            engine.run(&policy, &snapshot, &limits)
        })
        .await
        .map_err(|err| PolicyError::Host(format!("evaluation task failed: {err}")));
        grant.release(started.elapsed());
        result?
    }

    /// The linear memory all evaluations in flight may hold together
    /// ([`EngineConfig::memory_budget`]); a policy whose memory limit is over
    /// it can never run.
    pub fn memory_budget(&self) -> u64 {
        self.inner.gate.budget()
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
        store.data_mut().placement = lower::Placement::new(policy.keeps_input(), size);
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
        let answer = call::decide(pre, &mut store, snapshot);
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
                if let Some(reasons) = &mut d.reasons {
                    truncate_at_char(&mut reasons.detail, limits.max_reason_bytes);
                }
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
