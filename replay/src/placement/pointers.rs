//! The pointers stored in an input snapshot (`rrstore show --pointers`):
//! every 8-aligned word whose value points into the recorded arena, with
//! the offset it points at and the argument buffer it lies in. Streamed in
//! 1 MiB pieces (a snapshot can be tens of GiB); the list itself grows
//! with the number of pointers found, up to `limit`.

use std::io::Read;

use serde::Serialize;

use rrstore_format::image::global_refs::{self, GlobalRef, LoadedImage};
use rrstore_format::PartRole;

use crate::error::ReplayError;
use crate::source::ReplaySource;
use crate::verify::{arg_pointers, owning_arg};

const PIECE: usize = 1 << 20;

/// One stored pointer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoredPointer {
    /// Arena offset of the word.
    pub offset: u64,
    /// Arena offset it points at.
    pub target: u64,
    /// The argument whose buffer holds the word (the argument pointing at
    /// or nearest below it), if any.
    pub arg: Option<usize>,
    /// The argument whose buffer holds the target.
    pub target_arg: Option<usize>,
}

/// One stored address of a device global ([`super::globals`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoredGlobal {
    /// Arena offset of the word.
    pub offset: u64,
    /// The global it points into, and where in it.
    pub global: GlobalRef,
    /// The argument whose buffer holds the word.
    pub arg: Option<usize>,
}

/// The stored pointers found, and how many there were in all.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PointerScan {
    pub total: u64,
    pub pointers: Vec<StoredPointer>,
    /// Words holding the address of a device global (recognised only when
    /// an argument is one too: [`rrstore_format::image::global_refs`]),
    /// the first `limit`.
    pub globals: Vec<StoredGlobal>,
}

/// Scan the input snapshot read from `input` (`size` bytes of an arena
/// recorded at `base`, launched with `args`); keeps the first `limit`.
pub fn scan_input(
    input: &mut dyn Read,
    base: u64,
    size: u64,
    args: &[u64],
    limit: usize,
    image: Option<&LoadedImage>,
) -> std::io::Result<PointerScan> {
    let span = image.map(|l| l.span());
    let owners = arg_pointers(args, base, size);
    let mut out = PointerScan::default();
    let mut buf = vec![0u8; PIECE];
    let mut off = 0u64;
    while off < size {
        // PIECE is a multiple of 8: every word lies in one piece.
        let n = PIECE.min(usize::try_from(size - off).unwrap_or(PIECE));
        input.read_exact(&mut buf[..n])?;
        for (k, w) in buf[..n].chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            let value = u64::from_le_bytes(b);
            let target = value.wrapping_sub(base);
            if target >= size {
                if let (Some(l), Some((lo, hi))) = (image, span) {
                    if (lo..hi).contains(&value) && out.globals.len() < limit {
                        if let Some(global) = l.resolve(value) {
                            let offset = off + 8 * k as u64;
                            out.globals.push(StoredGlobal {
                                offset,
                                global,
                                arg: owning_arg(&owners, offset).map(|p| p.index),
                            });
                        }
                    }
                }
                continue;
            }
            out.total += 1;
            if out.pointers.len() < limit {
                let offset = off + 8 * k as u64;
                out.pointers.push(StoredPointer {
                    offset,
                    target,
                    arg: owning_arg(&owners, offset).map(|p| p.index),
                    target_arg: owning_arg(&owners, target).map(|p| p.index),
                });
            }
        }
        off += n as u64;
    }
    Ok(out)
}

/// The stored pointers of `src`'s input snapshot (the first `limit`).
/// A recording without an arena address has none that could be placed.
pub fn scan_source(src: &mut ReplaySource, limit: usize) -> Result<PointerScan, ReplayError> {
    let rec = src.recording.clone();
    let part_err = |source| ReplayError::Part {
        kernel: rec.kernel.clone(),
        role: PartRole::Input,
        source,
    };
    let Some(base) = rec.arena.base else {
        return Ok(PointerScan::default());
    };
    let len = rec.part(PartRole::Input).map_or(0, |p| p.len);
    if len != rec.arena.size {
        return Err(ReplayError::PartSize {
            kernel: rec.kernel.clone(),
            role: PartRole::Input,
            expected: rec.arena.size,
            actual: len,
        });
    }
    let image = global_refs::read_image(&rec, &mut *src.parts);
    let loaded = LoadedImage::recognise(&rec, &image);
    let mut input = src.parts.open_part(PartRole::Input).map_err(part_err)?;
    scan_input(
        &mut input,
        base,
        rec.arena.size,
        &rec.args,
        limit,
        loaded.as_ref(),
    )
    .map_err(part_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_pointers_and_their_buffers() {
        let base = 0x7000_0000_0010u64;
        let mut arena = [0u8; 64];
        arena[8..16].copy_from_slice(&(base + 32).to_le_bytes());
        arena[40..48].copy_from_slice(&(base + 64).to_le_bytes()); // one past the end
        let s = scan_input(
            &mut &arena[..],
            base,
            64,
            &[u64::MAX, base, base + 32],
            10,
            None,
        )
        .unwrap();
        assert_eq!(s.total, 1);
        assert_eq!(
            s.pointers,
            vec![StoredPointer {
                offset: 8,
                target: 32,
                arg: Some(1),
                target_arg: Some(2)
            }]
        );
    }
}
