//! Ferry moves Kubernetes workloads to the cluster that runs them cheaper.
//!
//! A cycle ([`controller`]) reads cost and load metrics ([`metrics`]), builds
//! the policy's input ([`snapshot`], in the types of the [`contract`]), hands
//! it to a sandboxed WebAssembly policy ([`policy`], whose module bytes
//! [`modules`] fetches and uploads), checks every answer ([`guardrails`]), and carries
//! accepted moves out through the peer clusters' API servers ([`peers`],
//! [`migration`]). [`simulate`] replays the same decisions offline, [`demo`]
//! runs the whole job on local [`sandbox`] clusters. A receiver judges what a
//! peer sends it in [`admission`]. Durations, quantities and times are parsed
//! in [`units`]; keys, signatures and sealed Secrets between clusters are
//! [`trust`]'s.

pub mod admission;
pub mod contract;
pub mod controller;
pub mod crd;
pub mod demo;
pub mod guardrails;
pub mod metrics;
pub mod migration;
pub mod modules;
pub mod net;
pub mod peers;
pub mod policy;
pub mod simulate;
pub mod snapshot;
pub mod trust;
pub mod units;
pub use ferry_sandbox as sandbox;
