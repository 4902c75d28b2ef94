//! The WebAssembly policy host.
//!
//! Policy modules are untrusted code. The host runs each one as a component
//! against the `ferry:policy@0.1.0` contract with no capabilities (no files,
//! environment, sockets or inherited stdio), under a deadline, a memory cap
//! and optional fuel, in a fresh instance per evaluation. Whatever a module
//! does, the host neither panics nor stops serving, and every answer is
//! validated against the snapshot before anything acts on it.

mod bindings {
    wasmtime::component::bindgen!({
        path: "policies/wit",
        world: "migration-policy",
        // The contract's records are Ferry's own types, lowered into the
        // guest as they are: no copy of the snapshot per evaluation.
        with: { "ferry:policy/types": crate::policy::bindings::types },
    });

    /// What bindgen would generate for the `types` interface, which holds
    /// records only: the records themselves are [`contract`]'s, and the
    /// interface exports nothing the host must provide.
    ///
    /// [`contract`]: crate::contract
    pub mod types {
        // The generated code names only the records the world uses.
        pub use crate::contract::{Decision, Snapshot};
        use wasmtime::component::{HasData, Linker};

        pub trait Host {}
        impl<H: Host + ?Sized> Host for &mut H {}
        pub trait HostWithStore<T>: HasData {}
        impl<H: ?Sized + HasData, T> HostWithStore<T> for H {}

        /// Declares the (empty) instance a component imports for the types.
        pub fn add_to_linker<T: 'static, D>(
            linker: &mut Linker<T>,
            _host_getter: fn(&mut T) -> D::Data<'_>,
        ) -> wasmtime::Result<()>
        where
            D: HostWithStore<T>,
            for<'a> D::Data<'a>: Host,
        {
            linker.instance("ferry:policy/types@0.1.0")?;
            Ok(())
        }
    }
}

mod cache;
mod engine;
mod error;
mod gate;
mod inspect;
mod limits;
mod lower;
mod pool;
mod store;
mod validate;

pub use cache::ArtifactStore;
pub use engine::{Engine, Evaluation, ModuleInfo, Policy, sha256_hex};
pub use error::{LoadError, PolicyError, Result};
pub use inspect::{BuiltWith, Producer, built_with};
pub use limits::{EngineConfig, Limits};
pub use lower::{KEEPS_INPUT_SECTION, Keeps};
pub use store::{LogLine, LogSource};
pub use validate::{Rejected, Rejection, Validated, validate};
