//! `repair`: rebuild a store's index from its pack files and its recovery
//! metadata (`meta/`), after the index was lost, emptied, truncated or
//! damaged. The old index is moved aside, never deleted. Steps and what
//! cannot be recovered: spec/STORE.md, "Repair".

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rrstore_format::{Recording, RecordingId};
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::index::{self, i};
use crate::lock::{LockFile, Mode};
use crate::pack::reader::{self, ChunkLoc, PackFiles};
use crate::pack::{check_header, PACK_HEADER_LEN};
use crate::recovery::{self, RecordingMeta};
use crate::{layout, marker, opening, Store};

/// What a repair did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RepairReport {
    /// Where the old index (and its -wal, -shm) went.
    pub moved_aside: Vec<PathBuf>,
    pub packs: u64,
    /// Good chunk entries indexed (each distinct chunk once).
    pub chunks: u64,
    /// Entries whose bytes failed their checks (not indexed).
    pub bad_chunks: u64,
    /// Damaged pack headers and packs whose walk stopped early.
    pub pack_problems: Vec<String>,
    /// Recordings restored, with their label, source, import time and tags.
    pub recordings: u64,
    /// Recordings whose metadata is there but whose data is not intact
    /// (their metadata files were moved to `meta/lost/`).
    pub lost: Vec<LostRecording>,
}

/// A recording `repair` could not restore.
#[derive(Clone, Debug, Serialize)]
pub struct LostRecording {
    pub id: String,
    pub kernel: String,
    pub reason: String,
    /// Where its metadata file is now.
    pub metadata: PathBuf,
}

impl Store {
    /// Rebuild the index of the store at `dir` from its packs and recovery
    /// metadata. Holds `gc.lock`; nothing else may write the store
    /// meanwhile. The old index is moved aside.
    pub fn repair(dir: &Path) -> Result<RepairReport> {
        let found = marker::read(dir)?;
        let has_meta = dir.join(layout::META_DIR).is_dir();
        if found.is_none() && !has_meta && !opening::packs_present(dir) {
            return Err(StoreError::NotAStore {
                path: dir.to_path_buf(),
                reason: "it has no store marker (config), no recovery metadata and no pack files, so there is nothing to repair".into(),
            });
        }
        let _gc = LockFile::acquire(&dir.join(layout::GC_LOCK), Mode::Exclusive, false)?
            .ok_or_else(|| {
                StoreError::Busy("a gc or another repair is running on this store".into())
            })?;
        let mut report = RepairReport {
            moved_aside: move_index_aside(dir)?,
            ..Default::default()
        };
        let index_path = dir.join(layout::INDEX_FILE);
        let mut conn = index::open(&index_path, true)?;
        let id = match found {
            Some(m) => m.id,
            None => marker::new_id(),
        };
        index::set_store_id(&conn, &index_path, id)?;
        if found.is_none() {
            marker::create(dir, id)?;
        }
        let ierr = |context| index::err(&index_path, context);
        let tx = conn
            .transaction()
            .map_err(ierr("starting the repair transaction"))?;
        index_packs(&tx, dir, &mut report)?;
        let mut lost = Vec::new();
        for path in recovery::list(dir, layout::META_RECORDINGS)? {
            match restore_recording(&tx, dir, &path)? {
                Ok(()) => report.recordings += 1,
                Err((id, kernel, reason)) => lost.push((path, id, kernel, reason)),
            }
        }
        tx.commit().map_err(ierr("committing the rebuilt index"))?;
        // Lost recordings' metadata is kept, out of the way of gc's check.
        for (path, id, kernel, reason) in lost {
            let to = dir.join(layout::META_DIR).join(layout::META_LOST).join(&id);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| StoreError::io(parent, e))?;
            }
            std::fs::rename(&path, &to).map_err(|e| StoreError::io(&path, e))?;
            report.lost.push(LostRecording {
                id,
                kernel,
                reason,
                metadata: to,
            });
        }
        Ok(report)
    }
}

/// Rename `index.sqlite` (with `-wal`, `-shm`) to `index.sqlite.bad-<time>`
/// (`-<n>` added if taken).
fn move_index_aside(dir: &Path) -> Result<Vec<PathBuf>> {
    let index = dir.join(layout::INDEX_FILE);
    let present: Vec<&str> = ["", "-wal", "-shm"]
        .into_iter()
        .filter(|sfx| std::fs::symlink_metadata(with_suffix(&index, sfx)).is_ok())
        .collect();
    if present.is_empty() {
        return Ok(Vec::new());
    }
    let stem = format!("{}.bad-{}", layout::INDEX_FILE, crate::now_unix());
    let mut base = dir.join(&stem);
    let mut n = 1;
    while ["", "-wal", "-shm"]
        .iter()
        .any(|sfx| std::fs::symlink_metadata(with_suffix(&base, sfx)).is_ok())
    {
        base = dir.join(format!("{stem}-{n}"));
        n += 1;
    }
    let mut moved = Vec::new();
    for sfx in present {
        let (from, to) = (with_suffix(&index, sfx), with_suffix(&base, sfx));
        std::fs::rename(&from, &to).map_err(|e| StoreError::io(&from, e))?;
        moved.push(to);
    }
    crate::pack::writer::sync_dir(dir)?;
    Ok(moved)
}

fn with_suffix(p: &Path, sfx: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(sfx);
    PathBuf::from(s)
}

/// Every pack file, sorted by path.
fn pack_files(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let root = dir.join(layout::PACKS_DIR);
    let mut out = Vec::new();
    let fans = match std::fs::read_dir(&root) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(StoreError::io(&root, e)),
    };
    for fan in fans {
        let fan = fan.map_err(|e| StoreError::io(&root, e))?.path();
        let Ok(files) = std::fs::read_dir(&fan) else {
            continue;
        };
        for f in files {
            let p = f.map_err(|e| StoreError::io(&fan, e))?.path();
            if p.extension().is_some_and(|e| e == "pack") {
                if let Some(stem) = p.file_stem() {
                    out.push((stem.to_string_lossy().into_owned(), p));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Index every good chunk entry of every pack (decoded and re-hashed).
fn index_packs(tx: &rusqlite::Transaction, dir: &Path, report: &mut RepairReport) -> Result<()> {
    let ierr = |source| StoreError::Index {
        path: dir.join(layout::INDEX_FILE),
        context: "repair: indexing pack entries".into(),
        source,
    };
    let mut files = PackFiles::new(dir);
    let mut buf = Vec::new();
    for (name, path) in pack_files(dir)? {
        report.packs += 1;
        let mut head = [0u8; PACK_HEADER_LEN as usize];
        let read = std::fs::File::open(&path).and_then(|f| {
            use std::os::unix::fs::FileExt;
            f.read_exact_at(&mut head, 0)
        });
        if let Err(why) = read
            .map_err(|e| e.to_string())
            .and_then(|()| check_header(&head, &name))
        {
            report
                .pack_problems
                .push(format!("pack {}: {why}", path.display()));
        }
        let (entries, stop) = reader::scan(&path).map_err(|e| StoreError::io(&path, e))?;
        if let Some((off, why)) = stop {
            report.pack_problems.push(format!(
                "pack {}: no readable entry from byte {off} on ({why})",
                path.display()
            ));
        }
        let Some(last) = entries.last() else {
            continue;
        };
        let size = last.offset + reader_entry_len(last.header.stored_len);
        tx.execute(
            "INSERT INTO packs (name, size) VALUES (?1, ?2)",
            rusqlite::params![name, i(size)],
        )
        .map_err(ierr)?;
        let pack_id = tx.last_insert_rowid();
        let mut ins = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO chunks (hash, pack, offset, stored_len, len, codec) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(ierr)?;
        for e in &entries {
            let loc = ChunkLoc {
                hash: e.header.hash,
                pack: name.clone(),
                offset: e.offset,
                stored_len: e.header.stored_len,
                len: e.header.len,
                codec: e.header.codec,
            };
            buf.resize(loc.len as usize, 0);
            if files.read_into(&loc, &mut buf).is_err() {
                report.bad_chunks += 1;
                continue;
            }
            let added = ins
                .execute(rusqlite::params![
                    &loc.hash[..],
                    pack_id,
                    i(loc.offset),
                    loc.stored_len,
                    loc.len,
                    loc.codec as u8
                ])
                .map_err(ierr)?;
            report.chunks += added as u64;
        }
    }
    Ok(())
}

fn reader_entry_len(stored_len: u32) -> u64 {
    crate::pack::ENTRY_HEADER_LEN as u64 + stored_len as u64
}

/// Why a recording was not restored: (ID, kernel, reason).
type Lost = (String, String, String);

/// Restore one recording from its metadata file if every part's chunk list
/// is intact and names only indexed chunks covering the part.
fn restore_recording(
    tx: &rusqlite::Transaction,
    dir: &Path,
    path: &Path,
) -> Result<std::result::Result<(), Lost>> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lost = |kernel: &str, why: String| Ok(Err((name.clone(), kernel.to_string(), why)));
    let meta: RecordingMeta = match recovery::read_recording(path) {
        Ok(m) => m,
        Err(why) => return lost("?", format!("its metadata file is unusable: {why}")),
    };
    let rec: Recording = match rmp_serde::from_slice(&meta.manifest) {
        Ok(r) => r,
        Err(e) => return lost("?", format!("its manifest does not decode: {e}")),
    };
    let id: RecordingId = rec.id();
    if id.to_hex() != name {
        return lost(
            &rec.kernel,
            format!("its manifest hashes to {id}, not to its file name"),
        );
    }
    let ierr = |source| StoreError::Index {
        path: dir.join(layout::INDEX_FILE),
        context: "repair: restoring a recording".into(),
        source,
    };
    let mut done: HashSet<[u8; 32]> = HashSet::new();
    for part in &rec.parts {
        if !done.insert(part.blake3) {
            continue;
        }
        let exists = tx
            .prepare_cached("SELECT 1 FROM parts WHERE hash = ?1")
            .and_then(|mut s| s.exists([&part.blake3[..]]))
            .map_err(ierr)?;
        if exists {
            continue;
        }
        if let Err(why) = restore_part(tx, dir, &part.blake3, part.len)? {
            tx.execute(
                "DELETE FROM part_chunks WHERE part = ?1",
                [&part.blake3[..]],
            )
            .map_err(ierr)?;
            return lost(&rec.kernel, format!("its {} part: {why}", part.role));
        }
    }
    let present = tx
        .prepare_cached("SELECT 1 FROM recordings WHERE id = ?1")
        .and_then(|mut s| s.exists([&id.0[..]]))
        .map_err(ierr)?;
    if !present {
        crate::index::recording_rows::insert_recording_rows(
            tx,
            &id,
            &rec,
            &meta.manifest,
            &meta.source,
            &meta.label,
            meta.imported_at,
        )
        .map_err(ierr)?;
        for (k, v) in &meta.tags {
            tx.execute(
                "INSERT OR REPLACE INTO tags (recording, key, value) VALUES (?1, ?2, ?3)",
                rusqlite::params![&id.0[..], k, v],
            )
            .map_err(ierr)?;
        }
    }
    Ok(Ok(()))
}

/// Insert a part's rows from its chunk list; `Err(why)` when the list is
/// damaged or names a chunk the packs do not hold intact.
fn restore_part(
    tx: &rusqlite::Transaction,
    dir: &Path,
    hash: &[u8; 32],
    len: u64,
) -> Result<std::result::Result<(), String>> {
    let ierr = |source| StoreError::Index {
        path: dir.join(layout::INDEX_FILE),
        context: "repair: restoring a part".into(),
        source,
    };
    let mut chunk_len = tx
        .prepare_cached("SELECT len FROM chunks WHERE hash = ?1")
        .map_err(ierr)?;
    let mut pc_ins = tx
        .prepare_cached("INSERT OR IGNORE INTO part_chunks (part, seq, chunk) VALUES (?1, ?2, ?3)")
        .map_err(ierr)?;
    let mut covered = 0u64;
    let mut missing: Option<(u64, [u8; 32])> = None;
    let listed = recovery::read_part(&recovery::part_path(dir, hash), hash, &mut |seq, c| {
        use rusqlite::OptionalExtension;
        let l: Option<i64> = chunk_len
            .query_row([&c[..]], |r| r.get(0))
            .optional()
            .map_err(ierr)?;
        match l {
            Some(l) => covered += l as u64,
            None => {
                missing.get_or_insert((covered, c));
            }
        }
        pc_ins
            .execute(rusqlite::params![&hash[..], seq as i64, &c[..]])
            .map_err(ierr)?;
        Ok(())
    })?;
    let (listed_len, nchunks) = match listed {
        Ok(v) => v,
        Err(why) => return Ok(Err(why)),
    };
    if let Some((at, c)) = missing {
        return Ok(Err(format!(
            "chunk {} (from byte {at}) is in no pack, or not intact",
            rrstore_format::id::hex(&c)
        )));
    }
    if listed_len != len || covered != len {
        return Ok(Err(format!(
            "its chunks cover {covered} bytes, the part has {len}"
        )));
    }
    tx.execute(
        "INSERT OR IGNORE INTO parts (hash, len, nchunks) VALUES (?1, ?2, ?3)",
        rusqlite::params![&hash[..], i(len), i(nchunks)],
    )
    .map_err(ierr)?;
    Ok(Ok(()))
}
