//! Block buffers: reused across blocks and parts, returned to a free list
//! when the last reference to one is dropped.

use std::ops::Deref;
use std::sync::Mutex;

/// Block buffers kept for reuse: a fresh buffer costs a page fault and a
/// page clear per 4 KiB on first use, which is more than reading into it
/// (an import scans many parts one after the other). The most recently
/// freed is taken first: it is the likeliest to be still in a cache.
static FREE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// At most this many buffers are kept (about 16 MiB with 1 MiB blocks).
const FREE_MAX: usize = 12;

/// A block buffer; goes back to the free list when the last reference to
/// it is dropped.
pub struct Block {
    pub(super) data: Vec<u8>,
}

impl Block {
    pub(super) fn new(cap: usize) -> Block {
        let found = FREE.lock().ok().and_then(|mut f| {
            f.iter()
                .rposition(|b| b.len() == cap)
                .map(|i| f.swap_remove(i))
        });
        Block {
            data: found.unwrap_or_else(|| vec![0u8; cap]),
        }
    }
}

impl Deref for Block {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Ok(mut f) = FREE.lock() {
            if f.len() < FREE_MAX {
                f.push(std::mem::take(&mut self.data));
            }
        }
    }
}
