//! Recovery metadata beside the packs (`DIR/meta/`): one file per recording
//! (manifest, label, source, import time, tags) and one chunk list per part,
//! so that `repair` can rebuild the index from the pack files. Formats and
//! when each file is written: spec/STORE.md, "Recovery metadata".

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rrstore_format::RecordingId;
use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use crate::index::{hash32, u};
use crate::layout::{self, META_PARTS, META_RECORDINGS};

const PARTS_MAGIC: &[u8; 8] = b"RRSPARTS";
const RECORDING_MAGIC: &[u8; 8] = b"RRSRMETA";
const VERSION: u32 = 1;
const PARTS_HEAD: usize = 8 + 4 + 4 + 32 + 8 + 8;

/// What a recording's metadata file holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecordingMeta {
    /// The `manifests.manifest` bytes (MessagePack of the `Recording`).
    pub manifest: Vec<u8>,
    pub label: String,
    pub source: String,
    pub imported_at: i64,
    pub tags: Vec<(String, String)>,
}

fn index_err(dir: &Path, context: &str) -> impl Fn(rusqlite::Error) -> StoreError {
    let path = dir.join(layout::INDEX_FILE);
    let context = context.to_string();
    move |source| StoreError::Index {
        path: path.clone(),
        context: context.clone(),
        source,
    }
}

/// Durability of what one command writes besides packs: the `meta/`
/// files, and the index commits of an import of several recordings.
///
/// `meta/` files: fsyncing each file and its directory as it was written
/// cost an import of 11 small recordings 100 extra fsyncs, each its own
/// journal commit; instead the files are written and renamed at once and
/// fsynced (files, then their directories up to the store's) when the
/// command is done with the store ([`MetaSync::flush`], also on drop): the
/// first fsync commits the journal transaction holding all of them, the
/// others find their changes committed. Not `syncfs`, which also waits for
/// every other process's dirty data on the file system (1.2 s for a small
/// import beside a large copy). Until then a power failure can lose them, never a process
/// crash (the renames are in the page cache): the same kind of window as the
/// one between an index commit and its metadata write (spec/STORE.md,
/// "Recovery metadata"). Removals stay durable at once.
///
/// Index commits: an import commits each recording with
/// `synchronous=NORMAL` ([`MetaSync::defer_index`]: atomic, consistent,
/// safe against a killed process) and the flush fsyncs the index's log
/// once, before the `meta/` files (spec/STORE.md, "Import durability").
#[derive(Debug)]
pub struct MetaSync {
    dir: PathBuf,
    /// Files renamed into place since the last flush.
    files: std::cell::RefCell<Vec<PathBuf>>,
    /// Index commits were made without syncing the log.
    index: std::cell::Cell<bool>,
}

impl MetaSync {
    /// For the store at `dir`.
    pub fn new(dir: &Path) -> Self {
        MetaSync {
            dir: dir.to_path_buf(),
            files: std::cell::RefCell::new(Vec::new()),
            index: std::cell::Cell::new(false),
        }
    }

    /// Whether files were written since the last flush.
    pub fn pending(&self) -> bool {
        !self.files.borrow().is_empty()
    }

    /// Index commits are being made without syncing the index's log: the
    /// next flush fsyncs it.
    pub fn defer_index(&self) {
        self.index.set(true);
    }

    /// Whether index commits wait for the next flush to be durable.
    pub fn index_deferred(&self) -> bool {
        self.index.get()
    }

    /// Make everything deferred since the last flush durable: the index's
    /// log first (one fsync), then every `meta/` file written and the
    /// directories holding them, so a recording's file is never durable
    /// before the commit that added it.
    pub fn flush(&self) -> Result<()> {
        if self.index.get() {
            sync_index_log(&self.dir)?;
            self.index.set(false);
        }
        let files = std::mem::take(&mut *self.files.borrow_mut());
        let mut dirs = std::collections::BTreeSet::new();
        for f in &files {
            match File::open(f) {
                Ok(file) => file.sync_data().map_err(|e| StoreError::io(f, e))?,
                // Removed since (an `rm` in the same command): nothing to keep.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io(f, e)),
            }
            // Its directory holds the rename; the ones above, directories
            // this command may have created.
            let mut d = f.parent();
            while let Some(p) = d {
                if !p.starts_with(&self.dir) || !dirs.insert(p.to_path_buf()) {
                    break;
                }
                d = p.parent();
            }
        }
        for d in dirs.iter().rev() {
            sync_dir(d)?;
        }
        Ok(())
    }

    /// `path` was renamed into place: fsynced at the next flush.
    fn written(&self, path: &Path) {
        self.files.borrow_mut().push(path.to_path_buf());
    }
}

/// fsync the index's log (`index.sqlite-wal`, none is fine) of the store at
/// `dir`: makes every commit made with `synchronous=NORMAL` durable.
pub(crate) fn sync_index_log(dir: &Path) -> Result<()> {
    let wal = dir.join(format!("{}-wal", layout::INDEX_FILE));
    match File::open(&wal) {
        Ok(f) => f.sync_all().map_err(|e| StoreError::io(&wal, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(&wal, e)),
    }
}

impl Drop for MetaSync {
    fn drop(&mut self) {
        // A command that returns early (an error) still syncs what it wrote.
        let _ = self.flush();
    }
}

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

/// fsync directory `dir`, so that a rename or unlink in it is durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(dir, e))
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

/// Recording metadata files whose recording the index does not list: how
/// many, and the first one's ID.
pub fn unaccounted(conn: &Connection, dir: &Path) -> Result<(u64, Option<String>)> {
    let mut stmt = conn
        .prepare_cached("SELECT 1 FROM recordings WHERE id_hex = ?1")
        .map_err(index_err(dir, "checking recordings against their metadata"))?;
    let mut n = 0;
    let mut first = None;
    for p in list(dir, META_RECORDINGS)? {
        let hex = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let known = stmt
            .exists([&hex])
            .map_err(index_err(dir, "checking recordings against their metadata"))?;
        if !known {
            n += 1;
            first.get_or_insert(hex);
        }
    }
    Ok((n, first))
}

impl crate::Store {
    /// gc's safety check: fail with [`StoreError::IndexIncomplete`] when a
    /// recording's metadata is in the store but the index does not list it
    /// (the index was lost or replaced: its data would look unreferenced).
    /// Runs under the index's write lock, so no import is between writing
    /// its metadata and committing.
    pub fn check_index_accounts_for_store(&mut self) -> Result<()> {
        let dir = self.dir().to_path_buf();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(index_err(&dir, "locking the index to check it"))?;
        let (missing, example) = unaccounted(&tx, &dir)?;
        drop(tx);
        if missing > 0 {
            return Err(StoreError::IndexIncomplete {
                dir,
                missing,
                example: example.unwrap_or_default(),
            });
        }
        Ok(())
    }
}

impl crate::Store {
    /// gc's sweep of `meta/parts/`: remove the chunk lists of parts no
    /// recording in the index names any more (`repair` reads only those a
    /// recording names; a part kept for an image or a saved output needs
    /// none). Each file is checked and removed while this process holds
    /// the index's write lock, so no import or pull can commit a recording
    /// that names the part in between; one that commits after writes the
    /// list again (it writes a missing one after its commit). Returns how
    /// many were (with `dry_run`: would be) removed.
    pub(crate) fn sweep_part_lists(&mut self, dry_run: bool) -> Result<u64> {
        let dir = self.dir().to_path_buf();
        let files = list(&dir, META_PARTS)?;
        if files.is_empty() {
            return Ok(0);
        }
        if dry_run {
            return sweep_unnamed(&self.conn, &dir, &files, true);
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(index_err(&dir, "gc: locking the index to sweep meta/parts"))?;
        let removed = sweep_unnamed(&tx, &dir, &files, false)?;
        // Nothing was written: ending it only releases the lock.
        tx.rollback().map_err(index_err(
            &dir,
            "gc: unlocking the index after sweeping meta/parts",
        ))?;
        Ok(removed)
    }
}

/// Of the part lists `files`, those whose part no recording in `conn`'s
/// index names: unlinked (directories fsynced after), or with `dry_run`
/// only counted. Returns how many.
fn sweep_unnamed(conn: &Connection, dir: &Path, files: &[PathBuf], dry_run: bool) -> Result<u64> {
    let ierr = index_err(dir, "gc: checking the parts' recovery chunk lists");
    let mut named = conn
        .prepare_cached("SELECT 1 FROM recording_parts WHERE part = ?1")
        .map_err(&ierr)?;
    let mut removed = 0;
    let mut dirs = std::collections::BTreeSet::new();
    for p in files {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        // A name that is not a part hash is not ours to judge.
        let Some(hash) = name.as_deref().and_then(rrstore_format::id::parse_hex32) else {
            continue;
        };
        if named.exists([&hash[..]]).map_err(&ierr)? {
            continue;
        }
        removed += 1;
        if dry_run {
            continue;
        }
        match std::fs::remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(StoreError::io(p, e)),
            _ => {}
        }
        if let Some(d) = p.parent() {
            dirs.insert(d.to_path_buf());
        }
    }
    for d in &dirs {
        sync_dir(d)?;
    }
    Ok(removed)
}
