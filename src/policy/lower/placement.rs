//! Where the snapshot's strings and `labels` arrays go in guest memory:
//! one allocation each, or one block for all, as the module's promise
//! ([`Keeps`]) allows. The store holds an evaluation's [`Placement`]
//! between the lowering of the clusters' list and the workloads'.
//!
//! Imports neither the store nor the lowering, which both use it.

use super::abi::LowerContext;
use super::keeps::Keeps;
use super::layout::BLOCK_ALIGN;
use super::size::InputSize;

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
pub(super) enum Placed {
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
    pub(super) fn place<T>(
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
