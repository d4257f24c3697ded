//! The worker's side of a block: its BLAKE3 subtree, then its candidate
//! chunks cut from its first byte (from the block memo when the block was
//! seen before), hashed.

use std::io;
use std::time::Instant;

use blake3::hazmat::{ChainingValue, HasherExt};

use super::block::Block;
use super::read::Fill;
use super::Span;
use crate::archive::memo;
use crate::chunk::ChunkParams;
use crate::cut::Cutter;
use crate::stages::{self, Stage};

/// What a worker returns for one block.
pub(super) struct BlockScan {
    pub(super) block: Block,
    /// Valid bytes in `block` (own + as much of the next block's head as
    /// the cuts needed so far).
    pub(super) ext: usize,
    /// Bytes `block` can hold of the stream ([`Fill::avail`]).
    pub(super) avail: usize,
    /// Candidate chunks cut from the block's first byte.
    pub(super) cands: Vec<Span>,
    /// Subtree chaining value, or the root hash when the block is the whole
    /// stream.
    pub(super) cv: ChainingValue,
}

/// Length of the first FastCDC chunk of `data` (exact when `data` holds at
/// least `max` bytes or ends where the stream ends; [`Cutter::first`]).
pub(super) fn first_cut(data: &[u8], p: ChunkParams) -> usize {
    // One cutter per thread and parameters: making one copies two 2 KiB
    // gear tables, which is a few percent of cutting a small chunk.
    thread_local! {
        static CUTTER: std::cell::RefCell<Option<(ChunkParams, Cutter)>> =
            const { std::cell::RefCell::new(None) };
    }
    CUTTER.with(|c| {
        let mut c = c.borrow_mut();
        match &*c {
            Some((q, cutter)) if *q == p => cutter.first(data),
            _ => {
                let cutter = Cutter::new(p);
                let n = cutter.first(data);
                *c = Some((p, cutter));
                n
            }
        }
    })
}

/// The tail chunk `t` (the first ending at or past `own`) as the memo keeps
/// it, or `None` when the stream's end decided it: a cut at `e` examined
/// the bytes through `e` (so `e` lies before the bytes read), a chunk of
/// `max` bytes those before its end; one that ends where the stream does
/// is shorter only because the stream ended.
fn remember_tail(
    block: &Block,
    own: usize,
    fill: &Fill<'_>,
    t: Span,
    p: ChunkParams,
) -> Option<memo::Tail> {
    let decided = if t.len() == p.max as usize {
        t.end
    } else if t.end < fill.ext {
        t.end + 1
    } else {
        return None;
    };
    let t0 = Instant::now();
    let beyond = *blake3::hash(&block[own..decided]).as_bytes();
    stages::add(Stage::ChunkHash, t0, (decided - own) as u64);
    Some(memo::Tail {
        span: t,
        decided,
        beyond,
    })
}

/// Whether a remembered tail is this block's too: the bytes past its end
/// that decided the cut are there and the same.
fn tail_holds(
    block: &mut Block,
    own: usize,
    fill: &mut Fill<'_>,
    tail: &memo::Tail,
) -> io::Result<bool> {
    if !fill.have(block, tail.decided)? {
        return Ok(false);
    }
    let t = Instant::now();
    let same = *blake3::hash(&block[own..tail.decided]).as_bytes() == tail.beyond;
    stages::add(Stage::ChunkHash, t, (tail.decided - own) as u64);
    Ok(same)
}

/// Worker side: candidate chunks from the block's first byte, their hashes,
/// and the block's chaining value (or root hash when `only`). The chaining
/// value comes first: a block seen before (same bytes at the same offset,
/// [`memo`]) takes its candidates from the memo and cuts and hashes only
/// from the last remembered cut on.
pub(super) fn scan_block(
    mut block: Block,
    own: usize,
    mut fill: Fill<'_>,
    only: bool,
    p: ChunkParams,
) -> io::Result<BlockScan> {
    let t = Instant::now();
    let mut block_hasher = blake3::Hasher::new();
    if !only {
        block_hasher.set_input_offset(fill.offset);
    }
    block_hasher.update(&block[..own]);
    let cv = if only {
        *block_hasher.finalize().as_bytes()
    } else {
        block_hasher.finalize_non_root()
    };
    stages::add(Stage::BlockHash, t, own as u64);
    let mut cands = Vec::with_capacity(own / p.avg.max(1) as usize + 4);
    let remembered = memo::get(&cv, p, 0);
    stages::block(remembered.is_some());
    if let Some(r) = &remembered {
        cands.extend_from_slice(&r.spans);
        if let Some(tail) = r.tail {
            if tail_holds(&mut block, own, &mut fill, &tail)? {
                cands.push(tail.span);
                stages::tail();
            }
        }
    }
    let from = cands.last().map_or(0, |c| c.end);
    let mut at = from;
    while at < own {
        let len = fill.cut(&mut block, at, p)?;
        let t = Instant::now();
        cands.push(Span {
            start: at,
            end: at + len,
            hash: crate::chunk::hash(&block[at..at + len]),
        });
        stages::add(Stage::ChunkHash, t, len as u64);
        at += len;
    }
    if remembered.is_none() {
        // Only candidates decided by the block's own bytes (module doc of
        // `memo`): those ending before its end; the tail with what decided
        // it beyond.
        let keep = cands.iter().take_while(|c| c.end < own).count();
        let tail = cands
            .get(keep)
            .and_then(|t| remember_tail(&block, own, &fill, *t, p));
        memo::put(&cv, p, 0, &cands[..keep], tail);
    }
    Ok(BlockScan {
        block,
        ext: fill.ext,
        avail: fill.avail,
        cands,
        cv,
    })
}
