//! Parallel content-defined chunking and hashing of one stream, in one read.
//!
//! The stream is read in blocks (a power of two, 1 MiB by default): by the
//! workers themselves, by offset, when it is a plain file
//! ([`part_scanner`]), else by the calling thread. Each block, extended by
//! as much of the next one as the chunk crossing its end needs (at most
//! `max` bytes; `read::Fill`), goes to a worker that (a) cuts it with FastCDC
//! starting at the block's first byte,
//! (b) blake3-hashes every candidate chunk and (c) computes the block's
//! BLAKE3 subtree chaining value (blocks are aligned power-of-two subtrees
//! of the stream's BLAKE3 tree, so the stream's hash is their merge: the
//! whole-stream hash costs no extra pass and no single thread). The subtree
//! is hashed first: a block whose chaining value was seen before in this
//! process takes (a) and (b) from the block [`memo`] for all but its last
//! chunk.
//!
//! The calling thread takes the results back in order and resynchronizes:
//! the true chunk chain (the one [`crate::chunk::Chunker`] produces) enters
//! a block somewhere in its first `max` bytes; from there it cuts chunk by
//! chunk itself until it reaches one of the worker's candidate cut points,
//! and adopts the worker's chunks from then on (a FastCDC cut depends only
//! on the bytes from the chunk's start, so two chains that meet at one cut
//! point stay together). In practice the chains meet within a chunk or two,
//! so the calling thread does a few percent of the cutting and hashing and
//! the workers the rest. The cut points are exactly those of
//! [`crate::chunk::Chunker`] (tested).

mod block;
mod merge;
mod read;
#[cfg(test)]
mod tests;
mod worker;

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

use blake3::hazmat::ChainingValue;

use super::memo;
use super::pool::{self, Pool};
use crate::chunk::{ChunkHash, ChunkParams};
use crate::model::{PartRole, PartSource};
use crate::stages::{self, Stage};

pub use block::Block;
use merge::merge_root;
pub use read::ReadAt;
use read::{fill, read_block, Fill};
use worker::{scan_block, BlockScan};

/// Default block length: 1 MiB. Small enough that a block stays in a
/// core's cache while it is cut, hashed (chunks and subtree) and compressed,
/// which on the 2-core VM measured faster than 2, 4 or 8 MiB blocks although
/// each block also reads up to `max` (256 KiB) bytes of the next one.
pub const DEFAULT_BLOCK: usize = 1 << 20;

/// One chunk of a [`Scanned`] block: `block[start..end]`, with its blake3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub hash: ChunkHash,
}

impl Span {
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// The chunks of the stream that start in one block, in stream order. Their
/// bytes are in `block` (a chunk may run into the block's extension).
pub struct Scanned {
    pub block: Arc<Block>,
    /// Stream offset of `block[0]`.
    pub offset: u64,
    pub chunks: Vec<Span>,
}

impl Scanned {
    pub fn data(&self, s: &Span) -> &[u8] {
        &self.block[s.start..s.end]
    }
}

struct InFlight {
    rx: Receiver<io::Result<BlockScan>>,
    offset: u64,
    /// Bytes that belong to this block (chunks starting here start below).
    own: usize,
    /// The block is the whole stream (its scan returned the root hash).
    only: bool,
}

enum Src<R> {
    /// Read in order by the calling thread.
    Stream {
        r: R,
        /// Read-ahead block and its valid length.
        ahead: Option<(Block, usize)>,
    },
    /// Read by the workers; `len` bytes expected.
    At { file: Arc<dyn ReadAt>, len: u64 },
}

/// Streams chunks of a reader through a [`Pool`]; see the module doc.
pub struct Scanner<R> {
    src: Src<R>,
    p: ChunkParams,
    block_len: usize,
    window: usize,
    /// Stream offset of the next block to dispatch.
    next_offset: u64,
    dispatched_all: bool,
    inflight: VecDeque<InFlight>,
    /// Stream offset where the next true chunk starts.
    chain: u64,
    cvs: Vec<ChainingValue>,
    /// Root hash when the stream was a single block.
    root: Option<ChainingValue>,
}

impl<R: Read> Scanner<R> {
    /// Scan a stream read in order by the calling thread. `params` must be
    /// validated; `block_len` is rounded up to a power of two of at least
    /// 1 KiB and `params.max`. `window`: blocks scanned ahead.
    pub fn new(src: R, params: ChunkParams, block_len: usize, window: usize) -> Scanner<R> {
        Self::with_src(
            Src::Stream {
                r: src,
                ahead: None,
            },
            params,
            block_len,
            window,
        )
    }

    /// Scan `len` bytes the workers read from `file` themselves (see
    /// [`Scanner::new`]). A file that turns out shorter or longer than `len`
    /// is an error.
    pub fn at(
        file: Arc<dyn ReadAt>,
        len: u64,
        params: ChunkParams,
        block_len: usize,
        window: usize,
    ) -> Scanner<R> {
        Self::with_src(Src::At { file, len }, params, block_len, window)
    }

    fn with_src(src: Src<R>, p: ChunkParams, block_len: usize, window: usize) -> Scanner<R> {
        let block_len = block_len
            .max(p.max as usize)
            .max(blake3::CHUNK_LEN)
            .next_power_of_two();
        Scanner {
            src,
            p,
            block_len,
            window: window.max(1),
            next_offset: 0,
            dispatched_all: false,
            inflight: VecDeque::new(),
            chain: 0,
            cvs: Vec::new(),
            root: None,
        }
    }

    /// Stream length and blake3 once [`Scanner::next`] returned `None`.
    pub fn finish(&self) -> (u64, ChunkHash) {
        let len = self.next_offset;
        if let Some(r) = self.root {
            return (len, r);
        }
        if self.cvs.is_empty() {
            return (0, *blake3::hash(&[]).as_bytes());
        }
        (len, merge_root(&self.cvs, self.block_len as u64, len))
    }

    /// The next block's chunks in stream order; `None` at the end.
    pub fn next(&mut self, pool: &Pool) -> io::Result<Option<Scanned>> {
        loop {
            while self.inflight.len() < self.window && !self.dispatched_all {
                self.dispatch(pool)?;
            }
            let Some(f) = self.inflight.pop_front() else {
                return Ok(None);
            };
            let mut scan = pool::wait(&f.rx)??;
            let chunks = self.resync(&f, &mut scan)?;
            if !chunks.is_empty() {
                return Ok(Some(Scanned {
                    block: Arc::new(scan.block),
                    offset: f.offset,
                    chunks,
                }));
            }
        }
    }

    fn dispatch(&mut self, pool: &Pool) -> io::Result<()> {
        let block_len = self.block_len;
        let max = self.p.max as usize;
        let cap = block_len + max;
        let p = self.p;
        let offset = self.next_offset;
        let (rx, own, last) = match &mut self.src {
            Src::Stream { r, ahead } => {
                let (mut cur, n) = match ahead.take() {
                    Some(a) => a,
                    None => {
                        let mut b = Block::new(cap);
                        let n = fill(r, &mut b[..block_len])?;
                        (b, n)
                    }
                };
                if n == 0 {
                    self.dispatched_all = true;
                    return Ok(());
                }
                let (ext, last) = if n < block_len {
                    (n, true)
                } else {
                    let mut next = Block::new(cap);
                    let n2 = fill(r, &mut next[..block_len])?;
                    let copied = n2.min(max);
                    cur[n..n + copied].copy_from_slice(&next[..copied]);
                    if n2 > 0 {
                        *ahead = Some((next, n2));
                    }
                    (n + copied, n2 == 0)
                };
                let only = offset == 0 && last;
                let fill = Fill {
                    ext,
                    avail: ext,
                    more: None,
                    offset,
                };
                let rx = pool.submit(move |_| scan_block(cur, n, fill, only, p))?;
                (rx, n, last)
            }
            Src::At { file, len } => {
                let len = *len;
                if offset >= len {
                    self.dispatched_all = true;
                    return Ok(());
                }
                let own = (len - offset).min(block_len as u64) as usize;
                let ext = (len - offset).min(cap as u64) as usize;
                let last = offset + own as u64 == len;
                let only = offset == 0 && last;
                let file = Arc::clone(file);
                let rx = pool.submit(move |_| {
                    let mut b = Block::new(cap);
                    let t = Instant::now();
                    read_block(&*file, &mut b[..own], offset, last)?;
                    stages::add(Stage::Read, t, own as u64);
                    let fill = Fill {
                        ext: own,
                        avail: ext,
                        more: Some(&*file),
                        offset,
                    };
                    scan_block(b, own, fill, only, p)
                })?;
                (rx, own, last)
            }
        };
        self.next_offset += own as u64;
        self.dispatched_all = last;
        self.inflight.push_back(InFlight {
            rx,
            offset,
            own,
            only: offset == 0 && last,
        });
        Ok(())
    }

    /// The true chunks starting in this block (see the module doc).
    fn resync(&mut self, f: &InFlight, scan: &mut BlockScan) -> io::Result<Vec<Span>> {
        let started = Instant::now();
        if f.only {
            self.root = Some(scan.cv);
        } else {
            self.cvs.push(scan.cv);
        }
        let mut fill = Fill {
            ext: scan.ext,
            avail: scan.avail,
            more: match &self.src {
                Src::At { file, .. } => Some(&**file),
                Src::Stream { .. } => None,
            },
            offset: f.offset,
        };
        let entry = (self.chain - f.offset) as usize;
        let mut t = entry;
        let mut out = Vec::new();
        // The chain entering a repeated block where it entered before takes
        // the chunks it cut then (`memo`); at 0 it meets the candidates.
        let remembered = (entry > 0 && entry < f.own)
            .then(|| memo::get(&scan.cv, self.p, entry))
            .flatten();
        if let Some(r) = &remembered {
            out.extend_from_slice(&r.spans);
            t = out.last().map_or(t, |s| s.end);
        }
        // Chunks cut here (not remembered): `out[..cut]` until the chain
        // meets the candidates.
        let mut cut = 0;
        let mut j = 0;
        let cands = &scan.cands;
        while t < f.own {
            while j < cands.len() && cands[j].start < t {
                j += 1;
            }
            if j < cands.len() && cands[j].start == t {
                t = cands[cands.len() - 1].end;
                out.extend_from_slice(&cands[j..]);
                break;
            }
            cut += 1;
            let len = fill.cut(&mut scan.block, t, self.p)?;
            out.push(Span {
                start: t,
                end: t + len,
                hash: crate::chunk::hash(&scan.block[t..t + len]),
            });
            t += len;
        }
        scan.ext = fill.ext;
        if remembered.is_none() && entry > 0 {
            let mine = &out[..cut];
            let keep = mine.iter().take_while(|c| c.end < f.own).count();
            memo::put(&scan.cv, self.p, entry, &mine[..keep], None);
        }
        self.chain = f.offset + t as u64;
        stages::add(Stage::Resync, started, 0);
        Ok(out)
    }
}

/// A scanner over one part of `src`: read by the workers, by offset, when
/// the source names a plain file for it ([`PartSource::part_file`]; its
/// length is taken when it is opened), else streamed through
/// [`PartSource::open_part`] by the calling thread.
pub fn part_scanner<'a>(
    src: &'a mut dyn PartSource,
    role: PartRole,
    params: ChunkParams,
    window: usize,
) -> io::Result<Scanner<Box<dyn Read + 'a>>> {
    if let Some(path) = src.part_file(role) {
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let file = std::fs::File::open(path).map_err(named)?;
        let len = file.metadata().map_err(named)?.len();
        let file: Arc<dyn ReadAt> = Arc::new(file);
        return Ok(Scanner::at(file, len, params, DEFAULT_BLOCK, 2 * window));
    }
    let r = src.open_part(role)?;
    Ok(Scanner::new(r, params, DEFAULT_BLOCK, window))
}
