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
//! The workers' entries (offset 0) also keep the block's *tail*: the chunk
//! that runs from the last kept cut into the next block, with the digest of
//! the bytes past the block's end that decided it (up to and including the
//! byte after its cut, or up to its end when it is `max` long). A repeated
//! block followed by the same bytes that far takes the tail too, after
//! hashing only those bytes, instead of cutting and hashing the whole
//! chunk again; where the next block differs, or the stream ended inside
//! the tail when it was cut, the tail is cut afresh. In an application
//! run's repeated arenas that was a third of the cutting left.
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

/// The chunk from a block's last kept cut into the next block, valid again
/// where the bytes `block[own..decided]` past the block's end hash to
/// `beyond`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    pub span: Span,
    /// Block offset just past the last byte the cut examined.
    pub decided: usize,
    pub beyond: [u8; 32],
}

/// What is remembered of one block from one offset.
#[derive(Debug)]
pub struct Remembered {
    /// The chunks ending before the block's end.
    pub spans: Box<[Span]>,
    pub tail: Option<Tail>,
}

static MEMO: Mutex<Option<HashMap<Key, Arc<Remembered>>>> = Mutex::new(None);

fn key(cv: &ChainingValue, p: ChunkParams, from: usize) -> Key {
    (*cv, p.min, p.avg, p.max, from as u64)
}

/// What is remembered of the chunks cut from offset `from` of the block
/// whose chaining value is `cv`.
pub fn get(cv: &ChainingValue, p: ChunkParams, from: usize) -> Option<Arc<Remembered>> {
    let m = MEMO.lock().ok()?;
    m.as_ref()?.get(&key(cv, p, from)).cloned()
}

/// Remember `spans` (chunks cut from `from`, ending before the block's end)
/// and the `tail`, if any, for `cv`.
pub fn put(cv: &ChainingValue, p: ChunkParams, from: usize, spans: &[Span], tail: Option<Tail>) {
    if spans.is_empty() && tail.is_none() {
        return;
    }
    let entry = Remembered {
        spans: spans.into(),
        tail,
    };
    let Ok(mut m) = MEMO.lock() else { return };
    let map = m.get_or_insert_with(HashMap::new);
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
    map.insert(key(cv, p, from), Arc::new(entry));
}

/// Forget every block (tests comparing the memoized and the fresh path).
pub fn clear() {
    if let Ok(mut m) = MEMO.lock() {
        *m = None;
    }
}
