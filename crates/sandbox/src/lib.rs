//! An in-process, in-memory Kubernetes API server for Ferry's tests, the
//! demo and `ferry sandbox serve`.
//!
//! Each [`Sandbox`] is one cluster: HTTPS on 127.0.0.1 with a generated CA,
//! authentication by the admin's bearer token, ServiceAccount tokens and
//! client certificates (anonymous access is off), RBAC authorization with
//! impersonation and the access reviews, and enough of the real HTTP API
//! (discovery, OpenAPI documents, CRUD, list, watch, status and scale
//! subresources, merge/JSON/strategic patches, server-side apply, field
//! validation, CRDs with schema validation and CEL validation rules,
//! namespace lifecycle, finalizers and background, foreground and orphan
//! deletion) that the unmodified `kube::Client`, `kube-runtime` and
//! `kubectl` work against it. It is not a conformant API server: see
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
mod controllers;
mod ctx;
mod defaults;
mod delete;
mod discovery;
mod error;
mod field_validation;
mod gc;
mod http;
mod kubelet;
mod media;
mod meta_rules;
mod namespaces;
mod object;
mod openapi;
mod patch;
mod proto;
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
mod validation_rules;
mod watch;
mod write;

pub use cluster::{Faults, Kubelet};
pub use error::{Error, Result};
pub use kubelet::{Exit, ImageRule, KubeletRules, Pull, Readiness};
pub use sandbox::{Identity, Sandbox, SandboxConfig};
pub use serve::{ServeOptions, serve_until_signal};
