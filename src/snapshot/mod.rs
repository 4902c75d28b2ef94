//! Building the policy's input from metrics plus the cluster's own state.
//! [`assemble`] is the one place the input is put together; the live loop,
//! `ferry snapshot` and the simulator all call it. Everything here is pure:
//! the callers read the cluster and the metrics, and hand over what they read.

mod assemble;
mod workloads;

pub use assemble::{Member, Terms, apply_cluster, apply_usage, assemble};
pub use workloads::{deployment_view, from_deployment, moved_away};
