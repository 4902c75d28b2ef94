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
    });
}

mod cache;
pub mod contract;
mod engine;
mod error;
mod limits;
mod lower;
pub mod source;
mod store;
pub mod upload;
mod validate;

pub use engine::{Engine, Evaluation, ModuleInfo, Policy, sha256_hex};
pub use error::{LoadError, PolicyError, Result};
pub use limits::{EngineConfig, Limits};
pub use store::{LogLine, LogSource};
pub use validate::{Rejected, Rejection, validate};
