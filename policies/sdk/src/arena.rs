//! The allocator that [`policy!`](crate::policy) installs in a module.
//!
//! Ferry instantiates a module afresh for every evaluation and drops the
//! instance after its one call, so nothing the input occupies ever needs to
//! be given back. Until `decide` starts, which is while the host writes the
//! snapshot into the guest and the bindings read it, every allocation is
//! bumped off chunks that the arena takes from the system allocator, and
//! every free of arena memory is ignored. That lets the host place the
//! input's strings and list arrays in one block (see
//! [`KEEPS_INPUT_SECTION`](crate::KEEPS_INPUT_SECTION)): the bindings' frees
//! of those arrays must not reach a real allocator.
//!
//! Once `decide` starts, new allocations go to the system allocator as in any
//! module, so a policy's own working memory is reused as usual. Frees of
//! arena memory stay ignored, wherever they come from.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The first chunk; each next one is at least twice the one before.
const FIRST_CHUNK: usize = 16 * 1024;
/// Chunks at most. Doubling from 16 KiB, the last would pass 4 GiB.
const CHUNKS: usize = 20;
const CHUNK_ALIGN: usize = 16;

/// The global allocator of a module exported with `policy!`.
pub struct InputArena {
    /// The chunks taken, as (start, end), and how many.
    chunks: [Cell<(usize, usize)>; CHUNKS],
    taken: Cell<usize>,
    /// Bounds of all chunks together: most pointers are outside them.
    low: Cell<usize>,
    high: Cell<usize>,
    /// The free part of the last chunk.
    next: Cell<usize>,
    end: Cell<usize>,
    /// Set when `decide` starts: from then on, new memory is the system's.
    closed: Cell<bool>,
}

// SAFETY: a wasm32-wasip2 component runs on one thread; the cells are
// never touched concurrently. Natively the arena is only unit-tested, on
// one thread, and is not `Sync`.
#[cfg(target_arch = "wasm32")]
unsafe impl Sync for InputArena {}

impl InputArena {
    #[allow(clippy::new_without_default)] // Only ever a `static`.
    pub const fn new() -> Self {
        InputArena {
            chunks: [const { Cell::new((0, 0)) }; CHUNKS],
            taken: Cell::new(0),
            low: Cell::new(usize::MAX),
            high: Cell::new(0),
            next: Cell::new(0),
            end: Cell::new(0),
            closed: Cell::new(false),
        }
    }

    /// Ends the input phase. `policy!` calls it as `decide` starts.
    pub fn close(&self) {
        self.closed.set(true);
    }

    fn holds(&self, ptr: *mut u8) -> bool {
        let at = ptr as usize;
        if at < self.low.get() || at >= self.high.get() {
            return false;
        }
        self.chunks[..self.taken.get()]
            .iter()
            .any(|chunk| (chunk.get().0..chunk.get().1).contains(&at))
    }

    fn bump(&self, layout: Layout) -> *mut u8 {
        loop {
            let at = self.next.get().next_multiple_of(layout.align());
            if let Some(end) = at.checked_add(layout.size())
                && end <= self.end.get()
            {
                self.next.set(end);
                return at as *mut u8;
            }
            if !self.take_chunk(layout) {
                return std::ptr::null_mut();
            }
        }
    }

    /// Takes a chunk from the system allocator with room for `layout`;
    /// false when there is no memory or no place to record it.
    fn take_chunk(&self, layout: Layout) -> bool {
        let taken = self.taken.get();
        if taken == CHUNKS {
            return false;
        }
        let last = match taken {
            0 => FIRST_CHUNK / 2,
            n => {
                let (start, end) = self.chunks[n - 1].get();
                end - start
            }
        };
        let Some(size) = layout
            .size()
            .checked_add(layout.align())
            .map(|needed| needed.max(last.saturating_mul(2)))
        else {
            return false;
        };
        let Ok(chunk) = Layout::from_size_align(size, CHUNK_ALIGN) else {
            return false;
        };
        // SAFETY: `size` is not zero.
        let start = unsafe { System.alloc(chunk) } as usize;
        if start == 0 {
            return false;
        }
        let end = start + size;
        self.chunks[taken].set((start, end));
        self.taken.set(taken + 1);
        self.low.set(self.low.get().min(start));
        self.high.set(self.high.get().max(end));
        self.next.set(start);
        self.end.set(end);
        true
    }
}

// SAFETY: arena memory comes from chunks the arena alone owns and hands out
// each byte of once; everything else is the system allocator's, untouched.
unsafe impl GlobalAlloc for InputArena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.closed.get() {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc(layout) }
        } else {
            self.bump(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if self.closed.get() {
            // SAFETY: the caller's contract, passed on.
            return unsafe { System.alloc_zeroed(layout) };
        }
        let ptr = self.bump(layout);
        if !ptr.is_null() {
            // SAFETY: `bump` returned `layout.size()` bytes at `ptr`.
            unsafe { ptr.write_bytes(0, layout.size()) };
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.holds(ptr) {
            // SAFETY: not the arena's, so the system allocator's.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.holds(ptr) {
            // SAFETY: not the arena's, so the system allocator's.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // Arena memory is never given back: move to a new allocation.
        // SAFETY: the caller guarantees that `new_size`, rounded up to
        // `layout.align()`, does not overflow.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new_size` is not zero, by the caller's contract.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live, distinct and at least this long.
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn the_input_is_bumped_aligned_and_never_given_back() {
        let arena = InputArena::new();
        let mut last_end = 0;
        for (size, align) in [(3, 1), (16, 4), (1, 1), (40, 8), (7, 2)] {
            let ptr = unsafe { arena.alloc(layout(size, align)) };
            assert!(!ptr.is_null());
            assert_eq!(ptr as usize % align, 0);
            assert!(arena.holds(ptr));
            // Each allocation lies after the one before: nothing overlaps.
            assert!(ptr as usize >= last_end);
            last_end = ptr as usize + size;
            unsafe { ptr.write_bytes(0xAB, size) };
            unsafe { arena.dealloc(ptr, layout(size, align)) };
        }
        assert_eq!(arena.taken.get(), 1, "all of it fits the first chunk");
    }

    #[test]
    fn a_large_allocation_takes_a_chunk_of_its_own_size_and_chunks_double() {
        let arena = InputArena::new();
        unsafe { arena.alloc(layout(100, 1)) };
        let big = unsafe { arena.alloc(layout(1 << 20, 8)) };
        assert!(arena.holds(big));
        unsafe { arena.alloc(layout(FIRST_CHUNK * 4, 8)) };
        let sizes: Vec<usize> = arena.chunks[..arena.taken.get()]
            .iter()
            .map(|c| c.get().1 - c.get().0)
            .collect();
        assert_eq!(sizes[0], FIRST_CHUNK);
        assert!(sizes[1] >= 1 << 20);
        // The third did not need to be large, yet it doubles the second.
        assert_eq!(sizes[2], sizes[1] * 2);
    }

    #[test]
    fn after_close_memory_is_the_systems_and_arena_memory_moves_out_on_realloc() {
        let arena = InputArena::new();
        let input = unsafe { arena.alloc(layout(8, 1)) };
        unsafe { input.copy_from_nonoverlapping(b"snapshot".as_ptr(), 8) };
        arena.close();

        let own = unsafe { arena.alloc(layout(64, 8)) };
        assert!(!own.is_null() && !arena.holds(own));
        unsafe { arena.dealloc(own, layout(64, 8)) };

        let moved = unsafe { arena.realloc(input, layout(8, 1), 32) };
        assert!(!arena.holds(moved));
        assert_eq!(unsafe { std::slice::from_raw_parts(moved, 8) }, b"snapshot");
        // The old place is arena memory: its free is ignored.
        unsafe { arena.dealloc(input, layout(8, 1)) };
        unsafe { arena.dealloc(moved, layout(32, 1)) };
    }
}
