//! Wasmtime engines as the host configures them, each with its linker and
//! its part of the disk cache: compiling a module and linking it into the
//! pre-instantiated form every evaluation starts from, and the ticker that
//! advances their epochs. Runs no guest code.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker};

use super::trap::err_text;
use crate::policy::bindings::{Contract, v1, v2};
use crate::policy::cache::CompiledCache;
use crate::policy::error::{LoadError, PolicyError, Result};
use crate::policy::limits::EngineConfig;
use crate::policy::pool;
use crate::policy::store::StoreState;

/// A wasmtime engine with its linker and its part of the disk cache.
pub(super) struct Runtime {
    pub(super) engine: wasmtime::Engine,
    linker: Linker<StoreState>,
    disk: Option<CompiledCache>,
}

impl Runtime {
    pub(super) fn new(config: &EngineConfig, slots: u32, fuel: bool) -> Result<Self> {
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
        // Both contracts' imports: a module links against the one it uses.
        v1::MigrationPolicy::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|err| PolicyError::Host(err.to_string()))?;
        v2::MigrationPolicy::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|err| PolicyError::Host(err.to_string()))?;

        // Each engine's files carry its own configuration key, so the two
        // builds of a module never mistake each other.
        let disk = config
            .cache
            .as_ref()
            .map(|store| CompiledCache::new(store.clone(), &engine));
        Ok(Runtime {
            engine,
            linker,
            disk,
        })
    }

    /// Compiles `bytes` (or takes them from the disk cache) and links them
    /// against the migration-policy world of the contract they implement:
    /// v2 when `decide` type checks against it, else v1.
    pub(super) fn prepare(&self, digest: &str, bytes: &[u8]) -> Result<Pre, LoadError> {
        let component = self.compile(digest, bytes)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|err| LoadError::WrongWorld(err_text(&err)))?;
        let v2 = match v2::MigrationPolicyPre::new(pre.clone()) {
            Ok(pre) => return Ok(Pre::V2(pre)),
            Err(err) => err,
        };
        let v1 = match v1::MigrationPolicyPre::new(pre) {
            Ok(pre) => return Ok(Pre::V1(pre)),
            Err(err) => err,
        };
        Err(LoadError::WrongWorld(format!(
            "{}: {}; {}: {}",
            Contract::V2.package(),
            err_text(&v2),
            Contract::V1.package(),
            err_text(&v1)
        )))
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

/// A module linked against the world of its contract.
pub(super) enum Pre {
    V1(v1::MigrationPolicyPre<StoreState>),
    V2(v2::MigrationPolicyPre<StoreState>),
}

impl Pre {
    pub(super) fn contract(&self) -> Contract {
        match self {
            Pre::V1(_) => Contract::V1,
            Pre::V2(_) => Contract::V2,
        }
    }

    pub(super) fn instance_pre(&self) -> &wasmtime::component::InstancePre<StoreState> {
        match self {
            Pre::V1(pre) => pre.instance_pre(),
            Pre::V2(pre) => pre.instance_pre(),
        }
    }
}

/// A component's preamble: `\0asm`, then a version with layer 1.
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes.starts_with(b"\0asm") && bytes[6..8] == [1, 0]
}

/// Advances the epochs of `engines` every `tick`, which is what ends an
/// evaluation past its deadline, until `stop` is set.
pub(super) fn spawn_ticker(
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
