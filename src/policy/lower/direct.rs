//! Lowering straight into guest memory, for a module that keeps its whole
//! input ([`Keeps::Everything`]): strings and arrays go into the one block,
//! records to their place, with no host buffer between and no call into the
//! guest.
//!
//! [`Keeps::Everything`]: super::keeps::Keeps::Everything

use super::layout::{BLOCK_ALIGN, LABEL_SIZE};
use super::records::{Places, beyond_memory, pair};
use crate::contract::Label;

/// Lowering straight into guest memory, for a module that keeps everything.
/// Once its one block is allocated nothing more is asked of its allocator,
/// so a whole list can be written through one borrow of memory, with no
/// host buffer between: each string and array is copied once, to where it
/// stays.
pub(super) struct Direct<'m> {
    pub(super) memory: &'m mut [u8],
    /// The next free offset of the block, and its end.
    pub(super) next: usize,
    pub(super) end: usize,
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
    pub(super) fn write(&mut self, at: usize, bytes: &[u8]) -> wasmtime::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::copy_short;

    #[test]
    fn short_copies_copy_every_length() {
        let from: Vec<u8> = (1..=40).collect();
        for n in 0..=40 {
            let mut to = vec![0; n];
            copy_short(&mut to, &from[..n]);
            assert_eq!(to, from[..n], "{n} bytes");
        }
    }
}
