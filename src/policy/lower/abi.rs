//! The one door to wasmtime's unstable lowering API.
//!
//! Lowering by hand needs `LowerContext` (the guest's `realloc` and memory)
//! and `InterfaceType`; contract v1's views also need `InstanceType` and
//! `CanonicalAbiInfo` to stand for v1's records. Wasmtime exports them only
//! under `__internal`, with no stability promise. Every other file of
//! `lower` takes them from here, so a wasmtime upgrade that moves them
//! touches this file alone. Nothing else may name `__internal`.

pub(super) use wasmtime::component::__internal::{
    CanonicalAbiInfo, InstanceType, InterfaceType, LowerContext,
};
