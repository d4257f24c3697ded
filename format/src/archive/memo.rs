//! The block memo: chunks of blocks scanned before in this process, keyed
//! by the block's BLAKE3 subtree chaining value and the offset in the block
//! they were cut from: 0 for the worker's candidates, the point where the
//! true chain entered the block for the calling thread's resynchronization
//! (which cuts and hashes on one thread, so a repeated block repeating its
//! entry point skips that serial work too).
//!
//! Why: the recordings of one application run hold the same device arena
//! again and again (before and after each launch, launch after launch), with
//! most 1 MiB blocks identical at the same offset. A block's chaining value
//! (computed anyway: it is the block's share of the part hash) covers its
//! bytes and its offset in the stream, so a block seen before needs no
//! FastCDC pass and no chunk hashing; only the chunk that runs into the next
//! block is cut and hashed again. That halves the CPU of a repeated block.
//!
//! What is kept is only what depends on the block's own bytes: the
//! chunks cut from the given offset that *end before* the block's end. A
//! FastCDC cut at `e` is decided by the bytes up to and including byte `e`
//! (the gear hash examines the byte after the cut) and the distance from
//! the chunk's start, and the stream's length only matters for a chunk
//! reaching the end of the data given, which lies at or beyond the block's
//! end. So those chunks are the same whatever follows the block (tested in
//! `scan`). Keys include the chunk parameters.
//!
//! Bounded: at most [`MAX_ENTRIES`] entries (~1 KiB each), dropped all at
//! once when full (a run longer than that scans its blocks afresh).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use blake3::hazmat::ChainingValue;

use super::scan::Span;
use crate::chunk::ChunkParams;

/// Entries remembered: candidates and an entry point for each of 8 GiB of
/// distinct 1 MiB blocks, a few MiB of memory.
pub const MAX_ENTRIES: usize = 16384;

type Key = (ChainingValue, u32, u32, u32, u64);

static MEMO: Mutex<Option<HashMap<Key, Arc<[Span]>>>> = Mutex::new(None);

fn key(cv: &ChainingValue, p: ChunkParams, from: usize) -> Key {
    (*cv, p.min, p.avg, p.max, from as u64)
}

/// The memoized chunks cut from offset `from` of the block whose chaining
/// value is `cv`.
pub fn get(cv: &ChainingValue, p: ChunkParams, from: usize) -> Option<Arc<[Span]>> {
    let m = MEMO.lock().ok()?;
    m.as_ref()?.get(&key(cv, p, from)).cloned()
}

/// Remember `spans` (chunks cut from `from`, ending before the block's end)
/// for `cv`.
pub fn put(cv: &ChainingValue, p: ChunkParams, from: usize, spans: &[Span]) {
    if spans.is_empty() {
        return;
    }
    let Ok(mut m) = MEMO.lock() else { return };
    let map = m.get_or_insert_with(HashMap::new);
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
    map.insert(key(cv, p, from), spans.into());
}

/// Forget every block (tests comparing the memoized and the fresh path).
pub fn clear() {
    if let Ok(mut m) = MEMO.lock() {
        *m = None;
    }
}
