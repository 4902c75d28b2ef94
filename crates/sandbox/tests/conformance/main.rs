//! The sandbox conformance suite: per verb (create, apply client- and
//! server-side, get, list, watch, patch of each type, scale, delete,
//! explain, `auth can-i`, `create token`, and the 401/403 refusals), a table
//! of rows, each driven through kubectl 1.35 (`FERRY_KUBECTL`) and raw HTTP
//! (JSON, and protobuf where kube-apiserver speaks it), for a built-in kind
//! and a custom resource. Every row runs as a caller holding exactly the RBAC
//! it needs, and again as one lacking the verb, and compares the answer with
//! what upstream documents (see `upstream.rs`, which cites the sources).
//!
//! One sandbox per test function; a row never sleeps to wait, it awaits the
//! event with `common::WAIT`. The suite must never depend on the machine's
//! speed nor leave a sandbox or kubectl process behind.

#[path = "../common/mod.rs"]
mod common;
use common::pb;
mod harness;
mod kinds;
mod upstream;

mod apply;
mod identity;
mod patch;
mod reads;
mod scale;
mod writes;
