//! Lowering through a host buffer, a batch of records at a time, for a
//! module that may free its input: each string and array is allocated with
//! the guest's `realloc` (or in the one block, as the [`Placement`] says),
//! and the batch reaches guest memory in one write.

use super::abi::LowerContext;
use super::layout::LABEL_SIZE;
use super::placement::{Placed, Placement};
use super::records::{Places, beyond_memory, pair, put};
use crate::contract::Label;

/// Bytes waiting to be written into guest memory, and where they go.
pub(super) struct Batch<'a> {
    /// Records and label arrays, assembled on the host.
    scratch: Vec<u8>,
    /// (guest offset, range of `scratch`).
    assembled: Vec<(usize, std::ops::Range<usize>)>,
    /// (guest offset, bytes) of every string with an allocation of its own.
    strings: Vec<(usize, &'a [u8])>,
    /// How strings and arrays are allocated.
    pub(super) placing: Placement,
    /// What was placed in the one block since the last write, laid out as it
    /// goes into the guest, and the guest offset of its first byte.
    block: Vec<u8>,
    block_at: usize,
}

/// A [`Batch`] with the context its allocations go through.
pub(super) struct Batching<'b, 'a, 'c, 'x, T: 'static> {
    pub(super) batch: &'b mut Batch<'a>,
    pub(super) cx: &'c mut LowerContext<'x, T>,
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
    pub(super) fn with_room(records: usize, size: usize, placing: Placement) -> Self {
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
    ///
    /// [`Direct`]: super::direct::Direct
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
    pub(super) fn record(&mut self, offset: usize, record: &[u8]) {
        let start = self.scratch.len();
        self.scratch.extend_from_slice(record);
        self.assembled.push((offset, start..start + record.len()));
    }

    /// Writes everything into guest memory at once and empties the batch.
    pub(super) fn flush<T>(&mut self, cx: &mut LowerContext<'_, T>) -> wasmtime::Result<()> {
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
