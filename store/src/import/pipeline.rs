//! The import pipeline: plan which parts are stored already, then stream
//! the others through the chunker on a worker pool, looking every chunk up
//! and compressing and appending only new ones (see the `import` module
//! doc and spec/STORE.md "Import").

use std::collections::VecDeque;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rrstore_format::archive::pool::{self, Pool};
use rrstore_format::archive::scan::{part_scanner, Span};
use rrstore_format::chunk::{ChunkHash, Codec};
use rrstore_format::stages::{self, Stage};
use rrstore_format::{PartInfo, PartSource, Recording};

use super::heal::{chunk_stored, delivers, lookup_err, Stored};
use super::{Attempt, Hashes, ImportOptions, ImportReport, NewPart, Plan, Writers};
use crate::error::{Result, StoreError};
use crate::index::write::{ChunkRow, Outcome};
use crate::pack::writer::PackWriter;
use crate::pack::{EntryHeader, ENTRY_HEADER_LEN, PACK_TARGET_SIZE};
use crate::Store;

impl Store {
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

    pub(super) fn import_attempt(
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
        self.known.begin(epoch0);
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
        if committed == Outcome::Committed {
            self.known.committed(epoch0, &plan);
        }
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
            .prepare_cached(super::heal::CHUNK_END_SQL)
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
                if let Some((pack, end)) = self.known.get(&hash) {
                    if delivers(&dir, &mut plan.pack_sizes, Some(pack), end) {
                        plan.reused_chunks.push(hash);
                        continue;
                    }
                }
                let t = Instant::now();
                let stored = chunk_stored(&mut lookup, &dir, &mut plan.pack_sizes, &hash)
                    .map_err(lookup_err(&index_path))?;
                stages::add(Stage::Lookup, t, span.len() as u64);
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
    let t = Instant::now();
    let mut ws = writers.lock().map_err(|_| worker_panicked())?;
    stages::add(Stage::AppendWait, t, 0);
    let t = Instant::now();
    let mut out = Vec::with_capacity(batch.len());
    let mut appended = 0u64;
    for (s, z) in batch.iter().zip(&stored) {
        let data = &block[s.start..s.end];
        let (codec, bytes) = match z {
            Some(z) => (Codec::Zstd, &z[..]),
            None => (Codec::Raw, data),
        };
        appended += bytes.len() as u64;
        out.push(append(&mut ws, dir, s.hash, codec, data.len(), bytes)?);
    }
    stages::add(Stage::Append, t, appended);
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
