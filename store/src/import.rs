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
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::import_heal::{chunk_stored, lookup_err, Stored};
use crate::index::recording_rows::insert_recording_rows;
use crate::index::write::{self, AsPartRow, ChunkRow, Keep, Outcome, PartRow, Recheck};
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

pub(crate) struct NewPart {
    pub(crate) hash: [u8; 32],
    pub(crate) len: u64,
    pub(crate) chunks: Vec<ChunkHash>,
}

impl AsPartRow for NewPart {
    fn part_row(&self) -> PartRow<'_> {
        PartRow {
            hash: self.hash,
            len: self.len,
            chunks: &self.chunks,
        }
    }
}

#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) new_parts: Vec<NewPart>,
    pub(crate) reused_parts: Vec<[u8; 32]>,
    pub(crate) reused_chunks: Vec<ChunkHash>,
    pub(crate) new_chunks: Vec<ChunkRow>,
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
    /// The attempt whose commit had `outcome`, for `report`.
    pub(crate) fn after_commit(outcome: Outcome, report: ImportReport) -> Attempt {
        match outcome {
            Outcome::Committed => Attempt::Done(report),
            Outcome::Present => Attempt::Done(report.already_present()),
            Outcome::Raced => Attempt::Retry,
        }
    }

    pub(crate) fn done(self) -> Option<ImportReport> {
        match self {
            Attempt::Done(r) => Some(r),
            Attempt::Retry => None,
        }
    }
}

/// How often an import starts over when gc removed something it reused.
pub(crate) const IMPORT_ATTEMPTS: u32 = 8;

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
        let r = write::retry_raced(
            &mut (&mut *self, rec),
            IMPORT_ATTEMPTS,
            &|(_, rec)| format!("recording {}", rec.id()),
            "import",
            &mut |(s, rec)| {
                let writers = s.share_writers();
                let attempt = s.import_attempt(rec, hashes, src, opts, progress, &writers);
                s.unshare_writers(writers);
                // After one attempt every part hash is known.
                hashes = Hashes::Known;
                attempt.map(Attempt::done)
            },
        )?;
        self.with_recovery(r)
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

    /// Make the packs durable, then commit the plan in one index
    /// transaction (`index::write`); afterwards keep only the current
    /// writer.
    pub(crate) fn sync_and_commit(
        &mut self,
        rec: &Recording,
        id: &RecordingId,
        opts: &ImportOptions,
        plan: &Plan,
        epoch0: i64,
        writers: &Writers,
    ) -> Result<Outcome> {
        let Ok(mut ws) = writers.lock() else {
            return Err(worker_panicked());
        };
        for w in ws.iter_mut() {
            w.sync()?;
        }
        let packs: Vec<(String, u64)> =
            ws.iter().map(|w| (w.name().to_string(), w.len())).collect();
        drop(ws);
        let manifest = rmp_serde::to_vec_named(rec).map_err(|e| StoreError::Encode {
            what: format!("the manifest of recording {id}"),
            reason: e.to_string(),
        })?;
        let parts: Vec<PartRow> = plan.new_parts.iter().map(AsPartRow::part_row).collect();
        let w = write::Write {
            recheck: Recheck::SinceEpoch(epoch0),
            reused_parts: &plan.reused_parts,
            reused_chunks: &plan.reused_chunks,
            packs: &packs,
            chunks: &plan.new_chunks,
            healed: &plan.healed,
            parts: &parts,
        };
        let keep = Keep {
            context: "adding the recording",
            present: &|tx| crate::index::lookup::has_recording(tx, id),
            insert: &|tx| {
                let now = crate::now_unix();
                insert_recording_rows(tx, id, rec, &manifest, &opts.source, &opts.label, now)
            },
        };
        let index = self.index_path();
        let outcome = write::commit(&mut self.conn, &index, &w, Some(&keep))?;
        // Chunks committed now live in the index; a finished writer can be
        // closed (its lock released) once nothing uncommitted is in it.
        if let Ok(mut ws) = writers.lock() {
            let keep = ws.pop();
            ws.clear();
            ws.extend(keep);
        }
        Ok(outcome)
    }

    /// Whether `part` (its hash known) is stored and deliverable, or
    /// earlier in this recording: then nothing of it is read and `plan`
    /// reuses it.
    pub(crate) fn plan_stored_part(&self, plan: &mut Plan, part: &PartInfo) -> Result<bool> {
        if plan.new_parts.iter().any(|p| p.hash == part.blake3) {
            return Ok(true);
        }
        if self.has_part(&part.blake3)?
            && self.part_deliverable(&part.blake3, &mut plan.pack_sizes)?
        {
            plan.reused_parts.push(part.blake3);
            return Ok(true);
        }
        Ok(false)
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
                if hashes == Hashes::Known && self.plan_stored_part(&mut plan, part)? {
                    progress(part.len);
                    continue;
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
                    if self.has_part(&part.blake3)? {
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
        let mut pending: VecDeque<Receiver<Result<Vec<ChunkRow>>>> = VecDeque::new();
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
            return Err(StoreError::SourceModified {
                what: format!("recording {} ({}), {role} part", rec.kernel, rec.stem),
                read: format!(
                    "{total} bytes hashing to {}",
                    rrstore_format::id::hex(&hash)
                ),
                expected: said,
            });
        }
        part.blake3 = hash;
        Ok(list)
    }
}

pub(crate) fn worker_gone() -> StoreError {
    StoreError::Worker("an import worker thread stopped unexpectedly (out of memory?)".into())
}

/// A worker panicked while holding the shared pack writers.
pub(crate) fn worker_panicked() -> StoreError {
    StoreError::Worker("an import worker panicked".into())
}

/// Take a batch's appended chunks back, counting them in the report.
fn wait(rx: &Receiver<Result<Vec<ChunkRow>>>, report: &mut ImportReport) -> Result<Vec<ChunkRow>> {
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
) -> Result<Vec<ChunkRow>> {
    let stored: Vec<Option<Vec<u8>>> = batch
        .iter()
        .map(|s| w.compress(&block[s.start..s.end]))
        .collect();
    let mut ws = writers.lock().map_err(|_| worker_panicked())?;
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
) -> Result<ChunkRow> {
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
        .ok_or_else(|| StoreError::Internal("no pack writer".into()))?;
    let offset = w.append(&header, stored)?;
    Ok(ChunkRow {
        hash,
        pack: w.name().to_string(),
        offset,
        stored_len: header.stored_len,
        len: header.len,
        codec,
    })
}
