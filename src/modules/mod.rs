//! Policy module bytes: where the operator fetches them from (a ConfigMap,
//! a Secret or an https URL, always checked against the sha256 digest the
//! `MigrationPolicy` names) and how `ferry policy upload` puts them into a
//! cluster, and where compiled components are kept between runs. This is
//! I/O; running the bytes is [`crate::policy`]'s job.

mod cache;
pub mod oci;
pub mod source;
pub mod upload;

pub use cache::{DEFAULT_MAX_BYTES as DEFAULT_CACHE_MAX_BYTES, DiskCache};
