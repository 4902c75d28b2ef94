//! The classes of policy failure. Each is something a person can act on, and
//! none of them stops the host: the next evaluation runs as usual.

use std::time::Duration;

/// Why a module could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("module is {size} bytes, over the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    #[error("sha256 of the module is {actual}, but {expected} was expected")]
    DigestMismatch { expected: String, actual: String },
    #[error(
        "not a WebAssembly component: {0} (build for wasm32-wasip2, or wrap a core module with `wasm-tools component new`)"
    )]
    NotAComponent(String),
    #[error(
        "the component implements neither contract v2 (world ferry:policy/migration-policy@2.0.0) nor contract v1 (world ferry:policy/migration-policy@0.1.0): {0}"
    )]
    WrongWorld(String),
    #[error("compiling the component failed: {0}")]
    Compile(String),
}

/// Why an evaluation produced no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("policy did not finish within its {limit:?} deadline")]
    Timeout { limit: Duration },
    #[error("policy ran out of fuel ({fuel} units)")]
    OutOfFuel { fuel: u64 },
    #[error("policy tried to grow its memory beyond {limit} bytes")]
    OutOfMemory { limit: u64 },
    #[error("policy trapped: {message}")]
    Trap { message: String },
    #[error("policy returned an error: {0}")]
    PolicyError(String),
    #[error("policy answer is invalid: {0}")]
    InvalidOutput(String),
    #[error("snapshot is {size} bytes, over the {limit}-byte input limit")]
    InputTooLarge { size: usize, limit: usize },
    #[error("cannot load policy: {0}")]
    Load(#[from] LoadError),
    #[error("policy host failure: {0}")]
    Host(String),
    #[error(
        "the policy's memory limit of {asked} bytes is over the operator's evaluation memory budget of {budget} bytes"
    )]
    OverBudget { asked: u64, budget: u64 },
}

impl PolicyError {
    /// A short stable name for the class, used in metrics, conditions and
    /// the CLI's error output.
    pub fn class(&self) -> &'static str {
        match self {
            PolicyError::Timeout { .. } | PolicyError::OutOfFuel { .. } => "Timeout",
            PolicyError::OutOfMemory { .. } => "OutOfMemory",
            PolicyError::Trap { .. } => "Trap",
            PolicyError::PolicyError(_) => "PolicyError",
            PolicyError::InvalidOutput(_) | PolicyError::InputTooLarge { .. } => "InvalidOutput",
            PolicyError::Load(_) => "Load",
            PolicyError::Host(_) => "Host",
            PolicyError::OverBudget { .. } => "OverBudget",
        }
    }
}

pub type Result<T, E = PolicyError> = std::result::Result<T, E>;
