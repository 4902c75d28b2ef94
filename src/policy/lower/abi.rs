//! The one door to wasmtime's unstable lowering API.
//!
//! Lowering by hand needs `LowerContext` (the guest's `realloc` and memory)
//! and `InterfaceType`, which wasmtime exports only under `__internal`, with
//! no stability promise; the layout tests also read `CanonicalAbiInfo`. Every
//! other file of `lower` takes them from here, so a wasmtime upgrade that
//! moves them touches this file alone. Nothing else may name `__internal`.

#[cfg(test)]
pub(super) use wasmtime::component::__internal::CanonicalAbiInfo;
pub(super) use wasmtime::component::__internal::{InterfaceType, LowerContext};
