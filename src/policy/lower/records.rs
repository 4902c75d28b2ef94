//! The records lowered by hand and what they are built from: the
//! [`Places`] their strings and arrays go to, the `(pointer, length)` pairs
//! and fields of the canonical ABI, and the error of a write that guest
//! memory cannot hold. Writes into a host buffer only: the guest is reached
//! through [`Places`].

use super::layout::{cluster_at, workload_at};
use super::v1::V1;
use crate::contract::{self, Cluster, Label, Workload};

/// Where a record's strings and `labels` array go: each method places its
/// argument in the guest and returns the `(pointer, length)` pair that the
/// record stores.
pub(super) trait Places<'a> {
    fn string(&mut self, s: &'a str) -> wasmtime::Result<[u8; 8]>;
    fn labels(&mut self, labels: &'a [Label]) -> wasmtime::Result<[u8; 8]>;
}

pub(super) fn pair(ptr: usize, len: u32) -> [u8; 8] {
    let mut out = [0; 8];
    // `realloc` has checked that the pointer lies in a 32-bit memory.
    out[..4].copy_from_slice(&(ptr as u32).to_le_bytes());
    out[4..].copy_from_slice(&len.to_le_bytes());
    out
}

pub(super) fn put(record: &mut [u8], at: usize, bytes: &[u8]) {
    record[at..at + bytes.len()].copy_from_slice(bytes);
}

fn put_resources(record: &mut [u8], at: usize, r: contract::Resources) {
    put(record, at, &r.cpu_millis.to_le_bytes());
    put(record, at + 8, &r.memory_bytes.to_le_bytes());
}

/// An `option<u64>` or `option<f64>`: a discriminant byte, the payload at 8.
fn put_option(record: &mut [u8], at: usize, value: Option<[u8; 8]>) {
    if let Some(bytes) = value {
        record[at] = 1;
        put(record, at + 8, &bytes);
    }
}

/// The largest record lowered by hand: a contract v2 `workload`.
pub(super) const RECORD_MAX: usize = workload_at::SIZE_V2;

/// A record lowered by hand, as an element of a list.
pub(super) trait ByHand: Sized {
    const SIZE: usize;

    /// Places the record's strings and lists in the guest, in field order,
    /// and fills `record` (zeroed, [`Self::SIZE`] bytes) with its bytes.
    fn fill<'a>(&'a self, places: &mut impl Places<'a>, record: &mut [u8]) -> wasmtime::Result<()>;
}

/// A write that guest memory cannot hold, though `realloc` returned it.
pub(super) fn beyond_memory() -> wasmtime::Error {
    wasmtime::Error::msg("realloc return: beyond end of memory")
}

/// The fields contract v1 and v2 share, which lead the record in both.
fn fill_workload_v1<'a>(
    w: &'a Workload,
    places: &mut impl Places<'a>,
    r: &mut [u8],
) -> wasmtime::Result<()> {
    use workload_at as at;
    let namespace = places.string(&w.namespace)?;
    let name = places.string(&w.name)?;
    let kind = places.string(&w.kind)?;
    let cluster = places.string(&w.cluster)?;
    let labels = places.labels(&w.labels)?;
    put(r, at::NAMESPACE, &namespace);
    put(r, at::NAME, &name);
    put(r, at::KIND, &kind);
    put(r, at::CLUSTER, &cluster);
    put(r, at::REPLICAS, &w.replicas.to_le_bytes());
    put_resources(r, at::REQUESTS, w.requests);
    let u64_bytes = |v: Option<u64>| v.map(u64::to_le_bytes);
    put_option(r, at::CPU_USAGE_MILLIS, u64_bytes(w.cpu_usage_millis));
    put_option(r, at::MEMORY_USAGE_BYTES, u64_bytes(w.memory_usage_bytes));
    put_option(r, at::HOURLY_COST, w.hourly_cost.map(f64::to_le_bytes));
    put(r, at::LABELS, &labels);
    put_option(
        r,
        at::SECONDS_SINCE_MIGRATION,
        u64_bytes(w.seconds_since_migration),
    );
    Ok(())
}

/// The fields contract v1 and v2 share, which lead the record in both.
fn fill_cluster_v1<'a>(
    c: &'a Cluster,
    places: &mut impl Places<'a>,
    r: &mut [u8],
) -> wasmtime::Result<()> {
    use cluster_at as at;
    let name = places.string(&c.name)?;
    let region = places.string(&c.region)?;
    let labels = places.labels(&c.labels)?;
    put(r, at::NAME, &name);
    put(r, at::REGION, &region);
    put(r, at::LABELS, &labels);
    r[at::READY] = u8::from(c.ready);
    put_resources(r, at::ALLOCATABLE, c.allocatable);
    put_resources(r, at::REQUESTED, c.requested);
    let f64_bytes = |v: Option<f64>| v.map(f64::to_le_bytes);
    put_option(r, at::CPU_UTILIZATION, f64_bytes(c.cpu_utilization));
    put_option(r, at::MEMORY_UTILIZATION, f64_bytes(c.memory_utilization));
    put_option(r, at::CPU_CORE_HOUR_PRICE, f64_bytes(c.cpu_core_hour_price));
    put_option(
        r,
        at::MEMORY_GIB_HOUR_PRICE,
        f64_bytes(c.memory_gib_hour_price),
    );
    Ok(())
}

/// A contract v1 `workload`.
impl ByHand for V1<Workload> {
    const SIZE: usize = workload_at::SIZE;

    fn fill<'a>(&'a self, places: &mut impl Places<'a>, r: &mut [u8]) -> wasmtime::Result<()> {
        fill_workload_v1(&self.0, places, r)
    }
}

/// A contract v2 `workload`: v1's fields, then the move history and the
/// disruption cost.
impl ByHand for Workload {
    const SIZE: usize = workload_at::SIZE_V2;

    fn fill<'a>(&'a self, places: &mut impl Places<'a>, r: &mut [u8]) -> wasmtime::Result<()> {
        use workload_at as at;
        fill_workload_v1(self, places, r)?;
        put_option(r, at::LAST_MOVE_MS, self.last_move_ms.map(u64::to_le_bytes));
        put(r, at::MOVES_LAST_DAY, &self.moves_last_day.to_le_bytes());
        put(r, at::MOVES_LAST_WEEK, &self.moves_last_week.to_le_bytes());
        put_option(
            r,
            at::DISRUPTION_COST,
            self.disruption_cost.map(f64::to_le_bytes),
        );
        Ok(())
    }
}

/// A contract v1 `cluster`.
impl ByHand for V1<Cluster> {
    const SIZE: usize = cluster_at::SIZE;

    fn fill<'a>(&'a self, places: &mut impl Places<'a>, r: &mut [u8]) -> wasmtime::Result<()> {
        fill_cluster_v1(&self.0, places, r)
    }
}

/// A contract v2 `cluster`: v1's fields, then the carbon intensity.
impl ByHand for Cluster {
    const SIZE: usize = cluster_at::SIZE_V2;

    fn fill<'a>(&'a self, places: &mut impl Places<'a>, r: &mut [u8]) -> wasmtime::Result<()> {
        fill_cluster_v1(self, places, r)?;
        put_option(
            r,
            cluster_at::CARBON_INTENSITY,
            self.carbon_intensity.map(f64::to_le_bytes),
        );
        Ok(())
    }
}
