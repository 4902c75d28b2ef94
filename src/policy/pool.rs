//! Instance slots. Every evaluation instantiates its module afresh; with
//! wasmtime's default allocator that means mapping a new linear memory,
//! faulting in every page the guest touches and unmapping it all again,
//! which costs more than a small evaluation itself. The pooling allocator
//! instead keeps a fixed set of memories and tables mapped and, between
//! evaluations, resets only the pages the last guest dirtied back to the
//! module's initial image. No guest state survives: a reused slot starts
//! from the same bytes a fresh mapping would.
//!
//! The pool has one slot per evaluation allowed at once. [`Slots`] hands them
//! out, so an evaluation waits for a slot instead of failing on a full pool.

use std::sync::{Condvar, Mutex};

use wasmtime::{Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

/// What one component may hold. A Rust component built for wasm32-wasip2
/// has one memory, a handful of core instances and a few tables; these caps
/// leave room for composed components and bound what a hostile one gets.
const CORE_INSTANCES_PER_COMPONENT: u32 = 32;
const MEMORIES_PER_COMPONENT: u32 = 4;
const TABLES_PER_COMPONENT: u32 = 16;

/// Memory bytes per slot that stay mapped between evaluations. Only the pages
/// a guest dirtied are reset, so this bounds the resident set of an idle
/// pool, not the cost of a reset.
const KEEP_RESIDENT: usize = 16 << 20;

/// The allocation strategy for an engine that runs at most `slots`
/// evaluations at once.
pub(crate) fn strategy(slots: u32) -> InstanceAllocationStrategy {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(slots)
        .total_core_instances(slots * CORE_INSTANCES_PER_COMPONENT)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .total_memories(slots * MEMORIES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .total_tables(slots * TABLES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        // Synchronous calls run on the host's stack; no fibers are pooled.
        .total_stacks(0)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10)
        // Reset only the pages the guest touched, where the kernel can say
        // which (Linux 6.7 and later); otherwise the first KEEP_RESIDENT
        // bytes are cleared.
        .pagemap_scan(Enabled::Auto);
    InstanceAllocationStrategy::Pooling(pool)
}

/// A counting gate over the pool's slots.
pub(crate) struct Slots {
    free: Mutex<u32>,
    returned: Condvar,
}

/// A taken slot; returned when dropped, after the store that used it.
pub(crate) struct Slot<'a> {
    slots: &'a Slots,
}

impl Slots {
    pub(crate) fn new(count: u32) -> Self {
        Slots {
            free: Mutex::new(count),
            returned: Condvar::new(),
        }
    }

    /// Waits until a slot is free and takes it.
    pub(crate) fn take(&self) -> Slot<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.returned.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        Slot { slots: self }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut free = self.slots.free.lock().unwrap_or_else(|p| p.into_inner());
        *free += 1;
        self.slots.returned.notify_one();
    }
}
