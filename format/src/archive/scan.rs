//! Parallel content-defined chunking and hashing of one stream, in one read.
//!
//! The stream is read in large blocks (a power of two, 8 MiB by default).
//! Each block, extended by the first `max` bytes of the next one, goes to a
//! worker that (a) cuts it with FastCDC starting at the block's first byte,
//! (b) blake3-hashes every candidate chunk and (c) computes the block's
//! BLAKE3 subtree chaining value (blocks are aligned power-of-two subtrees
//! of the stream's BLAKE3 tree, so the stream's hash is their merge: the
//! whole-stream hash costs no extra pass and no single thread).
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
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};

use super::pool::{self, Pool};
use crate::chunk::{ChunkHash, ChunkParams};

/// Default block length: 8 MiB.
pub const DEFAULT_BLOCK: usize = 8 << 20;

/// Block buffers kept for the next scanner of this process: a fresh buffer
/// costs a page fault and a page clear per 4 KiB on first use, which is more
/// than reading into it (an import scans many parts one after the other).
static FREE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// At most this many buffers are kept (about 66 MiB with 8 MiB blocks).
const FREE_MAX: usize = 8;

fn take_free(cap: usize) -> Vec<u8> {
    let found = FREE
        .lock()
        .ok()
        .and_then(|mut f| f.iter().position(|b| b.len() == cap).map(|i| f.swap_remove(i)));
    found.unwrap_or_else(|| vec![0u8; cap])
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
    pub block: Arc<Vec<u8>>,
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
    /// Candidate chunks cut from the block's first byte.
    cands: Vec<Span>,
    /// Subtree chaining value, or the root hash when the block is the whole
    /// stream.
    cv: ChainingValue,
}

struct InFlight {
    rx: Receiver<BlockScan>,
    block: Arc<Vec<u8>>,
    offset: u64,
    /// Bytes that belong to this block (chunks starting here start below).
    own: usize,
    /// Valid bytes in `block` (own + the next block's head).
    ext: usize,
    /// The block is the whole stream (its scan returned the root hash).
    only: bool,
}

/// Streams chunks of a reader through a [`Pool`]; see the module doc.
pub struct Scanner<R> {
    src: R,
    p: ChunkParams,
    block_len: usize,
    window: usize,
    /// Read-ahead block and its valid length.
    ahead: Option<(Arc<Vec<u8>>, usize)>,
    /// Stream offset of the next block to dispatch.
    next_offset: u64,
    dispatched_all: bool,
    inflight: VecDeque<InFlight>,
    /// Stream offset where the next true chunk starts.
    chain: u64,
    cvs: Vec<ChainingValue>,
    /// Root hash when the stream was a single block.
    root: Option<ChainingValue>,
    spare: Vec<Arc<Vec<u8>>>,
}

impl<R: Read> Scanner<R> {
    /// `params` must be validated; `block_len` must be a power of two of at
    /// least 1 KiB and at least `params.max`. `window`: blocks scanned ahead.
    pub fn new(src: R, params: ChunkParams, block_len: usize, window: usize) -> Scanner<R> {
        let block_len = block_len
            .max(params.max as usize)
            .max(blake3::CHUNK_LEN)
            .next_power_of_two();
        Scanner {
            src,
            p: params,
            block_len,
            window: window.max(1),
            ahead: None,
            next_offset: 0,
            dispatched_all: false,
            inflight: VecDeque::new(),
            chain: 0,
            cvs: Vec::new(),
            root: None,
            spare: Vec::new(),
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
            let scan = pool::wait(&f.rx)?;
            let chunks = self.resync(&f, scan);
            if !chunks.is_empty() {
                return Ok(Some(Scanned {
                    block: f.block,
                    offset: f.offset,
                    chunks,
                }));
            }
        }
    }

    fn buffer(&mut self) -> Arc<Vec<u8>> {
        let cap = self.block_len + self.p.max as usize;
        match self.spare.iter().position(|b| Arc::strong_count(b) == 1) {
            Some(i) => self.spare.swap_remove(i),
            None => Arc::new(take_free(cap)),
        }
    }

    /// Fill `buf[..block_len]` from the source; returns the bytes read.
    fn fill(&mut self, buf: &mut Arc<Vec<u8>>) -> io::Result<usize> {
        let block_len = self.block_len;
        let Some(b) = Arc::get_mut(buf) else {
            return Err(io::Error::other("scan block still shared"));
        };
        let mut n = 0;
        while n < block_len {
            match self.src.read(&mut b[n..block_len]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    fn dispatch(&mut self, pool: &Pool) -> io::Result<()> {
        let (mut cur, n) = match self.ahead.take() {
            Some(a) => a,
            None => {
                let mut b = self.buffer();
                let n = self.fill(&mut b)?;
                (b, n)
            }
        };
        if n == 0 {
            self.dispatched_all = true;
            return Ok(());
        }
        let max = self.p.max as usize;
        let (ext, last) = if n < self.block_len {
            (n, true)
        } else {
            let mut next = self.buffer();
            let n2 = self.fill(&mut next)?;
            let copied = n2.min(max);
            let Some(c) = Arc::get_mut(&mut cur) else {
                return Err(io::Error::other("scan block still shared"));
            };
            c[n..n + copied].copy_from_slice(&next[..copied]);
            if n2 > 0 {
                self.ahead = Some((next, n2));
            } else {
                self.spare.push(next);
            }
            (n + copied, n2 == 0)
        };
        let offset = self.next_offset;
        let only = offset == 0 && last;
        self.next_offset += n as u64;
        self.dispatched_all = last;
        let block = Arc::clone(&cur);
        let p = self.p;
        let rx = pool.submit(move |_| scan_block(&block, n, ext, offset, only, p))?;
        if self.spare.len() < 2 * self.window + 4 {
            self.spare.push(Arc::clone(&cur));
        }
        self.inflight.push_back(InFlight {
            rx,
            block: cur,
            offset,
            own: n,
            ext,
            only,
        });
        Ok(())
    }

    /// The true chunks starting in this block (see the module doc).
    fn resync(&mut self, f: &InFlight, scan: BlockScan) -> Vec<Span> {
        if f.only {
            self.root = Some(scan.cv);
        } else {
            self.cvs.push(scan.cv);
        }
        let data = &f.block[..f.ext];
        let mut t = (self.chain - f.offset) as usize;
        let mut out = Vec::new();
        let mut j = 0;
        let cands = scan.cands;
        while t < f.own {
            while j < cands.len() && cands[j].start < t {
                j += 1;
            }
            if j < cands.len() && cands[j].start == t {
                t = cands[cands.len() - 1].end;
                out.extend_from_slice(&cands[j..]);
                break;
            }
            let len = first_cut(&data[t..], self.p);
            out.push(Span {
                start: t,
                end: t + len,
                hash: crate::chunk::hash(&data[t..t + len]),
            });
            t += len;
        }
        self.chain = f.offset + t as u64;
        out
    }
}

impl<R> Drop for Scanner<R> {
    /// Hand the buffers nobody else holds to the next scanner.
    fn drop(&mut self) {
        let Ok(mut free) = FREE.lock() else { return };
        let ahead = self.ahead.take().map(|(b, _)| b);
        for b in self.spare.drain(..).chain(ahead) {
            if free.len() >= FREE_MAX {
                break;
            }
            if let Ok(v) = Arc::try_unwrap(b) {
                free.push(v);
            }
        }
    }
}

/// Length of the first FastCDC chunk of `data` (exact when `data` holds at
/// least `max` bytes or ends where the stream ends).
fn first_cut(data: &[u8], p: ChunkParams) -> usize {
    fastcdc::v2020::FastCDC::new(data, p.min, p.avg, p.max)
        .next()
        .map_or(data.len(), |c| c.length)
}

/// Worker side: candidate chunks from the block's first byte, their hashes,
/// and the block's chaining value (or root hash when `only`).
fn scan_block(
    block: &[u8],
    own: usize,
    ext: usize,
    offset: u64,
    only: bool,
    p: ChunkParams,
) -> BlockScan {
    let data = &block[..ext];
    let mut cands = Vec::with_capacity(own / p.avg.max(1) as usize + 4);
    for c in fastcdc::v2020::FastCDC::new(data, p.min, p.avg, p.max) {
        if c.offset >= own {
            break;
        }
        cands.push(Span {
            start: c.offset,
            end: c.offset + c.length,
            hash: crate::chunk::hash(&data[c.offset..c.offset + c.length]),
        });
    }
    let cv = if only {
        *blake3::hash(&data[..own]).as_bytes()
    } else {
        blake3::Hasher::new()
            .set_input_offset(offset)
            .update(&data[..own])
            .finalize_non_root()
    };
    BlockScan { cands, cv }
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

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

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

    fn scan_all(
        d: &[u8],
        p: ChunkParams,
        block: usize,
        step: usize,
    ) -> (Vec<Vec<u8>>, u64, ChunkHash) {
        with_pool(2, 3, 4, |pool| {
            let mut s = Scanner::new(Trickle(d, step), p, block, 3);
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
                for step in [usize::MAX, 100_000] {
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
