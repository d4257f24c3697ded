//! Reading blocks: from a stream in order, or by offset from a file the
//! workers read themselves ([`ReadAt`]), and the extension of a block into
//! the next one read only as far as a cut needs ([`Fill`]).

use std::io::{self, Read};
use std::time::Instant;

use super::block::Block;
use super::worker::first_cut;
use crate::chunk::ChunkParams;
use crate::stages::{self, Stage};

/// Bytes asked of the source per read.
const READ_STEP: usize = 1 << 20;

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

/// Fill `buf` from `r`; returns the bytes read (short only at the end of
/// the stream).
pub(super) fn fill(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
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
pub(super) fn read_block(
    file: &dyn ReadAt,
    buf: &mut [u8],
    offset: u64,
    last: bool,
) -> io::Result<()> {
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

/// Bytes asked of the file per extension read: most chunks that cross a
/// block's end end within one average chunk of it.
const EXT_STEP: usize = 64 << 10;

/// How much of a block buffer holds stream bytes, and where more of them
/// come from. A block owns its first `own` bytes; a chunk starting there
/// may run up to `max` bytes into the next block, but most end within a
/// few KiB of the boundary, so workers reading by offset read the next
/// block's head only as far as a cut needs it (`more`) instead of a whole
/// `max` bytes that the next block's worker reads again anyway.
pub(super) struct Fill<'a> {
    /// Valid bytes in the buffer.
    pub(super) ext: usize,
    /// Bytes the buffer can hold of the stream from its offset (own + up to
    /// `max`, less at the stream's end).
    pub(super) avail: usize,
    /// Where to read more (`None`: `ext == avail` already).
    pub(super) more: Option<&'a dyn ReadAt>,
    /// Stream offset of the buffer's first byte.
    pub(super) offset: u64,
}

impl Fill<'_> {
    /// Length of the FastCDC chunk starting at `at`, reading more of the
    /// extension until the cut is decided: a cut found before the end of
    /// the bytes given is exact (a cut at `e` depends on the bytes up to
    /// and including `e`; `memo`'s module doc), and so is one given at
    /// least `max` bytes or all there are.
    pub(super) fn cut(
        &mut self,
        block: &mut Block,
        at: usize,
        p: ChunkParams,
    ) -> io::Result<usize> {
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
            let len = first_cut(&block[at..self.ext], p);
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

    /// The buffer holds stream bytes up to `end`, reading more of the
    /// extension if needed; `false` when the stream or the source ends
    /// before.
    pub(super) fn have(&mut self, block: &mut Block, end: usize) -> io::Result<bool> {
        if end > self.avail {
            return Ok(false);
        }
        if self.ext < end {
            let Some(file) = self.more else {
                return Ok(false);
            };
            self.read_to(block, file, end)?;
        }
        Ok(true)
    }

    /// Read the extension up to `end` (at most `avail`).
    fn read_to(&mut self, block: &mut Block, file: &dyn ReadAt, end: usize) -> io::Result<()> {
        let end = end.min(self.avail);
        let t = Instant::now();
        read_block(
            file,
            &mut block[self.ext..end],
            self.offset + self.ext as u64,
            false,
        )?;
        stages::add(Stage::Read, t, (end - self.ext) as u64);
        self.ext = end;
        Ok(())
    }
}
