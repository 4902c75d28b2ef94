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
//! canonical ABI for the records of contract v2 (`policies/wit/v2/policy.wit`)
//! and, through the views of [`v1`], contract v1 (`policies/wit/policy.wit`),
//! whose records are v2's leading fields; the tests of
//! [`layout`] check each field's offset against wasmtime's own layout, and
//! `tests/policy_host.rs` has a module echo a snapshot back field for field.
//!
//! The parts: [`abi`] is the one door to wasmtime's unstable lowering API;
//! [`keeps`] reads a module's promise about its input; [`placement`] decides
//! where strings and arrays go, within the sizes [`size`] measures; [`layout`]
//! holds the record layout; [`records`] encodes the records, which [`batch`]
//! and [`direct`] write into the guest. This file only joins them into
//! wasmtime's `Lower`. Nothing here may run guest code beyond `realloc`.
//!
//! [`contract`]: crate::contract

mod abi;
mod batch;
mod direct;
mod keeps;
mod layout;
pub(crate) mod placement;
mod records;
mod size;
pub(crate) mod v1;

use std::mem::MaybeUninit;

use wasmtime::component::Lower;

use self::abi::{InterfaceType, LowerContext};
use self::batch::{Batch, Batching};
use self::direct::Direct;
use self::layout::BLOCK_ALIGN;
use self::records::{ByHand, RECORD_MAX};
use self::v1::V1;
use super::store::StoreState;
use crate::contract::{Cluster, Workload};

pub(crate) use self::keeps::keeps_input;
pub use self::keeps::{KEEPS_INPUT_SECTION, Keeps};
pub(crate) use self::placement::Placement;
pub(crate) use self::size::input_size;

/// Records assembled between two writes into guest memory.
const BATCH: usize = 256;

/// The store's placement, when the store is an evaluation's.
fn placement_of<'c, T: 'static>(cx: &'c mut LowerContext<'_, T>) -> Option<&'c mut Placement> {
    let data: &mut dyn std::any::Any = cx.store.data_mut();
    data.downcast_mut::<StoreState>()
        .map(|state| &mut state.placement)
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
lower_by_hand!(V1<Workload>);
lower_by_hand!(V1<Cluster>);
