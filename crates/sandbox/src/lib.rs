//! An in-process, in-memory Kubernetes API server for Ferry's tests, the
//! demo and `ferry sandbox serve`.
//!
//! Each [`Sandbox`] is one cluster: HTTPS on 127.0.0.1 with a generated CA,
//! bearer-token authentication, RBAC authorization, and enough of the real HTTP API (discovery,
//! CRUD, list, watch, status and scale subresources, merge/JSON/strategic
//! patches, server-side apply, CRDs with schema validation, finalizers and
//! cascading deletion) that the unmodified `kube::Client`, `kube-runtime`
//! and `kubectl` work against it. It is not a conformant API server: see
//! the crate's README for what is left out.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ferry_sandbox::Error> {
//! use ferry_sandbox::{Sandbox, SandboxConfig};
//! let sandbox = Sandbox::start(SandboxConfig::new("east")).await?;
//! sandbox.write_kubeconfig("/tmp/east.kubeconfig")?;
//! sandbox.faults().set_error_rate(0.1);
//! sandbox.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! The server never blocks while holding its state lock and never panics on
//! request data; every failure is answered with a `Status` object.

mod api;
mod apply;
mod auth;
mod cluster;
mod ctx;
mod defaults;
mod discovery;
mod error;
mod http;
mod kubelet;
mod object;
mod patch;
mod registry;
mod route;
mod sandbox;
mod schema;
mod selector;
mod serve;
mod store;
mod subresource;
mod table;
mod tls;
mod watch;
mod write;

pub use cluster::{Faults, Kubelet};
pub use error::{Error, Result};
pub use sandbox::{Sandbox, SandboxConfig};
pub use serve::{ServeOptions, serve_until_signal};
