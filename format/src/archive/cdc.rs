//! Zero-copy FastCDC over a stream for the writer: reads the stream in large
//! shared blocks and hands out chunks as (block, range) pieces that worker
//! threads can hash and compress without copying.
//!
//! Cut points are exactly those of [`crate::chunk::Chunker`] (FastCDC 2020
//! streaming): a cut only depends on the bytes from the chunk start up to
//! `max` bytes ahead, so a chunk is taken from a block only when the block
//! holds `max` bytes past its start (or the stream has ended).

use std::io::{self, Read};
use std::sync::Arc;

use crate::chunk::ChunkParams;

/// Bytes read per block.
const BLOCK: usize = 8 << 20;

/// One chunk: `block[start..end]`.
pub struct Piece {
    block: Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

impl Piece {
    pub fn data(&self) -> &[u8] {
        &self.block[self.start..self.end]
    }
}

/// Iterator of chunks over a reader (`params` must be validated).
pub struct BlockChunker<R> {
    src: R,
    p: ChunkParams,
    cur: Arc<Vec<u8>>,
    /// Start of the next chunk in `cur`.
    pos: usize,
    /// Bytes of `cur` that hold data.
    valid: usize,
    eof: bool,
    ready: std::collections::VecDeque<(usize, usize)>,
    /// Retired blocks, reused once no piece refers to them.
    pool: Vec<Arc<Vec<u8>>>,
}

impl<R: Read> BlockChunker<R> {
    pub fn new(src: R, p: ChunkParams) -> Self {
        BlockChunker {
            src,
            p,
            cur: Arc::new(Vec::new()),
            pos: 0,
            valid: 0,
            eof: false,
            ready: Default::default(),
            pool: Vec::new(),
        }
    }

    /// Cut every chunk of `cur[pos..valid]` that is final.
    fn cut(&mut self) {
        let max = self.p.max as usize;
        if self.pos >= self.valid || (!self.eof && self.valid - self.pos < max) {
            return;
        }
        let data = &self.cur[self.pos..self.valid];
        let fc = fastcdc::v2020::FastCDC::new(data, self.p.min, self.p.avg, self.p.max);
        for c in fc {
            let s = self.pos + c.offset;
            if !self.eof && self.valid - s < max {
                break;
            }
            self.ready.push_back((s, s + c.length));
        }
        if let Some(&(_, e)) = self.ready.back() {
            self.pos = e;
        }
    }

    /// Move the unchunked tail into a fresh block and fill it from the source.
    fn refill(&mut self) -> io::Result<()> {
        let reuse = self.pool.iter().position(|b| Arc::strong_count(b) == 1);
        let mut next = match reuse {
            Some(i) => self.pool.swap_remove(i),
            None => Arc::new(vec![0u8; BLOCK.max(2 * self.p.max as usize)]),
        };
        let tail = self.valid - self.pos;
        let Some(buf) = Arc::get_mut(&mut next) else {
            return Err(io::Error::other("chunk block still shared"));
        };
        buf[..tail].copy_from_slice(&self.cur[self.pos..self.valid]);
        let mut valid = tail;
        while valid < buf.len() {
            match self.src.read(&mut buf[valid..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => valid += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let old = std::mem::replace(&mut self.cur, next);
        if !old.is_empty() && self.pool.len() < 4 {
            self.pool.push(old);
        }
        self.pos = 0;
        self.valid = valid;
        Ok(())
    }
}

impl<R: Read> Iterator for BlockChunker<R> {
    type Item = io::Result<Piece>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((start, end)) = self.ready.pop_front() {
                return Some(Ok(Piece {
                    block: self.cur.clone(),
                    start,
                    end,
                }));
            }
            self.cut();
            if !self.ready.is_empty() {
                continue;
            }
            if self.eof {
                return None;
            }
            if let Err(e) = self.refill() {
                self.eof = true;
                self.pos = self.valid;
                return Some(Err(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn same_cut_points_as_the_stream_chunker() {
        let mut data = noise(20 << 20, 5);
        data[3 << 20..9 << 20].fill(0);
        let params = [
            ChunkParams::default(),
            ChunkParams {
                min: 64,
                avg: 256,
                max: 1024,
            },
            ChunkParams {
                min: 1 << 20,
                avg: 4 << 20,
                max: 16 << 20,
            },
        ];
        for p in params {
            for len in [0, 1, 100, 70_000, 8 << 20, (8 << 20) + 1, data.len()] {
                let d = &data[..len];
                let want: Vec<Vec<u8>> = Chunker::new(d, p)
                    .unwrap()
                    .map(|c| c.unwrap().data)
                    .collect();
                for step in [usize::MAX, 100_000] {
                    let got: Vec<Vec<u8>> = BlockChunker::new(Trickle(d, step), p)
                        .map(|c| c.unwrap().data().to_vec())
                        .collect();
                    assert!(got == want, "params {p:?} len {len} step {step}");
                }
            }
        }
    }
}
