//! The read-back: one streamed pass over the arena after the launches that
//! compares it with the recorded output (byte-exact or within tolerance),
//! hashes it and saves it.

use crate::placement::Rebaser;
use std::io::{Read, Write};

use rrstore_format::PartRole;

use super::rehydrate::{part_error, PIECE};
use super::report::{ReplayReport, Verdict};
use super::ReplayOptions;
use crate::backend::Backend;
use crate::error::ReplayError;
use crate::source::ReplaySource;
use crate::verify::arg_pointers;
use crate::verify::ranges::RangeTally;
use crate::verify::tolerance::ToleranceComparer;

enum Comparer {
    None,
    Exact(RangeTally),
    Tolerance(ToleranceComparer),
}

/// One pass over the arena: compare with the output part, hash, save.
pub(super) fn check_output(
    src: &mut ReplaySource,
    backend: &mut dyn Backend,
    opts: &ReplayOptions,
    verify: bool,
    translate: Option<Rebaser>,
    report: &mut ReplayReport,
) -> Result<(), ReplayError> {
    let rec = &src.recording;
    let size = rec.arena.size;
    let pointers = arg_pointers(&rec.args, rec.arena.base.unwrap_or(0), size);
    let mut comparer = match (verify, opts.tolerance) {
        (false, _) => Comparer::None,
        (true, None) => Comparer::Exact(RangeTally::new(pointers)),
        (true, Some(t)) => Comparer::Tolerance(ToleranceComparer::new(t)),
    };
    let output_info = rec.part(PartRole::Output).cloned();
    let mut expected_reader = None;
    if verify {
        let len = output_info.as_ref().map(|p| p.len).unwrap_or(0);
        if len != size {
            return Err(ReplayError::PartSize {
                kernel: rec.kernel.clone(),
                role: PartRole::Output,
                expected: size,
                actual: len,
            });
        }
    }
    // Where the backend can hash the arena in place (the host runner), do so
    // first: the history needs its blake3 anyway, and when it equals the
    // recorded output's blake3 (from the manifest) the arena is
    // byte-identical to the output, so the output part need not be read at
    // all. Otherwise the streamed comparison below locates the differences.
    // (An arena translated on the way down is hashed here, translated.)
    let arena_hash = match translate {
        Some(_) => None,
        None => backend.arena_hash()?,
    };
    let identical_by_hash =
        verify && arena_hash.is_some() && output_info.as_ref().map(|o| o.blake3) == arena_hash;
    if verify && !identical_by_hash {
        expected_reader = Some(
            src.parts
                .open_part(PartRole::Output)
                .map_err(part_error(rec, PartRole::Output))?,
        );
    }
    let mut save = match &opts.save_output {
        Some(path) => Some((
            std::io::BufWriter::with_capacity(
                PIECE,
                std::fs::File::create(path).map_err(|source| ReplayError::SaveOutput {
                    path: path.clone(),
                    source,
                })?,
            ),
            path,
        )),
        None => None,
    };
    // A differing output is kept for the confirmation replays to compare
    // with (`--confirm`): the `--save-output` file when it holds the
    // recorded form, else a scratch copy. Only where the backend hashed
    // the arena in place: a verified replay then never streams, so keeping
    // costs nothing unless the output differs (docs/replay.md).
    let relocated_save = translate.is_some() && opts.save_relocated;
    let mut keep = None;
    if verify && !identical_by_hash && arena_hash.is_some() && opts.confirm > 0 {
        match &opts.save_output {
            Some(p) if !relocated_save => report.differing_output = Some((p.clone(), false)),
            _ => {
                let path = super::confirm::scratch_path(opts, "first");
                let f = std::fs::File::create(&path).map_err(|source| ReplayError::SaveOutput {
                    path: path.clone(),
                    source,
                })?;
                report.differing_output = Some((path.clone(), true));
                keep = Some((std::io::BufWriter::with_capacity(PIECE, f), path));
            }
        }
    }
    // Without the backend's hash the arena is hashed as it streams by.
    let mut hasher = arena_hash.is_none().then(blake3::Hasher::new);
    let mut expected_buf = if verify { vec![0u8; PIECE] } else { Vec::new() };
    let streaming =
        expected_reader.is_some() || save.is_some() || hasher.is_some() || keep.is_some();
    let mut actual_buf = if streaming {
        vec![0u8; PIECE]
    } else {
        Vec::new()
    };
    let mut off = if streaming { 0u64 } else { size };
    while off < size {
        let n = PIECE.min((size - off) as usize);
        let actual = &mut actual_buf[..n];
        backend.download(off, actual)?;
        // `--save-output-form relocated`: the bytes as the device left
        // them, before they are translated back.
        let save_first = translate.is_some() && opts.save_relocated;
        if let (true, Some((w, path))) = (save_first, save.as_mut()) {
            w.write_all(actual)
                .map_err(|source| ReplayError::SaveOutput {
                    path: path.to_path_buf(),
                    source,
                })?;
        }
        if let Some(r) = &translate {
            let n = r.back_translate(actual, off);
            if let Some(p) = report.placement.as_mut() {
                p.back_translated += n;
            }
        }
        let actual = &*actual;
        if let Some(h) = hasher.as_mut() {
            h.update(actual);
        }
        if let Some((w, path)) = keep.as_mut() {
            w.write_all(actual)
                .map_err(|source| ReplayError::SaveOutput {
                    path: path.to_path_buf(),
                    source,
                })?;
        }
        if let (false, Some((w, path))) = (save_first, save.as_mut()) {
            w.write_all(actual)
                .map_err(|source| ReplayError::SaveOutput {
                    path: path.to_path_buf(),
                    source,
                })?;
        }
        if let Some(r) = expected_reader.as_mut() {
            r.read_exact(&mut expected_buf[..n])
                .map_err(part_error(rec, PartRole::Output))?;
            match &mut comparer {
                Comparer::Exact(c) => c.feed(actual, &expected_buf[..n]),
                Comparer::Tolerance(c) => c.feed(actual, &expected_buf[..n]),
                Comparer::None => {}
            }
        }
        off += n as u64;
    }
    drop(expected_reader);
    if let Some((mut w, path)) = keep {
        w.flush()
            .map_err(|source| ReplayError::SaveOutput { path, source })?;
    }
    if let Some((mut w, path)) = save {
        w.flush().map_err(|source| ReplayError::SaveOutput {
            path: path.clone(),
            source,
        })?;
        report.saved_output = Some(path.clone());
        let relocated = report
            .placement
            .as_ref()
            .is_some_and(|p| p.mode == "relocated");
        report.saved_output_form = relocated.then_some(if opts.save_relocated {
            "relocated"
        } else {
            "recorded"
        });
    }
    let mut identical = false;
    report.verdict = match comparer {
        _ if identical_by_hash => {
            identical = true;
            Verdict::Verified
        }
        Comparer::None => Verdict::Unverified,
        Comparer::Exact(c) => match c.finish() {
            None => {
                identical = true;
                Verdict::Verified
            }
            Some(m) => {
                report.mismatch = Some(m);
                Verdict::Mismatch
            }
        },
        Comparer::Tolerance(c) => {
            let r = c.finish();
            let v = if r.differing == 0 && r.tail_bytes_differing == 0 {
                identical = true;
                Verdict::Verified
            } else if r.passed {
                Verdict::WithinTolerance
            } else {
                Verdict::Mismatch
            };
            report.tolerance = Some(r);
            v
        }
    };
    report.output_blake3 = match (arena_hash, identical, output_info, hasher) {
        (Some(h), ..) => Some(h),
        // Byte-identical to the recorded output: its hash is in the manifest.
        (None, true, Some(info), _) => Some(info.blake3),
        (None, _, _, Some(h)) => Some(*h.finalize().as_bytes()),
        _ => None,
    };
    Ok(())
}
