//! Ferry moves Kubernetes workloads to the cluster that runs them cheaper.
//!
//! A cycle reads cost and load metrics ([`metrics`]), hands a snapshot of them
//! to a sandboxed WebAssembly policy ([`policy`]), checks every answer, and
//! carries accepted moves out through the peer clusters' API servers.

pub mod crd;
pub mod metrics;
pub mod policy;
pub mod snapshot;
pub use ferry_sandbox as sandbox;
