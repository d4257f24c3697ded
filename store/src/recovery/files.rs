//! The recovery metadata files: a recording's (manifest, label, source,
//! import time, tags) and a part's chunk list, each written atomically with
//! a checksum trailer, read back, listed and removed (formats:
//! spec/STORE.md, "Recovery metadata").

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rrstore_format::RecordingId;
use rusqlite::{Connection, OptionalExtension};

use super::{index_err, sync_dir, MetaSync, RecordingMeta};
use crate::error::{Result, StoreError};
use crate::index::{hash32, u};
use crate::layout::{self, META_PARTS, META_RECORDINGS};

const PARTS_MAGIC: &[u8; 8] = b"RRSPARTS";
const RECORDING_MAGIC: &[u8; 8] = b"RRSRMETA";
const VERSION: u32 = 1;
const PARTS_HEAD: usize = 8 + 4 + 4 + 32 + 8 + 8;

/// Write `path` through a temporary file in its directory: fill, rename;
/// durable at `sync`'s next flush. `fill` gets a hasher fed with everything
/// written, whose digest is appended as the trailer, so a file a power
/// failure left incomplete under its name is found by its checksum
/// (spec/STORE.md, "Recovery metadata").
fn write_atomic(
    path: &Path,
    sync: &MetaSync,
    fill: impl FnOnce(&mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> Result<()>,
) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let file = File::create(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
    let mut out = BufWriter::with_capacity(1 << 16, file);
    let mut hasher = blake3::Hasher::new();
    let result = (|| {
        fill(&mut |b: &[u8]| {
            hasher.update(b);
            out.write_all(b)
        })?;
        out.write_all(hasher.finalize().as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| StoreError::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e))?;
        sync.written(path);
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Path of a part's chunk list.
pub fn part_path(dir: &Path, hash: &[u8; 32]) -> PathBuf {
    layout::meta_path(dir, META_PARTS, &rrstore_format::id::hex(hash))
}

/// Path of a recording's metadata file.
pub fn recording_path(dir: &Path, id: &RecordingId) -> PathBuf {
    layout::meta_path(dir, META_RECORDINGS, &id.to_hex())
}

/// Write the chunk list of `hash` from the index, unless a complete one
/// exists (it is content-addressed: one that passes its checksum is never
/// rewritten; one a power failure left short is). Streams `part_chunks`.
pub fn write_part(conn: &Connection, dir: &Path, hash: &[u8; 32], sync: &MetaSync) -> Result<()> {
    let path = part_path(dir, hash);
    if path.exists() && read_part(&path, hash, &mut |_, _| Ok(()))?.is_ok() {
        return Ok(());
    }
    let ierr = index_err(dir, "writing a part's recovery chunk list");
    let (len, nchunks): (i64, i64) = conn
        .prepare_cached("SELECT len, nchunks FROM parts WHERE hash = ?1")
        .and_then(|mut s| s.query_row([&hash[..]], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(&ierr)?;
    let mut stmt = conn
        .prepare_cached("SELECT chunk FROM part_chunks WHERE part = ?1 ORDER BY seq")
        .map_err(&ierr)?;
    write_atomic(&path, sync, |put| {
        let mut head = Vec::with_capacity(PARTS_HEAD);
        head.extend_from_slice(PARTS_MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes());
        head.extend_from_slice(hash);
        head.extend_from_slice(&u(len).to_le_bytes());
        head.extend_from_slice(&u(nchunks).to_le_bytes());
        put(&head).map_err(|e| StoreError::io(&path, e))?;
        let mut rows = stmt.query([&hash[..]]).map_err(&ierr)?;
        let mut n = 0i64;
        while let Some(row) = rows.next().map_err(&ierr)? {
            let chunk: Vec<u8> = row.get(0).map_err(&ierr)?;
            put(&hash32(chunk)).map_err(|e| StoreError::io(&path, e))?;
            n += 1;
        }
        if n != nchunks {
            return Err(StoreError::CorruptIndex {
                recording: format!("part {}", rrstore_format::id::hex(hash)),
                reason: format!("the index lists {n} of its {nchunks} chunks"),
            });
        }
        Ok(())
    })
}

/// Write (or rewrite) a recording's metadata file from the index, with the
/// chunk lists of its parts first.
pub fn write_recording(
    conn: &Connection,
    dir: &Path,
    id: &RecordingId,
    sync: &MetaSync,
) -> Result<()> {
    let ierr = index_err(dir, "writing a recording's recovery metadata");
    let parts: Vec<Vec<u8>> = conn
        .prepare_cached("SELECT part FROM recording_parts WHERE recording = ?1")
        .and_then(|mut s| s.query_map([&id.0[..]], |r| r.get(0))?.collect())
        .map_err(&ierr)?;
    for p in parts {
        write_part(conn, dir, &hash32(p), sync)?;
    }
    let row: Option<(String, String, i64)> = conn
        .prepare_cached("SELECT label, source, imported_at FROM recordings WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([&id.0[..]], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(&ierr)?;
    let Some((label, source, imported_at)) = row else {
        return Err(StoreError::NotFound(id.to_hex()));
    };
    let manifest: Vec<u8> = conn
        .prepare_cached("SELECT manifest FROM manifests WHERE id = ?1")
        .and_then(|mut s| s.query_row([&id.0[..]], |r| r.get(0)))
        .map_err(&ierr)?;
    let tags: Vec<(String, String)> = conn
        .prepare_cached("SELECT key, value FROM tags WHERE recording = ?1 ORDER BY key")
        .and_then(|mut s| {
            s.query_map([&id.0[..]], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(&ierr)?;
    let meta = RecordingMeta {
        manifest,
        label,
        source,
        imported_at,
        tags,
    };
    let body = rmp_serde::to_vec_named(&meta).map_err(|e| StoreError::Encode {
        what: format!("the recovery metadata of recording {id}"),
        reason: e.to_string(),
    })?;
    let path = recording_path(dir, id);
    write_atomic(&path, sync, |put| {
        put(RECORDING_MAGIC)
            .and_then(|_| put(&VERSION.to_le_bytes()))
            .and_then(|_| put(&body))
            .map_err(|e| StoreError::io(&path, e))
    })
}

/// Remove a recording's metadata file (after `rm` committed), durably: a
/// file that came back after a crash would make gc refuse to run (its
/// recording looks lost from the index).
pub fn remove_recording(dir: &Path, id: &RecordingId) -> Result<()> {
    remove_durable(&recording_path(dir, id))
}

/// Unlink `path` (gone already is fine) and fsync its directory.
fn remove_durable(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(path, e)),
        Ok(()) => sync_dir(path.parent().unwrap_or(Path::new("."))),
    }
}

/// Read and check a recording's metadata file; the error says what is
/// wrong with it.
pub fn read_recording(path: &Path) -> std::result::Result<RecordingMeta, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.len() < 12 + 32 || &bytes[..8] != RECORDING_MAGIC {
        return Err("not a recording metadata file (bad magic or too short)".into());
    }
    let (body, trailer) = bytes.split_at(bytes.len() - 32);
    if blake3::hash(body).as_bytes() != trailer {
        return Err("it fails its checksum (damaged)".into());
    }
    let version = u32::from_le_bytes([body[8], body[9], body[10], body[11]]);
    if version != VERSION {
        return Err(format!("unknown metadata version {version}"));
    }
    rmp_serde::from_slice(&body[12..]).map_err(|e| format!("it does not decode: {e}"))
}

/// Read and check a part's chunk list: verify its checksum (one streaming
/// pass), then hand each chunk hash to `each` in order (a second pass), so
/// memory stays bounded for any part size. Returns (part length, chunks).
pub fn read_part(
    path: &Path,
    hash: &[u8; 32],
    each: &mut dyn FnMut(u64, [u8; 32]) -> Result<()>,
) -> Result<std::result::Result<(u64, u64), String>> {
    let bad = |why: &str| Ok(Err(why.to_string()));
    let open = || File::open(path).map(|f| BufReader::with_capacity(1 << 16, f));
    let size = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return bad("its chunk list is missing")
        }
        Err(e) => return Err(StoreError::io(path, e)),
    };
    if size < (PARTS_HEAD + 32) as u64 || !(size - PARTS_HEAD as u64 - 32).is_multiple_of(32) {
        return bad("its chunk list has a wrong length");
    }
    let io = |e| StoreError::io(path, e);
    let mut r = open().map_err(io)?;
    let mut hasher = blake3::Hasher::new();
    let mut left = size - 32;
    let mut buf = vec![0u8; 1 << 16];
    while left > 0 {
        let n = (left as usize).min(buf.len());
        r.read_exact(&mut buf[..n]).map_err(io)?;
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    let mut trailer = [0u8; 32];
    r.read_exact(&mut trailer).map_err(io)?;
    if hasher.finalize().as_bytes() != &trailer {
        return bad("its chunk list fails its checksum (damaged)");
    }
    let mut r = open().map_err(io)?;
    let mut head = [0u8; PARTS_HEAD];
    r.read_exact(&mut head).map_err(io)?;
    if &head[..8] != PARTS_MAGIC || head[16..48] != hash[..] {
        return bad("its chunk list is for another part");
    }
    let le = |b: &[u8]| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_le_bytes(a)
    };
    let len = le(&head[48..56]);
    let nchunks = le(&head[56..64]);
    if nchunks != (size - PARTS_HEAD as u64 - 32) / 32 {
        return bad("its chunk list's count does not match its length");
    }
    for seq in 0..nchunks {
        let mut h = [0u8; 32];
        r.read_exact(&mut h).map_err(io)?;
        each(seq, h)?;
    }
    Ok(Ok((len, nchunks)))
}

/// Every file under `meta/<kind>/` (temporary files skipped).
pub fn list(dir: &Path, kind: &str) -> Result<Vec<PathBuf>> {
    let root = dir.join(layout::META_DIR).join(kind);
    let mut out = Vec::new();
    let fans = match std::fs::read_dir(&root) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(StoreError::io(&root, e)),
    };
    for fan in fans {
        let fan = fan.map_err(|e| StoreError::io(&root, e))?.path();
        if !fan.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&fan).map_err(|e| StoreError::io(&fan, e))? {
            let p = f.map_err(|e| StoreError::io(&fan, e))?.path();
            let hidden = p
                .file_name()
                .map(|n| n.to_string_lossy().starts_with('.'))
                .unwrap_or(true);
            if !hidden && p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Write the metadata of every recording in the index (adopting a store
/// created before recovery metadata existed).
pub fn write_all(conn: &Connection, dir: &Path, sync: &MetaSync) -> Result<()> {
    let ids: Vec<Vec<u8>> = conn
        .prepare("SELECT id FROM recordings")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(index_err(dir, "listing recordings"))?;
    for id in ids {
        write_recording(conn, dir, &RecordingId(hash32(id)), sync)?;
    }
    sync.flush()
}
