//! Importing a recording: stream each part that the store does not already
//! hold through content-defined chunking, look every chunk up, compress and
//! append only new ones, then commit the recording in one index transaction.
//!
//! Pipeline (two threads, bounded channel): the calling thread reads, cuts
//! chunks, hashes them and looks them up; a worker hashes the whole part (to
//! check it against the manifest), compresses new chunks and appends them to
//! this process's pack. Memory is bounded by the channel depth times the
//! maximum chunk size. Ordering and crash safety: spec/STORE.md.

use std::collections::HashSet;
use std::sync::mpsc::{sync_channel, Receiver};

use rrstore_format::chunk::{self, ChunkHash, ChunkParams, Chunker, Codec};
use rrstore_format::{PartInfo, PartSource, Recording, RecordingId};
use rusqlite::{OptionalExtension, TransactionBehavior};
use serde::Serialize;

use crate::error::{Result, StoreError};
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
}

/// A chunk written to a pack in this attempt, not yet committed.
struct NewChunk {
    hash: ChunkHash,
    pack: String,
    offset: u64,
    stored_len: u32,
    len: u32,
    codec: Codec,
}

struct NewPart {
    hash: [u8; 32],
    len: u64,
    chunks: Vec<ChunkHash>,
}

#[derive(Default)]
struct Plan {
    new_parts: Vec<NewPart>,
    reused_parts: Vec<[u8; 32]>,
    reused_chunks: Vec<ChunkHash>,
    new_chunks: Vec<NewChunk>,
    /// Hashes written in this attempt (dedup within the recording).
    written: HashSet<ChunkHash>,
}

enum Attempt {
    Done(ImportReport),
    /// gc removed something this attempt reused: start over.
    Retry,
}

/// Message from the chunking thread to the worker.
struct Msg {
    data: Vec<u8>,
    hash: ChunkHash,
    /// The chunk is new: compress and append it.
    new: bool,
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
        let id = rec.id();
        for _ in 0..8 {
            match self.import_attempt(rec, &id, src, opts, progress)? {
                Attempt::Done(r) => return Ok(r),
                Attempt::Retry => continue,
            }
        }
        Err(StoreError::Busy(format!(
            "recording {id}: gc kept removing chunks this import reused"
        )))
    }

    fn gc_epoch(&self) -> Result<i64> {
        self.conn()
            .query_row("SELECT value FROM meta WHERE key = 'gc_epoch'", [], |r| {
                r.get(0)
            })
            .map_err(self.ierr("reading the gc epoch"))
    }

    fn part_exists(&self, hash: &[u8; 32]) -> Result<bool> {
        self.conn()
            .prepare_cached("SELECT 1 FROM parts WHERE hash = ?1")
            .and_then(|mut s| s.exists([&hash[..]]))
            .map_err(self.ierr("looking up a part"))
    }

    fn import_attempt(
        &mut self,
        rec: &Recording,
        id: &RecordingId,
        src: &mut dyn PartSource,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Attempt> {
        let mut report = ImportReport {
            id: id.to_hex(),
            kernel: rec.kernel.clone(),
            logical_bytes: rec.logical_size(),
            ..Default::default()
        };
        if self.contains(id)? {
            report.present = true;
            progress(rec.logical_size());
            return Ok(Attempt::Done(report));
        }
        let epoch0 = self.gc_epoch()?;
        let mut plan = Plan::default();
        for part in &rec.parts {
            if plan.new_parts.iter().any(|p| p.hash == part.blake3) {
                progress(part.len);
                continue;
            }
            if self.part_exists(&part.blake3)? {
                plan.reused_parts.push(part.blake3);
                progress(part.len);
                continue;
            }
            let chunks = self.chunk_part(id, part, src, &mut plan, &mut report, progress)?;
            plan.new_parts.push(NewPart {
                hash: part.blake3,
                len: part.len,
                chunks,
            });
        }
        progress(rec.descriptor.len() as u64);
        for w in &mut self.writers {
            w.sync()?;
        }
        let committed = self.commit(rec, id, opts, &plan, epoch0)?;
        // Chunks committed now live in the index; a finished writer can be
        // closed (its lock released) once nothing uncommitted is in it.
        let keep = self.writers.pop();
        self.writers.clear();
        self.writers.extend(keep);
        match committed {
            Some(true) => Ok(Attempt::Done(report)),
            Some(false) => {
                report.present = true;
                report.new_bytes = 0;
                report.stored_bytes = 0;
                report.new_chunks = 0;
                Ok(Attempt::Done(report))
            }
            None => Ok(Attempt::Retry),
        }
    }

    /// Stream one part through the pipeline; returns its chunk list.
    fn chunk_part(
        &mut self,
        id: &RecordingId,
        part: &PartInfo,
        src: &mut dyn PartSource,
        plan: &mut Plan,
        report: &mut ImportReport,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Vec<ChunkHash>> {
        let role = part.role;
        let reader = src
            .open_part(role)
            .map_err(|source| StoreError::SourceRead { part: role, source })?;
        let params: ChunkParams = self.chunk_params;
        let level = self.zstd_level;
        let dir = self.dir.clone();
        let Store { conn, writers, .. } = self;
        let index_path = dir.join(crate::layout::INDEX_FILE);
        let mut lookup = conn
            .prepare_cached("SELECT 1 FROM chunks WHERE hash = ?1")
            .map_err(|source| StoreError::Index {
                path: index_path.clone(),
                context: "preparing the chunk lookup".into(),
                source,
            })?;
        let mut list = Vec::new();
        let (tx, rx) = sync_channel::<Msg>(16);
        let outcome = std::thread::scope(|s| {
            let worker = s.spawn(|| worker(rx, writers, &dir, level));
            let mut failure: Option<StoreError> = None;
            let chunker = match Chunker::new(reader, params) {
                Ok(c) => c,
                Err(e) => {
                    drop(tx);
                    let _ = worker.join();
                    return Err(StoreError::Invalid(e.to_string()));
                }
            };
            for item in chunker {
                let c = match item {
                    Ok(c) => c,
                    Err(e) => {
                        failure = Some(StoreError::SourceRead {
                            part: role,
                            source: std::io::Error::other(e.to_string()),
                        });
                        break;
                    }
                };
                let len = c.data.len() as u64;
                let hash = chunk::hash(&c.data);
                report.chunks += 1;
                report.chunked_bytes += len;
                let new = if plan.written.contains(&hash) {
                    false
                } else {
                    match lookup.exists([&hash[..]]) {
                        Ok(true) => {
                            plan.reused_chunks.push(hash);
                            false
                        }
                        Ok(false) => {
                            plan.written.insert(hash);
                            true
                        }
                        Err(source) => {
                            failure = Some(StoreError::Index {
                                path: index_path.clone(),
                                context: "looking up a chunk".into(),
                                source,
                            });
                            break;
                        }
                    }
                };
                list.push(hash);
                if tx
                    .send(Msg {
                        data: c.data,
                        hash,
                        new,
                    })
                    .is_err()
                {
                    break; // the worker failed; its error is reported below
                }
                progress(len);
            }
            drop(tx);
            let worked = worker
                .join()
                .unwrap_or_else(|_| Err(StoreError::Invalid("import worker panicked".into())));
            match (failure, worked) {
                (Some(e), _) => Err(e),
                (None, Err(e)) => Err(e),
                (None, Ok(w)) => Ok(w),
            }
        })?;
        let (part_hash, total, new_chunks) = outcome;
        if total != part.len || part_hash != part.blake3 {
            return Err(StoreError::SourceChanged {
                recording: *id,
                part: role,
                reason: format!(
                    "read {total} bytes hashing to {}, the manifest says {} bytes hashing to {}",
                    rrstore_format::id::hex(&part_hash),
                    part.len,
                    rrstore_format::id::hex(&part.blake3)
                ),
            });
        }
        for c in &new_chunks {
            report.new_chunks += 1;
            report.new_bytes += c.len as u64;
            report.stored_bytes += ENTRY_HEADER_LEN as u64 + c.stored_len as u64;
        }
        plan.new_chunks.extend(new_chunks);
        Ok(list)
    }

    /// The index transaction. `Some(true)`: committed; `Some(false)`: another
    /// process committed the same recording first; `None`: retry.
    fn commit(
        &mut self,
        rec: &Recording,
        id: &RecordingId,
        opts: &ImportOptions,
        plan: &Plan,
        epoch0: i64,
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
        let pack_sizes: Vec<(String, u64)> = self
            .writers
            .iter()
            .map(|w| (w.name().to_string(), w.len()))
            .collect();
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
        if present.is_some() {
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
            for (name, size) in &pack_sizes {
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
            for c in &plan.new_chunks {
                let pid = ids.get(&c.pack).copied().unwrap_or(-1);
                chunk_ins
                    .execute(rusqlite::params![
                        &c.hash[..],
                        pid,
                        i(c.offset),
                        c.stored_len,
                        c.len,
                        c.codec as u8
                    ])
                    .map_err(err("adding chunks"))?;
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
            let input = rec.part(rrstore_format::PartRole::Input).map(|p| i(p.len));
            let output = rec.part(rrstore_format::PartRole::Output).map(|p| i(p.len));
            let image = rec
                .part(rrstore_format::PartRole::Image)
                .map(|p| p.blake3.to_vec());
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
                    crate::now_unix(),
                    opts.source,
                    opts.label,
                ],
            )
            .map_err(err("adding the recording"))?;
            tx.execute(
                "INSERT INTO manifests (id, manifest) VALUES (?1, ?2)",
                rusqlite::params![&id.0[..], manifest],
            )
            .map_err(err("adding the recording's manifest"))?;
            let mut rp_ins = tx
                .prepare_cached(
                    "INSERT INTO recording_parts (recording, role, part) VALUES (?1, ?2, ?3)",
                )
                .map_err(err("adding the recording's parts"))?;
            for p in &rec.parts {
                rp_ins
                    .execute(rusqlite::params![&id.0[..], p.role.as_str(), &p.blake3[..]])
                    .map_err(err("adding the recording's parts"))?;
            }
        }
        tx.commit().map_err(err("committing the import"))?;
        Ok(Some(true))
    }
}

/// Worker side of the pipeline: whole-part hash, compression of new chunks,
/// appends. Returns (part blake3, part length, chunks written).
fn worker(
    rx: Receiver<Msg>,
    writers: &mut Vec<PackWriter>,
    dir: &std::path::Path,
    level: i32,
) -> Result<([u8; 32], u64, Vec<NewChunk>)> {
    let mut hasher = blake3::Hasher::new();
    let mut total = 0u64;
    let mut out = Vec::new();
    for msg in rx {
        hasher.update(&msg.data);
        total += msg.data.len() as u64;
        if !msg.new {
            continue;
        }
        let (codec, stored) = chunk::compress(&msg.data, level);
        let header = EntryHeader {
            codec,
            len: msg.data.len() as u32,
            stored_len: stored.len() as u32,
            hash: msg.hash,
        };
        let full = writers
            .last()
            .map(|w| w.len() >= PACK_TARGET_SIZE)
            .unwrap_or(true);
        if full {
            writers.push(PackWriter::create(dir)?);
        }
        let w = writers
            .last_mut()
            .ok_or_else(|| StoreError::Invalid("no pack writer".into()))?;
        let offset = w.append(&header, &stored)?;
        out.push(NewChunk {
            hash: msg.hash,
            pack: w.name().to_string(),
            offset,
            stored_len: header.stored_len,
            len: header.len,
            codec,
        });
    }
    Ok((*hasher.finalize().as_bytes(), total, out))
}
