//! [`export`]: write a recording as LLVM files.
//!
//! * Same layout: every file byte-for-byte as imported, with its original
//!   name (the descriptor is [`Recording::descriptor`] verbatim).
//! * kernel-named -> native: the mapping of `../shared/tools/to-upstream-layout.py`
//!   (docs/format-llvm.md has the table), JSON written exactly as Python's
//!   `json.dump(..., separators=(",", ":"))` writes it.
//! * native -> kernel-named: the LLVM 18-22 key set, JSON written exactly as
//!   `llvm::json` prints it (keys sorted, compact). Refused when the recording
//!   uses dynamic shared memory (LLVM 18-22 cannot record it) or a global
//!   larger than 4 GiB (u32 sizes).
//!
//! Files are written through [`Staging`]: all of a recording's files appear
//! together or none does, an existing file or a symbolic link at a
//! destination is refused (unless forced), and free space is checked first.
//!
//! Parts are streamed; the globals table is re-encoded entry by entry while
//! streaming, never buffered. Every part is checked against the length and
//! blake3 the recording states.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::{globals, hashes, kernel_named, native, Layout};
use crate::error::{FormatError, Result};
use crate::model::{PartRole, PartSource, Recording};
use crate::output::Staging;

/// `VAllocSize` written when converting a kernel-named recording, which
/// does not record it: 1 GiB, the script's default (or the snapshot size
/// if that is larger).
pub const DEFAULT_VALLOC_SIZE: u64 = 1 << 30;

const COPY_BUF: usize = 1 << 20;

/// Write `rec` into `dir` (created if needed) and return the written paths,
/// descriptor first. `layout: None` = the layout it came from, losslessly.
/// All or nothing, never over an existing file or through a symbolic link
/// ([`Staging`]); [`export_into`] to write several recordings at once.
pub fn export(
    rec: &Recording,
    parts: &mut dyn PartSource,
    dir: &Path,
    layout: Option<Layout>,
) -> Result<Vec<PathBuf>> {
    let mut staging = Staging::new(false);
    export_into(&mut staging, rec, parts, dir, layout)?;
    staging.commit()
}

/// Stage `rec`'s files for `dir` in `staging`: nothing appears under their
/// names before [`Staging::commit`]. Every destination and the free space
/// are checked before any byte is written.
pub fn export_into(
    staging: &mut Staging,
    rec: &Recording,
    parts: &mut dyn PartSource,
    dir: &Path,
    layout: Option<Layout>,
) -> Result<()> {
    let from = Layout::of(rec.generation);
    let to = layout.unwrap_or(from);
    let plan = match to {
        l if l == from => lossless(rec, dir)?,
        Layout::Native => to_native(rec, dir)?,
        Layout::KernelNamed => to_kernel_named(rec, dir)?,
    };
    staging.dir(dir)?;
    let mut bytes = 0u64;
    for (path, what) in &plan {
        staging.check(path)?;
        bytes = bytes.saturating_add(match what {
            What::Bytes(b) => b.len() as u64,
            What::Part(role) | What::Globals(role) => rec.part(*role).map_or(0, |p| p.len),
        });
    }
    staging.reserve(dir, bytes)?;
    for (path, what) in plan {
        match what {
            What::Bytes(b) => stage_file(staging, &path, &b)?,
            What::Part(role) => copy_part(staging, rec, parts, role, &path)?,
            What::Globals(_) => convert_globals(staging, rec, parts, &path, to)?,
        }
    }
    Ok(())
}

/// What one output file holds.
enum What {
    /// These bytes (a descriptor).
    Bytes(Vec<u8>),
    /// A part verbatim.
    Part(PartRole),
    /// The globals part re-encoded for the target layout.
    Globals(PartRole),
}

fn write_err(path: &Path, source: io::Error) -> FormatError {
    FormatError::Write {
        path: path.to_path_buf(),
        source,
    }
}

fn cannot(rec: &Recording, to: Layout, why: String) -> FormatError {
    FormatError::Invalid {
        path: PathBuf::from(format!("{}.json", rec.stem)),
        message: format!(
            "cannot export this {} recording to the {to} layout: {why}",
            rec.generation
        ),
    }
}

/// A stem usable as a file name inside `dir` (it comes from a descriptor or
/// an archive, so it must not escape the directory).
fn checked_stem(stem: &str) -> Result<&str> {
    let bad = stem.is_empty()
        || stem == "."
        || stem == ".."
        || stem.contains(['/', '\\', '\0'])
        || stem.len() > 240;
    if bad {
        return Err(FormatError::Invalid {
            path: PathBuf::from(stem),
            message: "the recording's file stem is not a plain file name (empty, `..`, a path separator, NUL, or over 240 bytes); refusing to write it".into(),
        });
    }
    Ok(stem)
}

/// Map an error from a part source, keeping a wrapped [`FormatError`]
/// (e.g. an archive chunk that fails its hash) as it is.
fn source_err(role: PartRole, e: io::Error) -> FormatError {
    let kind = e.kind();
    if e.get_ref().is_some_and(|i| i.is::<FormatError>()) {
        if let Some(inner) = e.into_inner() {
            if let Ok(fe) = inner.downcast::<FormatError>() {
                return *fe;
            }
        }
        return FormatError::Io {
            path: PathBuf::from(format!("<{role} part>")),
            source: io::Error::new(kind, "part source failed"),
        };
    }
    FormatError::Io {
        path: PathBuf::from(format!("<{role} part>")),
        source: e,
    }
}

/// Copies bytes to a file while hashing them.
struct Sink {
    path: PathBuf,
    w: BufWriter<File>,
    hash: blake3::Hasher,
    len: u64,
}

impl Sink {
    fn create(staging: &mut Staging, path: &Path) -> Result<Sink> {
        let f = staging.create(path)?;
        Ok(Sink {
            w: BufWriter::with_capacity(COPY_BUF, f),
            path: path.to_path_buf(),
            hash: blake3::Hasher::new(),
            len: 0,
        })
    }

    fn write(&mut self, b: &[u8]) -> Result<()> {
        self.w.write_all(b).map_err(|e| write_err(&self.path, e))?;
        self.hash.update(b);
        self.len += b.len() as u64;
        Ok(())
    }

    /// Copy exactly `n` bytes (or to the end when `n` is None) from `r`.
    fn copy_from(&mut self, r: &mut dyn Read, n: Option<u64>, role: PartRole) -> Result<u64> {
        let mut buf = vec![0u8; COPY_BUF];
        let mut copied = 0u64;
        loop {
            let want = match n {
                Some(n) if copied >= n => break,
                Some(n) => (n - copied).min(COPY_BUF as u64) as usize,
                None => COPY_BUF,
            };
            let got = match r.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(source_err(role, e)),
            };
            self.write(&buf[..got])?;
            copied += got as u64;
        }
        Ok(copied)
    }

    fn finish(mut self) -> Result<(u64, [u8; 32])> {
        self.w.flush().map_err(|e| write_err(&self.path, e))?;
        Ok((self.len, *self.hash.finalize().as_bytes()))
    }
}

/// Stream one part verbatim to `path`, checking its length and blake3.
fn copy_part(
    staging: &mut Staging,
    rec: &Recording,
    parts: &mut dyn PartSource,
    role: PartRole,
    path: &Path,
) -> Result<()> {
    let Some(info) = rec.part(role) else {
        return Ok(());
    };
    let mut sink = Sink::create(staging, path)?;
    {
        let mut r = parts.open_part(role).map_err(|e| source_err(role, e))?;
        sink.copy_from(&mut r, None, role)?;
    }
    let (len, hash) = sink.finish()?;
    if len != info.len || hash != info.blake3 {
        return Err(FormatError::Invalid {
            path: path.to_path_buf(),
            message: format!(
                "the {role} part read back {len} bytes that do not match the recording ({} bytes, blake3 {}); the source is corrupt or changed while exporting",
                info.len,
                crate::id::hex(&info.blake3)
            ),
        });
    }
    Ok(())
}

fn stage_file(staging: &mut Staging, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = staging.create(path)?;
    f.write_all(bytes).map_err(|e| write_err(path, e))
}

fn lossless(rec: &Recording, dir: &Path) -> Result<Vec<(PathBuf, What)>> {
    let stem = checked_stem(&rec.stem)?;
    let mut plan = vec![(
        dir.join(format!("{stem}.json")),
        What::Bytes(rec.descriptor.clone()),
    )];
    for info in &rec.parts {
        let ext = super::extension(rec.generation, info.role);
        plan.push((dir.join(format!("{stem}{ext}")), What::Part(info.role)));
    }
    Ok(plan)
}

/// Stream the globals part re-encoded: `count` (native only) then each
/// entry's new header and its data.
fn convert_globals(
    staging: &mut Staging,
    rec: &Recording,
    parts: &mut dyn PartSource,
    path: &Path,
    to: Layout,
) -> Result<()> {
    let mut sink = Sink::create(staging, path)?;
    if to == Layout::Native {
        let count = u32::try_from(rec.globals.len())
            .map_err(|_| cannot(rec, to, "more than 2^32 globals".into()))?;
        sink.write(&count.to_le_bytes())?;
    }
    if rec.part(PartRole::Globals).is_some() {
        let mut r = parts
            .open_part(PartRole::Globals)
            .map_err(|e| source_err(PartRole::Globals, e))?;
        let mut pos = 0u64;
        for g in &rec.globals {
            let skip = g.data_offset.checked_sub(pos).ok_or_else(|| {
                cannot(
                    rec,
                    to,
                    format!("global `{}` overlaps the previous one", g.name),
                )
            })?;
            let skipped = io::copy(&mut (&mut r).take(skip), &mut io::sink())
                .map_err(|e| source_err(PartRole::Globals, e))?;
            let header = match to {
                Layout::Native => globals::native_header(&g.name, g.size),
                Layout::KernelNamed => globals::kernel_named_header(&g.name, g.size),
            }
            .map_err(|m| cannot(rec, to, m))?;
            sink.write(&header)?;
            let copied = sink.copy_from(&mut r, Some(g.size), PartRole::Globals)?;
            if skipped != skip || copied != g.size {
                return Err(FormatError::Invalid {
                    path: sink.path.clone(),
                    message: format!(
                        "the globals part ends inside global `{}` (offset {}, {} bytes)",
                        g.name, g.data_offset, g.size
                    ),
                });
            }
            pos = g.data_offset + g.size;
        }
    }
    sink.finish()?;
    Ok(())
}

fn to_native(rec: &Recording, dir: &Path) -> Result<Vec<(PathBuf, What)>> {
    let to = Layout::Native;
    let base = rec.arena.base.ok_or_else(|| {
        cannot(
            rec,
            to,
            "it has no arena address (LLVM 16-17 did not record BumpAllocVAStart) and the native layout needs VAllocAddr".into(),
        )
    })?;
    let l = &rec.launch;
    let stem = hashes::native_stem(&rec.kernel, l.num_teams, l.num_threads, l.shared_memory);
    let json = native_descriptor(rec, base);
    let mut plan = vec![(
        dir.join(format!("{stem}.json")),
        What::Bytes(json.into_bytes()),
    )];
    for role in PartRole::ALL {
        let path = dir.join(format!("{stem}{}", native::extension(role)));
        if role == PartRole::Globals {
            plan.push((path, What::Globals(role)));
        } else if rec.part(role).is_some() {
            plan.push((path, What::Part(role)));
        }
    }
    Ok(plan)
}

fn to_kernel_named(rec: &Recording, dir: &Path) -> Result<Vec<(PathBuf, What)>> {
    let to = Layout::KernelNamed;
    if rec.launch.shared_memory != 0 {
        return Err(cannot(
            rec,
            to,
            format!(
                "SharedMemorySize is {}; LLVM 18-22 descriptors have no key for dynamic shared memory, so a replay would launch without it",
                rec.launch.shared_memory
            ),
        ));
    }
    let base = rec
        .arena
        .base
        .ok_or_else(|| cannot(rec, to, "it has no arena address (VAllocAddr)".into()))?;
    let stem = checked_stem(&rec.kernel)?;
    let json = kernel_named_descriptor(rec, base);
    let mut plan = vec![(
        dir.join(format!("{stem}.json")),
        What::Bytes(json.into_bytes()),
    )];
    for role in PartRole::ALL {
        if rec.part(role).is_none() {
            continue;
        }
        let path = dir.join(format!("{stem}{}", kernel_named::extension(role)));
        if role == PartRole::Globals {
            plan.push((path, What::Globals(role)));
        } else {
            plan.push((path, What::Part(role)));
        }
    }
    Ok(plan)
}

fn join<T: ToString>(v: impl IntoIterator<Item = T>) -> String {
    v.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The native descriptor, byte-identical to what to-upstream-layout.py
/// writes for the same recording.
pub fn native_descriptor(rec: &Recording, base: u64) -> String {
    let l = &rec.launch;
    let valloc = rec
        .arena
        .reserved
        .unwrap_or(DEFAULT_VALLOC_SIZE)
        .max(rec.arena.size);
    let teams = l.teams_limits.unwrap_or([0, 0]);
    let threads = l.threads_limits.unwrap_or([1, l.num_threads.max(1)]);
    format!(
        "{{\"Name\":{},\"NumArgs\":{},\"NumTeams\":{},\"NumThreads\":{},\"SharedMemorySize\":{},\"LoopTripCount\":{},\"DeviceId\":{},\"VAllocAddr\":{},\"VAllocSize\":{},\"TeamsLimits\":[{},{}],\"ThreadsLimits\":[{},{}],\"ArgPtrs\":[{}],\"ArgOffsets\":[{}]}}",
        python_quote(&rec.kernel),
        rec.args.len(),
        l.num_teams,
        l.num_threads,
        l.shared_memory,
        l.loop_trip_count,
        rec.device_id,
        base,
        valloc,
        teams[0],
        teams[1],
        threads[0],
        threads[1],
        join(rec.args.iter().map(|a| *a as i64)),
        join(&rec.arg_offsets),
    )
}

/// The LLVM 18-22 descriptor as `llvm::json` prints it (sorted keys).
pub fn kernel_named_descriptor(rec: &Recording, base: u64) -> String {
    let l = &rec.launch;
    format!(
        "{{\"ArgOffsets\":[{}],\"ArgPtrs\":[{}],\"BumpAllocVAStart\":{},\"DeviceId\":{},\"DeviceMemorySize\":{},\"LoopTripCount\":{},\"Name\":{},\"NumArgs\":{},\"NumTeamsClause\":{},\"ThreadLimitClause\":{}}}",
        join(&rec.arg_offsets),
        join(rec.args.iter().map(|a| *a as i64)),
        base,
        rec.device_id,
        rec.arena.size,
        l.loop_trip_count,
        llvm_quote(&rec.kernel),
        rec.args.len(),
        l.num_teams,
        l.num_threads,
    )
}

/// A JSON string as Python's `json.dumps` (ensure_ascii) writes it.
pub fn python_quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '\u{8}' => o.push_str("\\b"),
            '\u{c}' => o.push_str("\\f"),
            ' '..='~' => o.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    o.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    o.push('"');
    o
}

/// A JSON string as `llvm::json` prints it (only `"`, `\` and control
/// characters escaped; UTF-8 kept).
pub fn llvm_quote(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\t' => o.push_str("\\t"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}
