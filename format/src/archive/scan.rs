//! Parallel content-defined chunking and hashing of one stream, in one read.
//!
//! The stream is read in blocks (a power of two, 1 MiB by default): by the
//! workers themselves, by offset, when it is a plain file
//! ([`part_scanner`]), else by the calling thread. Each block, extended by
//! as much of the next one as the chunk crossing its end needs (at most
//! `max` bytes; [`Fill`]), goes to a worker that (a) cuts it with FastCDC
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

use std::collections::VecDeque;
use std::io::{self, Read};
use std::ops::Deref;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};

use super::memo;
use super::pool::{self, Pool};
use crate::chunk::{ChunkHash, ChunkParams};
use crate::cut::Cutter;
use crate::model::{PartRole, PartSource};
use crate::stages::{self, Stage};

/// Default block length: 1 MiB. Small enough that a block stays in a
/// core's cache while it is cut, hashed (chunks and subtree) and compressed,
/// which on the 2-core VM measured faster than 2, 4 or 8 MiB blocks although
/// each block also reads the first `max` (256 KiB) bytes of the next one.
pub const DEFAULT_BLOCK: usize = 1 << 20;

/// Bytes asked of the source per read.
const READ_STEP: usize = 1 << 20;

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
    data: Vec<u8>,
}

impl Block {
    fn new(cap: usize) -> Block {
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

/// A source the workers can read at any offset themselves (a plain file),
/// so reading is spread over the pool instead of the calling thread.
pub trait ReadAt: Send + Sync {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }
}

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

/// What a worker returns for one block.
struct BlockScan {
    block: Block,
    /// Valid bytes in `block` (own + as much of the next block's head as
    /// the cuts needed so far).
    ext: usize,
    /// Bytes `block` can hold of the stream ([`Fill::avail`]).
    avail: usize,
    /// Candidate chunks cut from the block's first byte.
    cands: Vec<Span>,
    /// Subtree chaining value, or the root hash when the block is the whole
    /// stream.
    cv: ChainingValue,
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
                        let n = fill(r, &mut b.data[..block_len])?;
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
                    let n2 = fill(r, &mut next.data[..block_len])?;
                    let copied = n2.min(max);
                    cur.data[n..n + copied].copy_from_slice(&next.data[..copied]);
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
                    read_block(&*file, &mut b.data[..own], offset, last)?;
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
        if let Some(spans) = &remembered {
            out.extend_from_slice(spans);
            t = out.last().map_or(t, |s| s.end);
        }
        let mut cut_here = out.len()..out.len();
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
            cut_here.end += 1;
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
            let mine = &out[cut_here];
            let keep = mine.iter().take_while(|c| c.end < f.own).count();
            memo::put(&scan.cv, self.p, entry, &mine[..keep]);
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

/// Fill `buf` from `r`; returns the bytes read (short only at the end of
/// the stream).
fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let t = Instant::now();
    let n = fill_untimed(r, buf)?;
    stages::add(Stage::Read, t, n as u64);
    Ok(n)
}

fn fill_untimed(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        // At most 1 MiB per read: the kernel's copy is cheaper into a
        // destination that fits the cache.
        let end = (n + READ_STEP).min(buf.len());
        match r.read(&mut buf[n..end]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Read exactly `buf.len()` bytes at `offset`; at the end of the expected
/// length also check that nothing follows.
fn read_block(file: &dyn ReadAt, buf: &mut [u8], offset: u64, last: bool) -> io::Result<()> {
    let mut n = 0;
    while n < buf.len() {
        let end = (n + READ_STEP).min(buf.len());
        match file.read_at(&mut buf[n..end], offset + n as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the file ends at byte {}, before the length it had when it was loaded: it changed while being read",
                        offset + n as u64
                    ),
                ))
            }
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if last {
        let end = offset + buf.len() as u64;
        let mut probe = [0u8; 1];
        if file.read_at(&mut probe, end)? != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the file is longer than the {end} bytes it had when it was loaded: it changed while being read"
                ),
            ));
        }
    }
    Ok(())
}

/// Length of the first FastCDC chunk of `data` (exact when `data` holds at
/// least `max` bytes or ends where the stream ends; [`Cutter::first`]).
fn first_cut(data: &[u8], p: ChunkParams) -> usize {
    Cutter::new(p).first(data)
}

/// Bytes asked of the file per extension read: most chunks that cross a
/// block's end end within one average chunk of it.
const EXT_STEP: usize = 64 << 10;

/// How much of a block buffer holds stream bytes, and where more of them
/// come from. A block owns its first `own` bytes; a chunk starting there
/// may run up to `max` bytes into the next block, but most end within a
/// few KiB of the boundary, so workers reading by offset read the next
/// block's head only as far as a cut needs it (`more`) instead of a whole
/// `max` bytes that the next block's worker reads again anyway.
struct Fill<'a> {
    /// Valid bytes in the buffer.
    ext: usize,
    /// Bytes the buffer can hold of the stream from its offset (own + up to
    /// `max`, less at the stream's end).
    avail: usize,
    /// Where to read more (`None`: `ext == avail` already).
    more: Option<&'a dyn ReadAt>,
    /// Stream offset of the buffer's first byte.
    offset: u64,
}

impl Fill<'_> {
    /// Length of the FastCDC chunk starting at `at`, reading more of the
    /// extension until the cut is decided: a cut found before the end of
    /// the bytes given is exact (a cut at `e` depends on the bytes up to
    /// and including `e`; `memo`'s module doc), and so is one given at
    /// least `max` bytes or all there are.
    fn cut(&mut self, block: &mut Block, at: usize, p: ChunkParams) -> io::Result<usize> {
        let max = p.max as usize;
        // A chunk that may cross the end is given twice the average length
        // from its start before its first pass: almost all are decided by
        // it, and a pass that runs out of bytes is cut again from `at`.
        let likely = (at + 2 * p.avg as usize).min(at + max).min(self.avail);
        if self.ext < likely {
            if let Some(file) = self.more {
                self.read_to(block, file, (self.ext + EXT_STEP).max(likely))?;
            }
        }
        loop {
            let t = Instant::now();
            let len = first_cut(&block.data[at..self.ext], p);
            stages::add(Stage::Cut, t, len as u64);
            if at + len < self.ext || self.ext - at >= max || self.ext == self.avail {
                return Ok(len);
            }
            let Some(file) = self.more else {
                return Ok(len);
            };
            self.read_to(block, file, (self.ext + EXT_STEP).max(at + len + 1))?;
        }
    }

    /// Read the extension up to `end` (at most `avail`).
    fn read_to(&mut self, block: &mut Block, file: &dyn ReadAt, end: usize) -> io::Result<()> {
        let end = end.min(self.avail);
        let t = Instant::now();
        read_block(
            file,
            &mut block.data[self.ext..end],
            self.offset + self.ext as u64,
            false,
        )?;
        stages::add(Stage::Read, t, (end - self.ext) as u64);
        self.ext = end;
        Ok(())
    }
}

/// Worker side: candidate chunks from the block's first byte, their hashes,
/// and the block's chaining value (or root hash when `only`). The chaining
/// value comes first: a block seen before (same bytes at the same offset,
/// [`memo`]) takes its candidates from the memo and cuts and hashes only
/// from the last remembered cut on.
fn scan_block(
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
    if let Some(spans) = &remembered {
        cands.extend_from_slice(spans);
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
        // `memo`): those ending before its end.
        let keep = cands.iter().take_while(|c| c.end < own).count();
        memo::put(&cv, p, 0, &cands[..keep]);
    }
    Ok(BlockScan {
        block,
        ext: fill.ext,
        avail: fill.avail,
        cands,
        cv,
    })
}

/// Root hash of a stream of `len` bytes from the chaining values of its
/// blocks (`block` bytes each, the last possibly shorter; at least two).
fn merge_root(cvs: &[ChainingValue], block: u64, len: u64) -> ChunkHash {
    let (l, r) = split(cvs, block, len);
    merge_subtrees_root(&l, &r, Mode::Hash).into()
}

fn split(cvs: &[ChainingValue], block: u64, len: u64) -> (ChainingValue, ChainingValue) {
    let left_len = left_subtree_len(len);
    let nl = (left_len / block) as usize;
    (
        subtree(&cvs[..nl], block, left_len),
        subtree(&cvs[nl..], block, len - left_len),
    )
}

fn subtree(cvs: &[ChainingValue], block: u64, len: u64) -> ChainingValue {
    if cvs.len() == 1 {
        return cvs[0];
    }
    let (l, r) = split(cvs, block, len);
    merge_subtrees_non_root(&l, &r, Mode::Hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::pool::with_pool;
    use crate::chunk::Chunker;

    use rrstore_tests::noise;

    /// Reader returning at most `step` bytes per call.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// Bytes the workers read by offset, at most `1` per call.
    struct Mem(Vec<u8>, usize);
    impl ReadAt for Mem {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            let start = (offset as usize).min(self.0.len());
            let n = buf.len().min(self.1).min(self.0.len() - start);
            buf[..n].copy_from_slice(&self.0[start..start + n]);
            Ok(n)
        }
    }

    fn scan_all(
        d: &[u8],
        p: ChunkParams,
        block: usize,
        step: usize,
    ) -> (Vec<Vec<u8>>, u64, ChunkHash) {
        with_pool(2, 3, 4, |pool| {
            let mut s = if step == 7 {
                let file: Arc<dyn ReadAt> = Arc::new(Mem(d.to_vec(), 100_000));
                Scanner::at(file, d.len() as u64, p, block, 5)
            } else {
                Scanner::new(Trickle(d, step), p, block, 3)
            };
            let mut got = Vec::new();
            while let Some(b) = s.next(pool).unwrap() {
                for c in &b.chunks {
                    assert_eq!(c.hash, crate::chunk::hash(b.data(c)));
                    got.push(b.data(c).to_vec());
                }
            }
            let (len, h) = s.finish();
            (got, len, h)
        })
    }

    /// Bytes the workers read by offset, counted.
    struct Counted(Vec<u8>, std::sync::atomic::AtomicU64);
    impl ReadAt for Counted {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            let start = (offset as usize).min(self.0.len());
            let n = buf.len().min(self.0.len() - start);
            buf[..n].copy_from_slice(&self.0[start..start + n]);
            self.1
                .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            Ok(n)
        }
    }

    /// The head of the next block is read only as far as the cut crossing
    /// into it needs, not a whole `max` bytes per block: the file is read
    /// about once, zero runs (every chunk `max` long) included.
    #[test]
    fn a_file_is_read_about_once() {
        let mut d = noise(16 << 20, 5);
        d[(5 << 20) + 4321..(9 << 20) + 77].fill(0);
        let file = Arc::new(Counted(d.clone(), 0.into()));
        let src: Arc<dyn ReadAt> = file.clone();
        let p = ChunkParams::default();
        let got = with_pool(2, 3, 4, |pool| {
            let mut s: Scanner<io::Empty> = Scanner::at(src, d.len() as u64, p, 1 << 20, 5);
            let mut got = Vec::new();
            while let Some(b) = s.next(pool).unwrap() {
                got.extend(b.chunks.iter().map(|c| b.data(c).to_vec()));
            }
            got
        });
        let want: Vec<Vec<u8>> = Chunker::new(&d[..], p)
            .unwrap()
            .map(|c| c.unwrap().data)
            .collect();
        assert!(got == want);
        let read = file.1.load(std::sync::atomic::Ordering::Relaxed) as f64;
        assert!(
            read < 1.15 * d.len() as f64,
            "{read} bytes read of {}",
            d.len()
        );
    }

    #[test]
    fn a_file_that_is_not_the_expected_length_is_an_error() {
        let d = noise(3 << 20, 4);
        for (len, claimed) in [(d.len(), d.len() + 1), (d.len(), d.len() - 1)] {
            let file: Arc<dyn ReadAt> = Arc::new(Mem(d[..len].to_vec(), usize::MAX));
            let err = with_pool(2, 3, 4, |pool| {
                let mut s: Scanner<io::Empty> =
                    Scanner::at(file, claimed as u64, ChunkParams::default(), 1 << 20, 3);
                loop {
                    match s.next(pool) {
                        Ok(Some(_)) => {}
                        Ok(None) => return None,
                        Err(e) => return Some(e),
                    }
                }
            });
            assert!(err.is_some_and(|e| e.to_string().contains("changed")));
        }
    }

    /// A block scanned before (same bytes, same offset) takes its
    /// candidates from the memo; the chunks are still exactly the
    /// sequential chunker's whatever follows the block, however long the
    /// stream is and wherever it ends.
    #[test]
    fn memoized_blocks_give_the_same_chunks_whatever_follows() {
        let p = ChunkParams::default();
        let block = 1 << 20;
        let a = noise(4 << 20, 21);
        let mut zeros_then = vec![0u8; 3 << 20];
        zeros_then.extend_from_slice(&noise(1 << 20, 22));
        let mut variants: Vec<Vec<u8>> = Vec::new();
        for (i, cut) in [
            2 * block,
            2 * block + 1,
            2 * block + 100,
            2 * block + 20_000,
            3 * block,
        ]
        .into_iter()
        .enumerate()
        {
            let mut v = a[..cut].to_vec();
            v.extend_from_slice(&noise(block + 7 * i, 30 + i as u64));
            variants.push(v[..cut].to_vec());
            variants.push(v);
        }
        variants.push(zeros_then.clone());
        let mut z2 = zeros_then;
        z2[(3 << 20) + 5] ^= 1;
        variants.push(z2);
        let (_, _, hits0) = crate::stages::snapshot();
        for d in std::iter::once(&a).chain(&variants) {
            let want: Vec<Vec<u8>> = Chunker::new(&d[..], p)
                .unwrap()
                .map(|c| c.unwrap().data)
                .collect();
            for step in [7, usize::MAX] {
                let (got, n, h) = scan_all(d, p, block, step);
                assert_eq!(n, d.len() as u64);
                assert_eq!(h, *blake3::hash(d).as_bytes());
                assert!(got == want, "len {} step {step}", d.len());
            }
        }
        let (_, _, hits1) = crate::stages::snapshot();
        assert!(hits1 - hits0 >= 20, "{} memo hits", hits1 - hits0);
    }

    #[test]
    fn same_chunks_and_hash_as_sequential() {
        let mut data = noise(9 << 20, 11);
        data[(3 << 20)..(5 << 20)].fill(0);
        let params = [
            (ChunkParams::default(), 1 << 20),
            (ChunkParams::default(), 256 << 10),
            (
                ChunkParams {
                    min: 64,
                    avg: 256,
                    max: 1024,
                },
                4096,
            ),
        ];
        for (p, block) in params {
            for len in [
                0,
                1,
                1023,
                1024,
                1025,
                block - 1,
                block,
                block + 1,
                block + 100,
                2 * block,
                3 * block + 5000,
                (5 << 20) + 17,
                data.len(),
            ] {
                let d = &data[..len.min(data.len())];
                let want: Vec<Vec<u8>> = Chunker::new(d, p)
                    .unwrap()
                    .map(|c| c.unwrap().data)
                    .collect();
                for step in [usize::MAX, 100_000, 7] {
                    let (got, n, h) = scan_all(d, p, block, step);
                    assert_eq!(n, d.len() as u64);
                    assert_eq!(h, *blake3::hash(d).as_bytes(), "len {len} block {block}");
                    assert!(
                        got == want,
                        "params {p:?} block {block} len {len} step {step}"
                    );
                }
            }
        }
    }
}
