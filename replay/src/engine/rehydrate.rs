//! The engine's side of rehydration: reading the small parts (image,
//! globals) whole, and offering the input snapshot to the backend as an
//! [`InputSource`] (its files, and its bytes window by window).

use crate::placement::Rebaser;
use std::io::Read;

use rrstore_format::extents::PartExtents;
use rrstore_format::{PartRole, PartSource, Recording};

use crate::backend::{Backend, FillError, FillOutcome, InputError, InputSource};
use crate::error::ReplayError;
use crate::source::ReplaySource;

/// Piece size of streamed uploads, downloads and comparisons.
pub(super) const PIECE: usize = 1 << 20;
/// Largest image or globals table read into memory.
const MAX_SMALL_PART: u64 = 4 << 30;
/// Largest window decoded at once from a random-access source when the
/// backend has no staging windows (bounded memory).
const WINDOW: usize = 64 << 20;

/// Read a small part (image, globals) whole, checked against its length.
pub(super) fn read_small(src: &mut ReplaySource, role: PartRole) -> Result<Vec<u8>, ReplayError> {
    let kernel = src.recording.kernel.clone();
    let Some(info) = src.recording.part(role) else {
        return Ok(Vec::new());
    };
    if info.len > MAX_SMALL_PART {
        return Err(ReplayError::PartSize {
            kernel,
            role,
            expected: MAX_SMALL_PART,
            actual: info.len,
        });
    }
    let mut buf = vec![0u8; info.len as usize];
    src.parts
        .read_part_into(role, &mut buf)
        .map_err(|source| ReplayError::Part {
            kernel,
            role,
            source,
        })?;
    Ok(buf)
}

pub(super) fn part_error(
    rec: &Recording,
    role: PartRole,
) -> impl Fn(std::io::Error) -> ReplayError + '_ {
    move |source| ReplayError::Part {
        kernel: rec.kernel.clone(),
        role,
        source,
    }
}

/// The input part as extents of files, when the source can give them and
/// they cover exactly the arena (anything else is left to the copy, which
/// reports it).
pub(super) fn input_extents(src: &mut ReplaySource) -> Option<PartExtents> {
    let plan = src.parts.extents(PartRole::Input).ok().flatten()?;
    (plan.len() == src.recording.arena.size).then_some(plan)
}

/// The input part must fill the arena exactly.
pub(super) fn check_input_len(rec: &Recording) -> Result<(), ReplayError> {
    let size = rec.arena.size;
    let len = rec.part(PartRole::Input).map(|p| p.len).unwrap_or(0);
    if len != size {
        return Err(ReplayError::PartSize {
            kernel: rec.kernel.clone(),
            role: PartRole::Input,
            expected: size,
            actual: len,
        });
    }
    Ok(())
}

/// Tell the backend of the input before a fill ([`Backend::begin_fill`]).
pub(super) fn begin_fill(
    src: &mut ReplaySource,
    extents: Option<&PartExtents>,
    ahead: Option<&[u8]>,
    backend: &mut dyn Backend,
) -> Result<(), ReplayError> {
    let len = src.recording.arena.size;
    Ok(backend.begin_fill(&input(len, extents, ahead, &mut *src.parts, None))?)
}

/// One fill of the arena from `src`'s input part.
/// With `scan` (a relocated arena), the bytes the engine hands over are
/// rebased as they are decoded, while hot in cache; the offsets of the
/// words rebased so are returned beside the outcome (a backend that reads
/// the files itself rebases them there: see
/// [`scan_fills`](crate::backend::Relocation::scan_fills)).
/// `ahead`: the whole input, decoded before (fleet lookahead), read from
/// instead of the part.
pub(super) fn fill(
    src: &mut ReplaySource,
    extents: Option<&PartExtents>,
    ahead: Option<&[u8]>,
    backend: &mut dyn Backend,
    scan: Option<Rebaser>,
) -> Result<(FillOutcome, Vec<u64>), ReplayError> {
    let rec = &src.recording;
    let mut input = input(rec.arena.size, extents, ahead, &mut *src.parts, scan);
    let outcome = backend.fill(&mut input).map_err(|e| match e {
        FillError::Backend(b) => ReplayError::Backend(b),
        FillError::Input(i) => part_error(rec, PartRole::Input)(i.source),
    })?;
    Ok((outcome, input.rebased))
}

fn input<'a>(
    len: u64,
    extents: Option<&'a PartExtents>,
    ahead: Option<&'a [u8]>,
    parts: &'a mut dyn PartSource,
    scan: Option<Rebaser>,
) -> EngineInput<'a> {
    let random = ahead.is_some() || parts.random_access();
    EngineInput {
        len,
        extents,
        scan,
        rebased: Vec::new(),
        piece: if random { WINDOW } else { PIECE },
        bytes: match ahead {
            Some(b) => Bytes::Decoded(b),
            None if random => Bytes::Random(parts),
            None => Bytes::Unopened(parts),
        },
    }
}

/// How the input's bytes are read: random-access sources (the store)
/// decode each window on all cores; others stream from the start, opened
/// on the first read (a backend that reads the files never opens it).
enum Bytes<'a> {
    Random(&'a mut dyn PartSource),
    Unopened(&'a mut dyn PartSource),
    Stream(Box<dyn Read + 'a>),
    /// Decoded ahead, whole (fleet lookahead).
    Decoded(&'a [u8]),
    Failed,
}

struct EngineInput<'a> {
    len: u64,
    extents: Option<&'a PartExtents>,
    /// Relocation: rebase what is read with it, and the offsets rebased.
    scan: Option<Rebaser>,
    rebased: Vec<u64>,
    piece: usize,
    bytes: Bytes<'a>,
}

impl InputSource for EngineInput<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn extents(&self) -> Option<&PartExtents> {
        self.extents
    }

    fn piece_len(&self) -> usize {
        self.piece
    }

    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), InputError> {
        let err = |source| InputError { offset, source };
        self.bytes = match std::mem::replace(&mut self.bytes, Bytes::Failed) {
            Bytes::Unopened(parts) => Bytes::Stream(parts.open_part(PartRole::Input).map_err(err)?),
            other => other,
        };
        match &mut self.bytes {
            Bytes::Random(parts) => parts
                .read_part_range_into(PartRole::Input, offset, dst)
                .map_err(err)?,
            Bytes::Stream(r) => r.read_exact(dst).map_err(err)?,
            Bytes::Decoded(b) => {
                let at = usize::try_from(offset).ok();
                let src = at.and_then(|a| b.get(a..a.checked_add(dst.len())?));
                dst.copy_from_slice(src.ok_or_else(|| {
                    err(std::io::Error::other(
                        "past the end of the input decoded ahead",
                    ))
                })?);
            }
            Bytes::Unopened(_) | Bytes::Failed => {
                return Err(err(std::io::Error::other(
                    "the input part could not be opened",
                )))
            }
        }
        if let Some(r) = &self.scan {
            self.rebased.extend(r.rebase(dst, offset));
        }
        Ok(())
    }
}
