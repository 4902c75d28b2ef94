//! Lowering the snapshot into guest memory, and the input-size estimate
//! checked before it.
//!
//! The records are lowered straight from [`contract`]'s types. Wasmtime's
//! derived lowering looks up the guest memory once per primitive field,
//! which for a large snapshot costs more than the guest's own work, so
//! workloads and clusters are written here by hand: every string and list
//! is allocated in the guest with its `realloc`, in the order the canonical
//! ABI prescribes, each record is assembled in a host buffer, and then one
//! view of guest memory takes all the bytes. For a module that keeps
//! everything there is one allocation for all strings and arrays, and
//! records go straight into guest memory ([`Direct`]). The layout follows the
//! canonical ABI for the records in `policies/wit/policy.wit`; the tests
//! below check each field's offset against wasmtime's own layout, and
//! `tests/policy_host.rs` has a module echo a snapshot back field for field.

use std::mem::MaybeUninit;

use wasmtime::component::__internal::{InterfaceType, LowerContext};
use wasmtime::component::Lower;

use crate::contract::{self, Cluster, Label, Workload};
use super::store::StoreState;

/// Records assembled between two writes into guest memory.
const BATCH: usize = 256;

/// Offsets of the fields of `workload`, and its size.
mod workload_at {
    pub const NAMESPACE: usize = 0;
    pub const NAME: usize = 8;
    pub const KIND: usize = 16;
    pub const CLUSTER: usize = 24;
    pub const REPLICAS: usize = 32;
    pub const REQUESTS: usize = 40;
    pub const CPU_USAGE_MILLIS: usize = 56;
    pub const MEMORY_USAGE_BYTES: usize = 72;
    pub const HOURLY_COST: usize = 88;
    pub const LABELS: usize = 104;
    pub const SECONDS_SINCE_MIGRATION: usize = 112;
    pub const SIZE: usize = 128;
}

/// Offsets of the fields of `cluster`, and its size.
mod cluster_at {
    pub const NAME: usize = 0;
    pub const REGION: usize = 8;
    pub const LABELS: usize = 16;
    pub const READY: usize = 24;
    pub const ALLOCATABLE: usize = 32;
    pub const REQUESTED: usize = 48;
    pub const CPU_UTILIZATION: usize = 64;
    pub const MEMORY_UTILIZATION: usize = 80;
    pub const CPU_CORE_HOUR_PRICE: usize = 96;
    pub const MEMORY_GIB_HOUR_PRICE: usize = 112;
    pub const SIZE: usize = 128;
}

/// A `label` is two strings: key at 0, value at 8.
const LABEL_SIZE: usize = 16;

/// The custom section by which a module says it keeps its input until the
/// instance ends: the policy SDK's `policy!` macro writes it.
pub const KEEPS_INPUT_SECTION: &str = "ferry-policy-keeps-input";

/// What a module promises about its input, by the content of its
/// [`KEEPS_INPUT_SECTION`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Keeps {
    /// No section, or a content this version does not know: the component
    /// model's lowering, one guest allocation per string and list.
    #[default]
    Nothing,
    /// `0.1.0`: the module never frees the input's strings.
    Strings,
    /// `0.2.0`: no free of input memory reaches the module's allocator.
    Everything,
}

/// What the component's [`KEEPS_INPUT_SECTION`], if it has one, promises.
pub(crate) fn keeps_input(component: &[u8]) -> Keeps {
    let content =
        wasmparser::Parser::new(0)
            .parse_all(component)
            .find_map(|payload| match payload {
                Ok(wasmparser::Payload::CustomSection(section))
                    if section.name() == KEEPS_INPUT_SECTION =>
                {
                    Some(section.data())
                }
                _ => None,
            });
    match content {
        Some(b"0.1.0") => Keeps::Strings,
        Some(b"0.2.0") => Keeps::Everything,
        _ => Keeps::Nothing,
    }
}

/// How the strings and `labels` arrays of workloads and clusters are
/// allocated in the guest.
///
/// The canonical ABI calls the guest's `realloc` once per string and per
/// list, and those calls cost more than anything else in lowering a large
/// snapshot. A module that never frees its input's strings can have them all
/// in one allocation: wit-bindgen lifts a string in place. It frees each
/// list's array once it has read it, so the arrays join the block only for a
/// module whose allocator ignores frees of input memory ([`Keeps::Everything`]).
#[derive(Debug, Default)]
pub(crate) enum Placement {
    /// One `realloc` per string and per array.
    #[default]
    OneByOne,
    /// One block of this many bytes, allocated with the first thing placed;
    /// `lists` says whether the arrays go in it too.
    Packed { bytes: usize, lists: bool },
    /// The block, allocated: the next free guest offset and the end.
    Block {
        next: usize,
        end: usize,
        lists: bool,
    },
}

/// Where a string or an array went.
enum Placed {
    /// In the one block, after what was placed before it.
    InBlock(usize),
    /// In an allocation of its own.
    Alone(usize),
}

impl Placement {
    /// The placement for a module that keeps `keeps` of an input of `size`.
    pub(crate) fn new(keeps: Keeps, size: InputSize) -> Self {
        match keeps {
            Keeps::Nothing => Placement::OneByOne,
            Keeps::Strings => Placement::Packed {
                bytes: size.strings,
                lists: false,
            },
            Keeps::Everything => Placement::Packed {
                bytes: size.strings + size.arrays,
                lists: true,
            },
        }
    }

    /// Where the next `len` bytes, aligned to `align`, go.
    fn place<T>(
        &mut self,
        cx: &mut LowerContext<'_, T>,
        len: usize,
        align: u32,
    ) -> wasmtime::Result<Placed> {
        match *self {
            Placement::Block { next, end, lists } => {
                let at = next.next_multiple_of(align as usize);
                if at <= end && end - at >= len {
                    *self = Placement::Block {
                        next: at + len,
                        end,
                        lists,
                    };
                    return Ok(Placed::InBlock(at));
                }
            }
            Placement::Packed { bytes, lists } if bytes >= len => {
                let base = cx.realloc(0, 0, BLOCK_ALIGN, bytes)?;
                *self = Placement::Block {
                    next: base + len,
                    end: base + bytes,
                    lists,
                };
                return Ok(Placed::InBlock(base));
            }
            _ => {}
        }
        // The measure below counts everything placed here, so this is only
        // a safety net.
        cx.realloc(0, 0, align, len).map(Placed::Alone)
    }
}

/// The block's alignment: enough for a `labels` array.
const BLOCK_ALIGN: u32 = 4;

/// The store's placement, when the store is an evaluation's.
fn placement_of<'c, T: 'static>(cx: &'c mut LowerContext<'_, T>) -> Option<&'c mut Placement> {
    let data: &mut dyn std::any::Any = cx.store.data_mut();
    data.downcast_mut::<StoreState>()
        .map(|state| &mut state.placement)
}

/// Bytes waiting to be written into guest memory, and where they go.
struct Batch<'a> {
    /// Records and label arrays, assembled on the host.
    scratch: Vec<u8>,
    /// (guest offset, range of `scratch`).
    assembled: Vec<(usize, std::ops::Range<usize>)>,
    /// (guest offset, bytes) of every string with an allocation of its own.
    strings: Vec<(usize, &'a [u8])>,
    /// How strings and arrays are allocated.
    placing: Placement,
    /// What was placed in the one block since the last write, laid out as it
    /// goes into the guest, and the guest offset of its first byte.
    block: Vec<u8>,
    block_at: usize,
}

/// Where a record's strings and `labels` array go: each method places its
/// argument in the guest and returns the `(pointer, length)` pair that the
/// record stores.
trait Places<'a> {
    fn string(&mut self, s: &'a str) -> wasmtime::Result<[u8; 8]>;
    fn labels(&mut self, labels: &'a [Label]) -> wasmtime::Result<[u8; 8]>;
}

/// A [`Batch`] with the context its allocations go through.
struct Batching<'b, 'a, 'c, 'x, T: 'static> {
    batch: &'b mut Batch<'a>,
    cx: &'c mut LowerContext<'x, T>,
}

impl<'a, T: 'static> Places<'a> for Batching<'_, 'a, '_, '_, T> {
    fn string(&mut self, s: &'a str) -> wasmtime::Result<[u8; 8]> {
        self.batch.string(self.cx, s)
    }

    fn labels(&mut self, labels: &'a [Label]) -> wasmtime::Result<[u8; 8]> {
        self.batch.labels(self.cx, labels)
    }
}

impl<'a> Batch<'a> {
    /// Room for `records` records of `size` bytes with a few labels each,
    /// so that a batch rarely grows while it fills. Strings are either all
    /// packed or all alone, so only one of their two buffers gets room.
    fn with_room(records: usize, size: usize, placing: Placement) -> Self {
        let (alone, packed_bytes) = match placing {
            Placement::OneByOne => (records * 8, 0),
            Placement::Packed { .. } | Placement::Block { .. } => {
                (0, records * 8 * (16 + LABEL_SIZE))
            }
        };
        Batch {
            scratch: Vec::with_capacity(records * (size + 2 * LABEL_SIZE)),
            assembled: Vec::with_capacity(records * 2),
            strings: Vec::with_capacity(alone),
            placing,
            block: Vec::with_capacity(packed_bytes),
            block_at: 0,
        }
    }

    /// Allocates a string in the guest and returns its `(pointer, length)`
    /// pair as the canonical ABI stores it; the bytes follow at `flush`.
    fn string<T>(&mut self, cx: &mut LowerContext<'_, T>, s: &'a str) -> wasmtime::Result<[u8; 8]> {
        let len = u32::try_from(s.len())
            .map_err(|_| wasmtime::Error::msg("a string of the snapshot exceeds 4 GiB"))?;
        let ptr = match self.placing.place(cx, s.len(), 1)? {
            Placed::InBlock(ptr) => {
                self.block_up_to(ptr);
                self.block.extend_from_slice(s.as_bytes());
                ptr
            }
            Placed::Alone(ptr) => {
                self.strings.push((ptr, s.as_bytes()));
                ptr
            }
        };
        Ok(pair(ptr, len))
    }

    /// Allocates a `list<label>` and its strings; returns the list's pair.
    /// The array has an allocation of its own: the arrays share the block
    /// only for a module that keeps everything, which [`Direct`] lowers.
    fn labels<T>(
        &mut self,
        cx: &mut LowerContext<'_, T>,
        labels: &'a [Label],
    ) -> wasmtime::Result<[u8; 8]> {
        let len =
            u32::try_from(labels.len()).map_err(|_| wasmtime::Error::msg("too many labels"))?;
        let bytes = labels.len() * LABEL_SIZE;
        let ptr = cx.realloc(0, 0, 4, bytes)?;
        let start = self.scratch.len();
        self.scratch.resize(start + bytes, 0);
        self.assembled.push((ptr, start..start + bytes));
        for (i, label) in labels.iter().enumerate() {
            let key = self.string(cx, &label.key)?;
            let value = self.string(cx, &label.value)?;
            let at = start + i * LABEL_SIZE;
            put(&mut self.scratch, at, &key);
            put(&mut self.scratch, at + 8, &value);
        }
        Ok(pair(ptr, len))
    }

    /// Pads the gathered block up to guest offset `ptr`, where the next
    /// thing placed in the block goes, and returns its index in `block`.
    fn block_up_to(&mut self, ptr: usize) -> usize {
        if self.block.is_empty() {
            self.block_at = ptr;
        }
        let start = ptr - self.block_at;
        self.block.resize(start, 0);
        start
    }

    /// Queues an assembled record bound for guest offset `offset`.
    fn record(&mut self, offset: usize, record: &[u8]) {
        let start = self.scratch.len();
        self.scratch.extend_from_slice(record);
        self.assembled.push((offset, start..start + record.len()));
    }

    /// Writes everything into guest memory at once and empties the batch.
    fn flush<T>(&mut self, cx: &mut LowerContext<'_, T>) -> wasmtime::Result<()> {
        let memory = cx.as_slice_mut();
        let at = self.block_at;
        memory
            .get_mut(at..at + self.block.len())
            .ok_or_else(beyond_memory)?
            .copy_from_slice(&self.block);
        self.block.clear();
        for (at, bytes) in self.strings.drain(..) {
            memory
                .get_mut(at..at + bytes.len())
                .ok_or_else(beyond_memory)?
                .copy_from_slice(bytes);
        }
        for (at, range) in self.assembled.drain(..) {
            let bytes = &self.scratch[range];
            memory
                .get_mut(at..at + bytes.len())
                .ok_or_else(beyond_memory)?
                .copy_from_slice(bytes);
        }
        self.scratch.clear();
        Ok(())
    }
}

fn beyond_memory() -> wasmtime::Error {
    wasmtime::Error::msg("realloc return: beyond end of memory")
}

/// Lowering straight into guest memory, for a module that keeps everything.
/// Once its one block is allocated nothing more is asked of its allocator,
/// so a whole list can be written through one borrow of memory, with no
/// host buffer between: each string and array is copied once, to where it
/// stays.
struct Direct<'m> {
    memory: &'m mut [u8],
    /// The next free offset of the block, and its end.
    next: usize,
    end: usize,
}

impl Direct<'_> {
    /// The next `len` bytes of the block, aligned to `align`. The block was
    /// measured to hold everything; running out means that measure is wrong,
    /// an error rather than a write past the block.
    fn take(&mut self, len: usize, align: usize) -> wasmtime::Result<usize> {
        let at = self.next.next_multiple_of(align);
        if at > self.end || self.end - at < len {
            return Err(wasmtime::Error::msg(
                "the snapshot outgrew the block measured for it",
            ));
        }
        self.next = at + len;
        Ok(at)
    }

    /// Copies `bytes` to guest offset `at`. Most are a few bytes long,
    /// where a call to `memcpy` would cost more than the copy.
    fn write(&mut self, at: usize, bytes: &[u8]) -> wasmtime::Result<()> {
        let to = self
            .memory
            .get_mut(at..at + bytes.len())
            .ok_or_else(beyond_memory)?;
        copy_short(to, bytes);
        Ok(())
    }
}

/// Copies `from` into `to`, of the same length, with two overlapping
/// fixed-size moves when it is 4 to 16 bytes long.
#[inline(always)]
fn copy_short(to: &mut [u8], from: &[u8]) {
    let n = from.len();
    debug_assert_eq!(to.len(), n);
    if (8..=16).contains(&n) {
        to[..8].copy_from_slice(&from[..8]);
        to[n - 8..].copy_from_slice(&from[n - 8..]);
    } else if (4..8).contains(&n) {
        to[..4].copy_from_slice(&from[..4]);
        to[n - 4..].copy_from_slice(&from[n - 4..]);
    } else {
        to.copy_from_slice(from);
    }
}

impl<'a> Places<'a> for Direct<'_> {
    fn string(&mut self, s: &'a str) -> wasmtime::Result<[u8; 8]> {
        let at = self.take(s.len(), 1)?;
        self.write(at, s.as_bytes())?;
        // The block lies in a 32-bit memory, so the length fits.
        Ok(pair(at, s.len() as u32))
    }

    fn labels(&mut self, labels: &'a [Label]) -> wasmtime::Result<[u8; 8]> {
        let bytes = labels.len() * LABEL_SIZE;
        let at = self.take(bytes, BLOCK_ALIGN as usize)?;
        for (i, label) in labels.iter().enumerate() {
            let mut entry = [0; LABEL_SIZE];
            entry[..8].copy_from_slice(&self.string(&label.key)?);
            entry[8..].copy_from_slice(&self.string(&label.value)?);
            self.write(at + i * LABEL_SIZE, &entry)?;
        }
        Ok(pair(at, labels.len() as u32))
    }
}

fn pair(ptr: usize, len: u32) -> [u8; 8] {
    let mut out = [0; 8];
    // `realloc` has checked that the pointer lies in a 32-bit memory.
    out[..4].copy_from_slice(&(ptr as u32).to_le_bytes());
    out[4..].copy_from_slice(&len.to_le_bytes());
    out
}

fn put(record: &mut [u8], at: usize, bytes: &[u8]) {
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

/// The largest record lowered by hand.
const RECORD_MAX: usize = 128;

/// A record lowered by hand, as an element of a list.
trait ByHand: Sized {
    const SIZE: usize;

    /// Places the record's strings and lists in the guest, in field order,
    /// and fills `record` (zeroed, [`Self::SIZE`] bytes) with its bytes.
    fn fill<'a>(&'a self, places: &mut impl Places<'a>, record: &mut [u8]) -> wasmtime::Result<()>;
}

fn store_list<R: ByHand, T: 'static>(
    cx: &mut LowerContext<'_, T>,
    offset: usize,
    items: &[R],
) -> wasmtime::Result<()> {
    const { assert!(R::SIZE <= RECORD_MAX) };
    if items.is_empty() {
        return Ok(());
    }
    // The plan passes from the clusters' list to the workloads'.
    let placing = placement_of(cx).map(std::mem::take).unwrap_or_default();
    let placing = match placing {
        Placement::Packed { bytes, lists: true } => {
            let base = cx.realloc(0, 0, BLOCK_ALIGN, bytes)?;
            store_direct(cx, offset, items, base, base + bytes)?
        }
        Placement::Block {
            next,
            end,
            lists: true,
        } => store_direct(cx, offset, items, next, end)?,
        placing => store_batched(cx, offset, items, placing)?,
    };
    if let Some(placement) = placement_of(cx) {
        *placement = placing;
    }
    Ok(())
}

/// Lowers `items` through a host buffer, a batch at a time, allocating
/// each string and array as `placing` says.
fn store_batched<R: ByHand, T: 'static>(
    cx: &mut LowerContext<'_, T>,
    offset: usize,
    items: &[R],
    placing: Placement,
) -> wasmtime::Result<Placement> {
    let mut batch = Batch::with_room(items.len().min(BATCH), R::SIZE, placing);
    for (n, chunk) in items.chunks(BATCH).enumerate() {
        for (i, item) in chunk.iter().enumerate() {
            let mut record = [0; RECORD_MAX];
            let record = &mut record[..R::SIZE];
            item.fill(
                &mut Batching {
                    batch: &mut batch,
                    cx,
                },
                record,
            )?;
            batch.record(offset + (n * BATCH + i) * R::SIZE, record);
        }
        batch.flush(cx)?;
    }
    Ok(batch.placing)
}

/// Lowers `items` straight into guest memory, their strings and arrays into
/// the block from guest offset `next` to `end`.
fn store_direct<R: ByHand, T: 'static>(
    cx: &mut LowerContext<'_, T>,
    offset: usize,
    items: &[R],
    next: usize,
    end: usize,
) -> wasmtime::Result<Placement> {
    let mut direct = Direct {
        memory: cx.as_slice_mut(),
        next,
        end,
    };
    for (i, item) in items.iter().enumerate() {
        let mut record = [0; RECORD_MAX];
        let record = &mut record[..R::SIZE];
        item.fill(&mut direct, record)?;
        direct.write(offset + i * R::SIZE, record)?;
    }
    Ok(Placement::Block {
        next: direct.next,
        end,
        lists: true,
    })
}

impl ByHand for Workload {
    const SIZE: usize = workload_at::SIZE;

    fn fill<'a>(&'a self, places: &mut impl Places<'a>, r: &mut [u8]) -> wasmtime::Result<()> {
        use workload_at as at;
        let w = self;
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
}

impl ByHand for Cluster {
    const SIZE: usize = cluster_at::SIZE;

    fn fill<'a>(&'a self, places: &mut impl Places<'a>, r: &mut [u8]) -> wasmtime::Result<()> {
        use cluster_at as at;
        let c = self;
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
}

/// `Lower` for a [`ByHand`] record. It is lowered only inside lists: the
/// contract never passes one flat, as a parameter of its own.
macro_rules! lower_by_hand {
    ($record:ty) => {
        // SAFETY: every byte written lies within the bounds wasmtime checked
        // for the list and for each `realloc` result, and the record's layout
        // is the canonical ABI layout that its derived `ComponentType` (type
        // checked against the WIT) declares; see the tests.
        unsafe impl Lower for $record {
            fn linear_lower_to_flat<T>(
                &self,
                _cx: &mut LowerContext<'_, T>,
                _ty: InterfaceType,
                _dst: &mut MaybeUninit<Self::Lower>,
            ) -> wasmtime::Result<()> {
                Err(wasmtime::Error::msg(
                    "the contract passes workloads and clusters only inside lists",
                ))
            }

            fn linear_lower_to_memory<T>(
                &self,
                cx: &mut LowerContext<'_, T>,
                _ty: InterfaceType,
                offset: usize,
            ) -> wasmtime::Result<()> {
                store_list(cx, offset, std::slice::from_ref(self))
            }

            fn linear_store_list_to_memory<T>(
                cx: &mut LowerContext<'_, T>,
                _ty: InterfaceType,
                offset: usize,
                items: &[Self],
            ) -> wasmtime::Result<()> {
                store_list(cx, offset, items)
            }
        }
    };
}

lower_by_hand!(Workload);
lower_by_hand!(Cluster);

/// What the snapshot occupies once lowered into guest memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InputSize {
    /// Roughly the whole: every string plus the fixed part of every record.
    pub total: usize,
    /// Exactly the strings of workloads and clusters, labels included: the
    /// ones lowered here, which [`Placement::Packed`] can place in one block.
    pub strings: usize,
    /// The `labels` arrays of workloads and clusters, each with room to be
    /// aligned, for a block that holds them too.
    pub arrays: usize,
}

pub(crate) fn input_size(s: &contract::Snapshot) -> InputSize {
    let labels = |labels: &[Label]| -> (usize, usize) {
        let strings = labels.iter().map(|l| l.key.len() + l.value.len()).sum();
        (labels.len() * LABEL_SIZE, strings)
    };
    let (mut fixed, mut strings, mut arrays) = (0, 0, 0);
    for c in &s.clusters {
        let (label_fixed, label_strings) = labels(&c.labels);
        fixed += cluster_at::SIZE + label_fixed;
        arrays += label_fixed + BLOCK_ALIGN as usize - 1;
        strings += c.name.len() + c.region.len() + label_strings;
    }
    for w in &s.workloads {
        let (label_fixed, label_strings) = labels(&w.labels);
        fixed += workload_at::SIZE + label_fixed;
        arrays += label_fixed + BLOCK_ALIGN as usize - 1;
        strings +=
            w.namespace.len() + w.name.len() + w.kind.len() + w.cluster.len() + label_strings;
    }
    InputSize {
        total: 64 + fixed + strings + s.parameters.len(),
        strings,
        arrays,
    }
}

/// The layout above must be the one wasmtime derives from the WIT types.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Resources;
    use wasmtime::component::ComponentType;

    /// Offsets of consecutive fields with the given ABIs, and the size.
    fn layout(fields: &[wasmtime::component::__internal::CanonicalAbiInfo]) -> Vec<usize> {
        let mut offset = 0;
        let mut out: Vec<usize> = fields
            .iter()
            .map(|abi| abi.next_field32_size(&mut offset))
            .collect();
        out.push(offset.next_multiple_of(8));
        out
    }

    #[test]
    fn workload_layout_is_the_canonical_one() {
        let abi = [
            String::ABI,
            String::ABI,
            String::ABI,
            String::ABI,
            u32::ABI,
            Resources::ABI,
            Option::<u64>::ABI,
            Option::<u64>::ABI,
            Option::<f64>::ABI,
            Vec::<Label>::ABI,
            Option::<u64>::ABI,
        ];
        use workload_at as at;
        let ours = [
            at::NAMESPACE,
            at::NAME,
            at::KIND,
            at::CLUSTER,
            at::REPLICAS,
            at::REQUESTS,
            at::CPU_USAGE_MILLIS,
            at::MEMORY_USAGE_BYTES,
            at::HOURLY_COST,
            at::LABELS,
            at::SECONDS_SINCE_MIGRATION,
            at::SIZE,
        ];
        assert_eq!(layout(&abi), ours);
        assert_eq!(Workload::SIZE32, at::SIZE);
    }

    #[test]
    fn cluster_layout_is_the_canonical_one() {
        let abi = [
            String::ABI,
            String::ABI,
            Vec::<Label>::ABI,
            bool::ABI,
            Resources::ABI,
            Resources::ABI,
            Option::<f64>::ABI,
            Option::<f64>::ABI,
            Option::<f64>::ABI,
            Option::<f64>::ABI,
        ];
        use cluster_at as at;
        let ours = [
            at::NAME,
            at::REGION,
            at::LABELS,
            at::READY,
            at::ALLOCATABLE,
            at::REQUESTED,
            at::CPU_UTILIZATION,
            at::MEMORY_UTILIZATION,
            at::CPU_CORE_HOUR_PRICE,
            at::MEMORY_GIB_HOUR_PRICE,
            at::SIZE,
        ];
        assert_eq!(layout(&abi), ours);
        assert_eq!(Cluster::SIZE32, at::SIZE);
    }

    #[test]
    fn short_copies_copy_every_length() {
        let from: Vec<u8> = (1..=40).collect();
        for n in 0..=40 {
            let mut to = vec![0; n];
            copy_short(&mut to, &from[..n]);
            assert_eq!(to, from[..n], "{n} bytes");
        }
    }

    #[test]
    fn label_layout_is_the_canonical_one() {
        assert_eq!(layout(&[String::ABI, String::ABI]), [0, 8, LABEL_SIZE]);
        assert_eq!(Label::SIZE32, LABEL_SIZE);
    }
}
