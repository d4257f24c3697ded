//! Cutting a byte range of a part into pieces of its chunks, and decoding
//! those pieces straight into the destination (one range per thread when
//! it is large).

use rrstore_format::PartRole;

use crate::pack::reader::{ChunkLoc, PackFiles, ReadError};

/// Ranges at least this long are decoded on several threads.
pub(super) const PARALLEL_MIN: usize = 1 << 20;

/// A part's chunks and where each starts (plus the part length at the end).
pub(super) struct PartIndex {
    pub(super) role: PartRole,
    pub(super) locs: Vec<ChunkLoc>,
    pub(super) starts: Vec<u64>,
}

/// The bytes `skip..skip + len` of chunk `chunk`, at part offset `at`.
pub(super) struct Piece {
    pub(super) chunk: usize,
    pub(super) skip: usize,
    pub(super) len: usize,
    pub(super) at: u64,
}

/// The pieces of chunks covering `offset..offset + len`, in order.
pub(super) fn pieces(index: &PartIndex, offset: u64, len: u64) -> Vec<Piece> {
    let end = offset + len;
    let mut i = index
        .starts
        .partition_point(|&s| s <= offset)
        .saturating_sub(1);
    let mut out = Vec::new();
    while i < index.locs.len() && index.starts[i] < end {
        let (s, e) = (index.starts[i], index.starts[i + 1]);
        let from = s.max(offset);
        let to = e.min(end);
        if to > from {
            out.push(Piece {
                chunk: i,
                skip: (from - s) as usize,
                len: (to - from) as usize,
                at: from,
            });
        }
        i += 1;
    }
    out
}

/// Decode `pieces` into `dst` (their concatenation). A whole chunk equal to
/// the previous whole chunk (a run of identical chunks, e.g. zero pages) is
/// copied from it: it was verified already.
pub(super) fn decode_pieces(
    packs: &mut PackFiles,
    locs: &[ChunkLoc],
    pieces: &[Piece],
    dst: &mut [u8],
) -> std::result::Result<(), (u64, u64, ReadError)> {
    let mut off = 0usize;
    let mut prev: Option<(usize, usize)> = None;
    let mut scratch = Vec::new();
    for p in pieces {
        let loc = &locs[p.chunk];
        let whole = p.skip == 0 && p.len == loc.len as usize;
        let err = |e| (p.at, p.at + p.len as u64, e);
        match prev {
            Some((c, from)) if whole && locs[c].hash == loc.hash => {
                dst.copy_within(from..from + p.len, off);
            }
            _ if whole => {
                packs
                    .read_into(loc, &mut dst[off..off + p.len])
                    .map_err(err)?;
                prev = Some((p.chunk, off));
            }
            _ => {
                scratch.resize(loc.len as usize, 0);
                packs.read_into(loc, &mut scratch).map_err(err)?;
                dst[off..off + p.len].copy_from_slice(&scratch[p.skip..p.skip + p.len]);
            }
        }
        off += p.len;
    }
    Ok(())
}
