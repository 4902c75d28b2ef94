//! Helpers shared by the integration tests and the benchmarks. Every test
//! file includes them the same way, `mod support;`, and a benchmark with
//! `#[path = "../tests/support/mod.rs"] mod support;`:
//!
//! - [`cluster`]: sandbox clusters with Ferry's CRDs, peered, and the
//!   two-cluster world of the migration tests;
//! - [`nats`]: a real nats-server (JetStream, TLS with a test CA, per-user permissions);
//! - [`modules`]: the example policy components, as the test command builds them;
//! - [`operator`]: two peered clusters with scripted prices, and the operator run in-process;
//! - [`ports`]: loopback ports for the servers the tests start, each handed out once;
//! - [`prometheus`]: a real Prometheus serving OpenMetrics fixtures;
//! - [`chart`]: the Helm chart rendered by `helm template` for the deployment tests;
//! - [`registry`]: a real OCI registry (Debian's `docker-registry`) with TLS;
//! - [`simulate`]: real compiled policies run through the simulator;
//! - [`tools`]: the pinned kubectl and helm that `scripts/install-tools` installs.
//!
//! Not every test uses every helper.
#![allow(dead_code, unused_imports)]

pub mod chart;
pub mod cluster;
pub mod modules;
pub mod nats;
pub mod operator;
pub mod ports;
pub mod prometheus;
pub mod registry;
pub mod simulate;
pub mod token_server;
pub mod tools;
