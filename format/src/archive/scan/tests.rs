//! The scanner against the sequential chunker, over streams and files,
//! memoized blocks, lengths and read sizes.

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

fn scan_all(d: &[u8], p: ChunkParams, block: usize, step: usize) -> (Vec<Vec<u8>>, u64, ChunkHash) {
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

/// Reads that do not start at a block boundary fail: the second read of
/// an extension, by a worker or by the resync crossing a zero run out of
/// phase with the blocks.
struct FailsInsideBlocks(Vec<u8>);
impl ReadAt for FailsInsideBlocks {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if !offset.is_multiple_of(1 << 20) {
            return Err(io::Error::other(format!("device gone at byte {offset}")));
        }
        Mem(self.0.clone(), usize::MAX).read_at(buf, offset)
    }
}

#[test]
fn a_failed_extension_read_is_an_error() {
    let mut d = noise(8 << 20, 9);
    d[(2 << 20) + 12_345..(6 << 20) + 999].fill(0);
    let file: Arc<dyn ReadAt> = Arc::new(FailsInsideBlocks(d.clone()));
    let err = with_pool(2, 3, 4, |pool| {
        let mut s: Scanner<io::Empty> =
            Scanner::at(file, d.len() as u64, ChunkParams::default(), 1 << 20, 3);
        loop {
            match s.next(pool) {
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(e) => return Some(e),
            }
        }
    });
    assert!(
        err.is_some_and(|e| e.to_string().contains("device gone")),
        "the read error is not reported"
    );
}

/// Reads shorter than a block (extensions) fail; the blocks' own reads of
/// a stream of whole blocks succeed.
struct FailsShortReads(Vec<u8>);
impl ReadAt for FailsShortReads {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if buf.len() < 1 << 20 {
            return Err(io::Error::other(format!("device gone at byte {offset}")));
        }
        Mem(self.0.clone(), usize::MAX).read_at(buf, offset)
    }
}

/// A repeated block checks its remembered tail against the bytes past its
/// end, which it reads first (`Fill::have`): a failure there is the
/// scan's error too.
#[test]
fn a_failed_read_checking_a_remembered_tail_is_an_error() {
    let d = noise(6 << 20, 77);
    let scan = |file: Arc<dyn ReadAt>| {
        with_pool(2, 3, 4, |pool| {
            let mut s: Scanner<io::Empty> =
                Scanner::at(file, d.len() as u64, ChunkParams::default(), 1 << 20, 3);
            loop {
                match s.next(pool) {
                    Ok(Some(_)) => {}
                    Ok(None) => return None,
                    Err(e) => return Some(e),
                }
            }
        })
    };
    assert!(scan(Arc::new(Mem(d.clone(), usize::MAX))).is_none());
    let err = scan(Arc::new(FailsShortReads(d.clone())));
    assert!(
        err.is_some_and(|e| e.to_string().contains("device gone")),
        "the read error is not reported"
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
    let tails0 = crate::stages::tails();
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
    // Tails were taken from the memo too (where the bytes after the block
    // were the same), and never where they were not: the chunks above
    // would differ.
    let tails = crate::stages::tails() - tails0;
    assert!(tails >= 10, "{tails} tails");
}

/// A repeated block followed by other bytes than when it was memoized:
/// from the first byte past its end, at the byte after the tail's cut (the
/// last one the cut examined), or only after it. The chunks are the
/// sequential chunker's in all three (a tail taken where the examined
/// bytes differ would end where the old cut was).
#[test]
fn a_memoized_tail_is_taken_only_where_the_bytes_that_decided_it_repeat() {
    let p = ChunkParams::default();
    let block = 1 << 20;
    let a = noise(3 << 20, 41);
    let want = |d: &[u8]| -> Vec<Vec<u8>> {
        Chunker::new(d, p)
            .unwrap()
            .map(|c| c.unwrap().data)
            .collect()
    };
    let (first, ..) = scan_all(&a, p, block, 7);
    assert!(first == want(&a));
    // Where block 0's tail ends (the chunk crossing 1 MiB).
    let mut at = 0;
    let tail_end = first
        .iter()
        .map(|c| {
            at += c.len();
            at
        })
        .find(|&e| e >= block)
        .unwrap();
    for flip in [block, tail_end, tail_end + 1] {
        let mut d = a.clone();
        d[flip] ^= 0x5a;
        for step in [7, usize::MAX] {
            let (got, ..) = scan_all(&d, p, block, step);
            assert!(got == want(&d), "flip at {flip}, step {step}");
        }
    }
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
