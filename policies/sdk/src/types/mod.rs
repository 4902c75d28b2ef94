//! The contract's types, laid out as the canonical ABI lays them out in a
//! 32-bit memory.
//!
//! Ferry writes the snapshot into the module's memory in that layout. With
//! wit-bindgen's own types every workload would then be copied into a Rust
//! value of a different shape before the policy saw it; for a large
//! snapshot that copy costs as much as a simple policy's whole decision.
//! These types have the canonical layout themselves (`#[repr(C)]`, checked
//! field by field at compile time in `layout`), so the module reads the
//! snapshot where Ferry wrote it, and hands its decisions back the same way.
//!
//! [`Text`] and [`List`] own their memory like `Box<str>` and `Box<[T]>`,
//! which is what the canonical ABI's ownership of strings and lists amounts
//! to. Natively they are ordinary owned values, so the logic can be built
//! and unit tested on the host.

mod maybe;
mod owned;
mod records;

#[cfg(target_arch = "wasm32")]
pub mod export;
#[cfg(target_arch = "wasm32")]
mod layout;

pub use maybe::Maybe;
pub use owned::{List, Text};
pub use records::{
    Cluster, Decision, Label, Reasons, Resources, Snapshot, Strategy, Thresholds, Workload,
};
