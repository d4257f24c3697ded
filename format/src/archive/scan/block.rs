//! Block buffers: page-aligned, reused across blocks and parts, returned
//! to a free list when the last reference to one is dropped.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

/// Block buffers kept for reuse: a fresh buffer costs a page fault and a
/// page clear per 4 KiB on first use, which is more than reading into it
/// (an import scans many parts one after the other). The most recently
/// freed is taken first: it is the likeliest to be still in a cache.
static FREE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// At most this many buffers are kept (about 16 MiB with 1 MiB blocks).
const FREE_MAX: usize = 12;

/// Where a block's bytes start in its allocation: on a page boundary, as
/// the file offsets it is read from (block sizes are multiples of a page).
/// The kernel copies a read with `rep movsb`, which on AMD Zen runs at a
/// fifth of its speed when destination and source differ by 8 or 16 bytes
/// modulo a cache line, as an allocator's 16-byte alignment makes them
/// (2.6 against 12.2 GB/s from the page cache, BENCHMARKS.md "Session 18").
const ALIGN: usize = 4096;

/// A block buffer of `cap` bytes (its slice); goes back to the free list
/// when the last reference to it is dropped.
pub struct Block {
    buf: Vec<u8>,
    start: usize,
    cap: usize,
}

impl Block {
    pub(super) fn new(cap: usize) -> Block {
        let found = FREE.lock().ok().and_then(|mut f| {
            f.iter()
                .rposition(|b| b.len() == cap + ALIGN)
                .map(|i| f.swap_remove(i))
        });
        let buf = found.unwrap_or_else(|| vec![0u8; cap + ALIGN]);
        // Never more than ALIGN - 1 for bytes; were it impossible, an
        // unaligned block is only slower.
        let start = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
        Block { buf, start, cap }
    }
}

impl Deref for Block {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.cap]
    }
}

impl DerefMut for Block {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.cap]
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Ok(mut f) = FREE.lock() {
            if f.len() < FREE_MAX {
                f.push(std::mem::take(&mut self.buf));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_start_on_a_page_whether_fresh_or_reused() {
        // Odd sizes, so the allocator's own alignment is all a fresh
        // buffer would have; dropping returns each to the free list, so
        // the second round takes reused buffers.
        for _ in 0..2 {
            let blocks: Vec<Block> = [4096 + 7, 65_536 + 1000, (1 << 20) + 12_345]
                .into_iter()
                .map(Block::new)
                .collect();
            for b in &blocks {
                assert_eq!(b.as_ptr() as usize % ALIGN, 0, "a block of {}", b.len());
                assert_eq!(b.len(), b.cap);
            }
        }
    }
}
