//! Importing a recording: stream each part that the store does not already
//! hold through content-defined chunking, look every chunk up, compress and
//! append only new ones, then commit the recording in one index transaction.
//!
//! Pipeline ([`rrstore_format::archive::scan`] on a worker pool): each part
//! is read once, in 1 MiB blocks, by the workers (by offset, for plain files)
//! or the calling thread (other sources); the calling thread looks chunks up
//! in the index; workers cut the blocks, hash the chunks and the part (BLAKE3
//! subtrees of the blocks, merged), compress new chunks with a zstd context
//! each and append them to this process's pack. A recording loaded without
//! part hashes ([`Store::import_unhashed`]) gets them from that same pass;
//! its ID, known only then, is checked and committed last. Memory is bounded
//! by the blocks in flight. `.rra` archives chunked like the store are
//! copied chunk by chunk as stored ([`Store::import_archive`]): nothing is
//! recompressed or re-chunked. Ordering and crash safety: spec/STORE.md.

use std::collections::{HashSet, VecDeque};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use rrstore_format::archive::pool::{self, Pool};
use rrstore_format::archive::scan::{part_scanner, Span};
use rrstore_format::chunk::{ChunkHash, Codec};
use rrstore_format::{PartInfo, PartSource, Recording, RecordingId};
use rusqlite::{OptionalExtension, TransactionBehavior};
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::import_heal::{chunk_stored, lookup_err, Stored};
use crate::index::i;
use crate::pack::writer::PackWriter;
use crate::pack::{EntryHeader, ENTRY_HEADER_LEN, PACK_TARGET_SIZE};
use crate::Store;

/// Caller-supplied metadata for an import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Free-form label (program, run).
    pub label: String,
    /// Where the recording came from (path shown by `ls --json`, `show`).
    pub source: String,
}

/// What one import did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ImportReport {
    pub id: String,
    pub kernel: String,
    /// The recording was already in the store; nothing was added.
    pub present: bool,
    /// Uncompressed bytes of the recording (parts + descriptor).
    pub logical_bytes: u64,
    /// Bytes streamed through the chunker (parts the store did not hold).
    pub chunked_bytes: u64,
    /// Uncompressed bytes of chunks new to the store.
    pub new_bytes: u64,
    /// Bytes appended to pack files (entry headers included).
    pub stored_bytes: u64,
    pub chunks: u64,
    pub new_chunks: u64,
    /// Chunks the index listed but whose pack could no longer deliver
    /// them, stored again by this import (the recording may be `present`).
    pub healed_chunks: u64,
}

/// A chunk written to a pack in this attempt, not yet committed.
pub(crate) struct NewChunk {
    pub(crate) hash: ChunkHash,
    pub(crate) pack: String,
    pub(crate) offset: u64,
    pub(crate) stored_len: u32,
    pub(crate) len: u32,
    pub(crate) codec: Codec,
}

pub(crate) struct NewPart {
    pub(crate) hash: [u8; 32],
    pub(crate) len: u64,
    pub(crate) chunks: Vec<ChunkHash>,
}

#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) new_parts: Vec<NewPart>,
    pub(crate) reused_parts: Vec<[u8; 32]>,
    pub(crate) reused_chunks: Vec<ChunkHash>,
    pub(crate) new_chunks: Vec<NewChunk>,
    /// Hashes written in this attempt (dedup within the recording).
    pub(crate) written: HashSet<ChunkHash>,
    /// Chunks the index lists in a pack that cannot deliver them: written
    /// again, their rows repointed at commit.
    pub(crate) healed: HashSet<ChunkHash>,
    /// Pack file sizes seen in this attempt (`import_heal`).
    pub(crate) pack_sizes: crate::import_heal::PackSizes,
}

pub(crate) enum Attempt {
    Done(ImportReport),
    /// gc removed something this attempt reused: start over.
    Retry,
}

impl ImportReport {
    /// The recording turned out to be in the store already (another
    /// importer committed it first): nothing of this attempt was added.
    fn already_present(mut self) -> ImportReport {
        self.present = true;
        if self.healed_chunks > 0 {
            return self;
        }
        self.new_bytes = 0;
        self.stored_bytes = 0;
        self.new_chunks = 0;
        self
    }
}

impl Attempt {
    /// The outcome of `sync_and_commit` for `report`: committed, found
    /// already present, or to be retried after gc.
    pub(crate) fn after_commit(committed: Option<bool>, report: ImportReport) -> Attempt {
        match committed {
            Some(true) => Attempt::Done(report),
            Some(false) => Attempt::Done(report.already_present()),
            None => Attempt::Retry,
        }
    }
}

/// Pack writers shared with the pool's workers during one import attempt.
pub(crate) type Writers = Arc<Mutex<Vec<PackWriter>>>;

/// How the importer treats the recording's part hashes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hashes {
    /// Known: whole parts the store holds are skipped unread; chunked parts
    /// are checked against them.
    Known,
    /// Unknown (only lengths): every part is chunked, its hash is taken from
    /// that pass; parts the store holds cost a read but write nothing.
    Fill,
}

impl Store {
    /// Import one recording whose part bytes come from `src`. `progress` is
    /// called with the number of bytes read as they are read.
    pub fn import(
        &mut self,
        rec: &Recording,
        src: &mut dyn PartSource,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        let mut rec = rec.clone();
        self.import_with(&mut rec, Hashes::Known, src, opts, progress)
    }

    /// [`Store::import`] for a recording whose parts' blake3 are not known
    /// yet (only their lengths: `rrstore_format::llvm::load_unhashed`): each
    /// part is read once, its hash taken from the chunking pass and stored
    /// into `rec`, and the ID is computed and looked up once all parts are
    /// hashed. A part whose length differs from `rec`'s fails the import
    /// (the file changed after it was loaded).
    pub fn import_unhashed(
        &mut self,
        rec: &mut Recording,
        src: &mut dyn PartSource,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        self.import_with(rec, Hashes::Fill, src, opts, progress)
    }

    fn import_with(
        &mut self,
        rec: &mut Recording,
        mut hashes: Hashes,
        src: &mut dyn PartSource,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        for _ in 0..8 {
            let writers = self.share_writers();
            let attempt = self.import_attempt(rec, hashes, src, opts, progress, &writers);
            self.unshare_writers(writers);
            // After one attempt every part hash is known.
            hashes = Hashes::Known;
            match attempt? {
                Attempt::Done(r) => return self.with_recovery(r),
                Attempt::Retry => continue,
            }
        }
        Err(StoreError::Busy(format!(
            "recording {}: gc kept removing chunks this import reused",
            rec.id()
        )))
    }

    /// After a committed (or present) recording: write its recovery
    /// metadata unless it is there (spec/STORE.md, "Recovery metadata").
    /// Written after the commit, so a killed import never leaves metadata
    /// of a recording the index does not hold.
    pub(crate) fn with_recovery(&self, report: ImportReport) -> Result<ImportReport> {
        let Ok(id) = report.id.parse::<RecordingId>() else {
            return Ok(report);
        };
        if !crate::recovery::recording_path(&self.dir, &id).exists() {
            crate::recovery::write_recording(&self.conn, &self.dir, &id)?;
        }
        Ok(report)
    }

    /// Lend this process's pack writers to the workers of one attempt.
    pub(crate) fn share_writers(&mut self) -> Writers {
        Arc::new(Mutex::new(std::mem::take(&mut self.writers)))
    }

    /// Take the pack writers back once the attempt's workers are done.
    pub(crate) fn unshare_writers(&mut self, writers: Writers) {
        self.writers = Arc::try_unwrap(writers)
            .ok()
            .and_then(|m| m.into_inner().ok())
            .unwrap_or_default();
    }

    /// Make the packs durable, then commit the plan (see [`Store::commit`]);
    /// afterwards keep only the current writer.
    pub(crate) fn sync_and_commit(
        &mut self,
        rec: &Recording,
        id: &RecordingId,
        opts: &ImportOptions,
        plan: &Plan,
        epoch0: i64,
        writers: &Writers,
    ) -> Result<Option<bool>> {
        let Ok(mut ws) = writers.lock() else {
            return Err(StoreError::Invalid("an import worker panicked".into()));
        };
        for w in ws.iter_mut() {
            w.sync()?;
        }
        let pack_sizes: Vec<(String, u64)> =
            ws.iter().map(|w| (w.name().to_string(), w.len())).collect();
        drop(ws);
        let committed = self.commit(rec, id, opts, plan, epoch0, &pack_sizes)?;
        // Chunks committed now live in the index; a finished writer can be
        // closed (its lock released) once nothing uncommitted is in it.
        if let Ok(mut ws) = writers.lock() {
            let keep = ws.pop();
            ws.clear();
            ws.extend(keep);
        }
        Ok(committed)
    }

    pub(crate) fn gc_epoch(&self) -> Result<i64> {
        self.conn()
            .query_row("SELECT value FROM meta WHERE key = 'gc_epoch'", [], |r| {
                r.get(0)
            })
            .map_err(self.ierr("reading the gc epoch"))
    }

    pub(crate) fn part_exists(&self, hash: &[u8; 32]) -> Result<bool> {
        self.conn()
            .prepare_cached("SELECT 1 FROM parts WHERE hash = ?1")
            .and_then(|mut s| s.exists([&hash[..]]))
            .map_err(self.ierr("looking up a part"))
    }

    fn import_attempt(
        &mut self,
        rec: &mut Recording,
        hashes: Hashes,
        src: &mut dyn PartSource,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(u64),
        writers: &Writers,
    ) -> Result<Attempt> {
        let mut report = ImportReport {
            kernel: rec.kernel.clone(),
            logical_bytes: rec.logical_size(),
            ..Default::default()
        };
        let mut plan = Plan::default();
        if hashes == Hashes::Known {
            let id = rec.id();
            if self.contains(&id)? && self.recording_deliverable(rec, &mut plan.pack_sizes)? {
                report.id = id.to_hex();
                report.present = true;
                progress(rec.logical_size());
                return Ok(Attempt::Done(report));
            }
        }
        let epoch0 = self.gc_epoch()?;
        let level = self.zstd_level;
        let mut parts = rec.parts.clone();
        let shown = rec.clone();
        pool::with_pool(0, level, 6, |pool| -> Result<()> {
            for part in &mut parts {
                if hashes == Hashes::Known {
                    if plan.new_parts.iter().any(|p| p.hash == part.blake3) {
                        progress(part.len);
                        continue;
                    }
                    if self.part_exists(&part.blake3)?
                        && self.part_deliverable(&part.blake3, &mut plan.pack_sizes)?
                    {
                        plan.reused_parts.push(part.blake3);
                        progress(part.len);
                        continue;
                    }
                }
                let chunks = self.chunk_part(
                    &shown,
                    hashes,
                    part,
                    src,
                    pool,
                    writers,
                    &mut plan,
                    &mut report,
                    progress,
                )?;
                if hashes == Hashes::Fill {
                    // Now the hash is known: a part stored before (or twice
                    // in this recording) needs no new rows.
                    if plan.new_parts.iter().any(|p| p.hash == part.blake3) {
                        continue;
                    }
                    if self.part_exists(&part.blake3)? {
                        plan.reused_parts.push(part.blake3);
                        continue;
                    }
                }
                plan.new_parts.push(NewPart {
                    hash: part.blake3,
                    len: part.len,
                    chunks,
                });
            }
            Ok(())
        })?;
        rec.parts = parts;
        let id = rec.id();
        report.id = id.to_hex();
        progress(rec.descriptor.len() as u64);
        if hashes == Hashes::Fill && plan.healed.is_empty() && self.contains(&id)? {
            return Ok(Attempt::Done(report.already_present()));
        }
        let committed = self.sync_and_commit(rec, &id, opts, &plan, epoch0, writers)?;
        Ok(Attempt::after_commit(committed, report))
    }

    /// Stream one part through the pool; returns its chunk list. Checks the
    /// part's length (and, when known, its hash) against what was read, and
    /// fills in the hash when it was not known.
    #[allow(clippy::too_many_arguments)]
    fn chunk_part(
        &mut self,
        rec: &Recording,
        hashes: Hashes,
        part: &mut PartInfo,
        src: &mut dyn PartSource,
        pool: &Pool,
        writers: &Writers,
        plan: &mut Plan,
        report: &mut ImportReport,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Vec<ChunkHash>> {
        let role = part.role;
        let index_path = self.index_path();
        let dir = self.dir.clone();
        let mut lookup = self
            .conn
            .prepare_cached(crate::import_heal::CHUNK_END_SQL)
            .map_err(|source| StoreError::Index {
                path: index_path.clone(),
                context: "preparing the chunk lookup".into(),
                source,
            })?;
        let window = pool.threads() + 1;
        let mut scanner = part_scanner(src, role, self.chunk_params, window)
            .map_err(|source| StoreError::SourceRead { part: role, source })?;
        let mut list = Vec::new();
        let mut pending: VecDeque<Receiver<Result<Vec<NewChunk>>>> = VecDeque::new();
        let read_err = |source: std::io::Error| StoreError::SourceRead { part: role, source };
        loop {
            let Some(sb) = scanner.next(pool).map_err(read_err)? else {
                break;
            };
            let mut batch: Vec<Span> = Vec::new();
            let mut bytes = 0u64;
            for span in &sb.chunks {
                let hash = span.hash;
                bytes += span.len() as u64;
                list.push(hash);
                if plan.written.contains(&hash) {
                    continue;
                }
                let stored = chunk_stored(&mut lookup, &dir, &mut plan.pack_sizes, &hash)
                    .map_err(lookup_err(&index_path))?;
                match stored {
                    Stored::Yes => plan.reused_chunks.push(hash),
                    Stored::No | Stored::Lost => {
                        if stored == Stored::Lost {
                            plan.healed.insert(hash);
                            report.healed_chunks += 1;
                        }
                        plan.written.insert(hash);
                        batch.push(*span);
                    }
                }
            }
            report.chunks += sb.chunks.len() as u64;
            report.chunked_bytes += bytes;
            if !batch.is_empty() {
                let block = Arc::clone(&sb.block);
                let writers = Arc::clone(writers);
                let dir = dir.clone();
                let rx = pool
                    .submit(move |w| append_batch(w, &block, &batch, &writers, &dir))
                    .map_err(|_| worker_gone())?;
                pending.push_back(rx);
                while pending.len() > window {
                    if let Some(rx) = pending.pop_front() {
                        plan.new_chunks.extend(wait(&rx, report)?);
                    }
                }
            }
            progress(bytes);
        }
        while let Some(rx) = pending.pop_front() {
            plan.new_chunks.extend(wait(&rx, report)?);
        }
        let (total, hash) = scanner.finish();
        let changed = match hashes {
            Hashes::Known => total != part.len || hash != part.blake3,
            Hashes::Fill => total != part.len,
        };
        if changed {
            let said = match hashes {
                Hashes::Known => format!(
                    "{} bytes hashing to {}",
                    part.len,
                    rrstore_format::id::hex(&part.blake3)
                ),
                Hashes::Fill => format!("{} bytes", part.len),
            };
            return Err(StoreError::Invalid(format!(
                "recording {} ({}), {role} part: read {total} bytes hashing to {}, but it had {said} when it was loaded; was the file changed while importing?",
                rec.kernel,
                rec.stem,
                rrstore_format::id::hex(&hash),
            )));
        }
        part.blake3 = hash;
        Ok(list)
    }

    /// The index transaction. `Some(true)`: committed; `Some(false)`: another
    /// process committed the same recording first; `None`: retry.
    pub(crate) fn commit(
        &mut self,
        rec: &Recording,
        id: &RecordingId,
        opts: &ImportOptions,
        plan: &Plan,
        epoch0: i64,
        pack_sizes: &[(String, u64)],
    ) -> Result<Option<bool>> {
        let index_path = self.index_path();
        let err = |context: &'static str| {
            let p = index_path.clone();
            move |source| StoreError::Index {
                path: p.clone(),
                context: context.into(),
                source,
            }
        };
        let manifest = rmp_serde::to_vec_named(rec)
            .map_err(|e| StoreError::Invalid(format!("cannot encode the manifest: {e}")))?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err("starting the import transaction"))?;
        let epoch: i64 = tx
            .query_row("SELECT value FROM meta WHERE key = 'gc_epoch'", [], |r| {
                r.get(0)
            })
            .map_err(err("reading the gc epoch"))?;
        if epoch != epoch0 {
            // gc ran since we looked things up: everything we reuse must
            // still be there, else start over.
            let mut part_q = tx
                .prepare_cached("SELECT 1 FROM parts WHERE hash = ?1")
                .map_err(err("re-checking parts"))?;
            for h in &plan.reused_parts {
                if !part_q.exists([&h[..]]).map_err(err("re-checking parts"))? {
                    return Ok(None);
                }
            }
            let mut chunk_q = tx
                .prepare_cached("SELECT 1 FROM chunks WHERE hash = ?1")
                .map_err(err("re-checking chunks"))?;
            for h in &plan.reused_chunks {
                if !chunk_q
                    .exists([&h[..]])
                    .map_err(err("re-checking chunks"))?
                {
                    return Ok(None);
                }
            }
        }
        let present: Option<i64> = tx
            .query_row("SELECT 1 FROM recordings WHERE id = ?1", [&id.0[..]], |r| {
                r.get(0)
            })
            .optional()
            .map_err(err("looking up the recording"))?;
        // A recording already present only gets the rows of chunks stored
        // again because their pack could no longer deliver them.
        let present = present.is_some();
        if present && plan.healed.is_empty() {
            return Ok(Some(false));
        }
        {
            let mut pack_ins = tx
                .prepare_cached(
                    "INSERT INTO packs (name, size) VALUES (?1, ?2) \
                     ON CONFLICT (name) DO UPDATE SET size = max(size, excluded.size)",
                )
                .map_err(err("recording a pack"))?;
            let mut pack_id = tx
                .prepare_cached("SELECT id FROM packs WHERE name = ?1")
                .map_err(err("recording a pack"))?;
            let mut ids = std::collections::HashMap::new();
            for (name, size) in pack_sizes {
                if !plan.new_chunks.iter().any(|c| &c.pack == name) {
                    continue;
                }
                pack_ins
                    .execute(rusqlite::params![name, i(*size)])
                    .map_err(err("recording a pack"))?;
                let pid: i64 = pack_id
                    .query_row([name], |r| r.get(0))
                    .map_err(err("recording a pack"))?;
                ids.insert(name.clone(), pid);
            }
            let mut chunk_ins = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO chunks (hash, pack, offset, stored_len, len, codec) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(err("adding chunks"))?;
            let mut chunk_heal = tx
                .prepare_cached(
                    "INSERT INTO chunks (hash, pack, offset, stored_len, len, codec) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (hash) DO UPDATE SET \
                     pack = excluded.pack, offset = excluded.offset, \
                     stored_len = excluded.stored_len, len = excluded.len, codec = excluded.codec",
                )
                .map_err(err("repointing healed chunks"))?;
            for c in &plan.new_chunks {
                let healed = plan.healed.contains(&c.hash);
                if present && !healed {
                    continue;
                }
                let pid = ids.get(&c.pack).copied().unwrap_or(-1);
                let stmt = if healed {
                    &mut chunk_heal
                } else {
                    &mut chunk_ins
                };
                stmt.execute(rusqlite::params![
                    &c.hash[..],
                    pid,
                    i(c.offset),
                    c.stored_len,
                    c.len,
                    c.codec as u8
                ])
                .map_err(err("adding chunks"))?;
            }
            if present {
                drop((chunk_ins, chunk_heal, pack_ins, pack_id));
                tx.commit().map_err(err("committing the healed chunks"))?;
                return Ok(Some(false));
            }
            let mut part_ins = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO parts (hash, len, nchunks) VALUES (?1, ?2, ?3)",
                )
                .map_err(err("adding parts"))?;
            let mut pc_ins = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO part_chunks (part, seq, chunk) VALUES (?1, ?2, ?3)",
                )
                .map_err(err("adding parts"))?;
            for p in &plan.new_parts {
                part_ins
                    .execute(rusqlite::params![
                        &p.hash[..],
                        i(p.len),
                        p.chunks.len() as i64
                    ])
                    .map_err(err("adding parts"))?;
                for (seq, c) in p.chunks.iter().enumerate() {
                    pc_ins
                        .execute(rusqlite::params![&p.hash[..], seq as i64, &c[..]])
                        .map_err(err("adding parts"))?;
                }
            }
            insert_recording(&tx, id, rec, &manifest, &opts.source, &opts.label)
                .map_err(err("adding the recording"))?;
        }
        tx.commit().map_err(err("committing the import"))?;
        Ok(Some(true))
    }
}

pub(crate) fn worker_gone() -> StoreError {
    StoreError::Invalid("an import worker thread stopped unexpectedly (out of memory?)".into())
}

/// Take a batch's appended chunks back, counting them in the report.
fn wait(rx: &Receiver<Result<Vec<NewChunk>>>, report: &mut ImportReport) -> Result<Vec<NewChunk>> {
    let done = pool::wait(rx).map_err(|_| worker_gone())??;
    for c in &done {
        report.new_chunks += 1;
        report.new_bytes += c.len as u64;
        report.stored_bytes += ENTRY_HEADER_LEN as u64 + c.stored_len as u64;
    }
    Ok(done)
}

/// Worker side: compress a block's new chunks with the worker's zstd
/// context, then append them to this process's current pack (a new one once
/// it reaches the target size).
fn append_batch(
    w: &mut pool::Worker,
    block: &[u8],
    batch: &[Span],
    writers: &Mutex<Vec<PackWriter>>,
    dir: &std::path::Path,
) -> Result<Vec<NewChunk>> {
    let stored: Vec<Option<Vec<u8>>> = batch
        .iter()
        .map(|s| w.compress(&block[s.start..s.end]))
        .collect();
    let mut ws = writers
        .lock()
        .map_err(|_| StoreError::Invalid("an import worker panicked".into()))?;
    let mut out = Vec::with_capacity(batch.len());
    for (s, z) in batch.iter().zip(&stored) {
        let data = &block[s.start..s.end];
        let (codec, bytes) = match z {
            Some(z) => (Codec::Zstd, &z[..]),
            None => (Codec::Raw, data),
        };
        out.push(append(&mut ws, dir, s.hash, codec, data.len(), bytes)?);
    }
    Ok(out)
}

/// Append one stored chunk to the current pack writer.
pub(crate) fn append(
    ws: &mut Vec<PackWriter>,
    dir: &std::path::Path,
    hash: ChunkHash,
    codec: Codec,
    len: usize,
    stored: &[u8],
) -> Result<NewChunk> {
    let header = EntryHeader {
        codec,
        len: len as u32,
        stored_len: stored.len() as u32,
        hash,
    };
    if ws
        .last()
        .map(|w| w.len() >= PACK_TARGET_SIZE)
        .unwrap_or(true)
    {
        ws.push(PackWriter::create(dir)?);
    }
    let w = ws
        .last_mut()
        .ok_or_else(|| StoreError::Invalid("no pack writer".into()))?;
    let offset = w.append(&header, stored)?;
    Ok(NewChunk {
        hash,
        pack: w.name().to_string(),
        offset,
        stored_len: header.stored_len,
        len: header.len,
        codec,
    })
}

/// Insert a recording's index rows (`recordings`, `manifests`,
/// `recording_parts`) inside the caller's transaction, after its parts are
/// stored. Shared by import and by a remote pull, so both write exactly the
/// rows `ls`, `show` and gc read.
pub(crate) fn insert_recording(
    tx: &rusqlite::Transaction,
    id: &RecordingId,
    rec: &Recording,
    manifest: &[u8],
    source: &str,
    label: &str,
) -> rusqlite::Result<()> {
    insert_recording_rows(tx, id, rec, manifest, source, label, crate::now_unix())
}

/// The rows of [`insert_recording`], with a given import time and without
/// writing recovery metadata (`repair` restores rows from it).
pub(crate) fn insert_recording_rows(
    tx: &rusqlite::Transaction,
    id: &RecordingId,
    rec: &Recording,
    manifest: &[u8],
    source: &str,
    label: &str,
    imported_at: i64,
) -> rusqlite::Result<()> {
    use rrstore_format::PartRole;
    let input = rec.part(PartRole::Input).map(|p| i(p.len));
    let output = rec.part(PartRole::Output).map(|p| i(p.len));
    let image = rec.part(PartRole::Image).map(|p| p.blake3.to_vec());
    tx.execute(
        "INSERT INTO recordings (id, id_hex, kernel, generation, target, arena_base, \
         arena_size, input_size, output_size, num_args, num_globals, logical_size, \
         image_hash, imported_at, source, label) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        rusqlite::params![
            &id.0[..],
            id.to_hex(),
            rec.kernel,
            rec.generation.as_str(),
            rec.image_target.short_name(),
            rec.arena.base.map(i),
            i(rec.arena.size),
            input,
            output,
            rec.args.len() as i64,
            rec.globals.len() as i64,
            i(rec.logical_size()),
            image,
            imported_at,
            source,
            label,
        ],
    )?;
    tx.execute(
        "INSERT INTO manifests (id, manifest) VALUES (?1, ?2)",
        rusqlite::params![&id.0[..], manifest],
    )?;
    let mut rp_ins = tx.prepare_cached(
        "INSERT INTO recording_parts (recording, role, part) VALUES (?1, ?2, ?3)",
    )?;
    for p in &rec.parts {
        rp_ins.execute(rusqlite::params![&id.0[..], p.role.as_str(), &p.blake3[..]])?;
    }
    Ok(())
}
