//! The WebAssembly policy host.
//!
//! Policy modules are untrusted code. The host runs each one as a component
//! against the contract it implements, contract v2 (`ferry:policy@2.0.0`) or
//! contract v1 (`ferry:policy@0.1.0`), with no capabilities (no files,
//! environment, sockets or inherited stdio), under a deadline, a memory cap
//! and optional fuel, in a fresh instance per evaluation. Whatever a module
//! does, the host neither panics nor stops serving, and every answer is
//! validated against the snapshot before anything acts on it.

mod bindings;
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

pub use bindings::Contract;
pub use cache::ArtifactStore;
pub use engine::{Engine, Evaluation, ModuleInfo, Policy, sha256_hex};
pub use error::{LoadError, PolicyError, Result};
pub use inspect::{BuiltWith, Producer, built_with};
pub use limits::{EngineConfig, Limits};
pub use lower::{KEEPS_INPUT_SECTION, Keeps};
pub use store::{LogLine, LogSource};
pub use validate::{Rejected, Rejection, Validated, validate};
