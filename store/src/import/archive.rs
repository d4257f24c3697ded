//! Importing a `.rra` archive by copying its stored chunks: an archive
//! chunked with the store's parameters has the store's chunk addresses, so
//! each chunk the store lacks is appended to a pack exactly as the archive
//! stores it (zstd frame or raw bytes): nothing is re-chunked or
//! recompressed. Every chunk is still decoded and hashed once (the archive
//! reader verifies each chunk it yields) and each part's bytes are hashed
//! against the manifest, so nothing unverified enters the store. Archives
//! chunked differently are imported through the ordinary importer.

use rrstore_format::archive::Reader;
use rrstore_format::FormatError;

use super::heal::{chunk_stored, lookup_err, Stored};
use super::pipeline::{append, worker_panicked};
use super::{Attempt, ImportOptions, ImportReport, NewPart, Plan, Writers, IMPORT_ATTEMPTS};
use crate::error::{Result, StoreError};
use crate::index::write;
use crate::pack::ENTRY_HEADER_LEN;
use crate::Store;

impl Store {
    /// Import the recording of an open archive (see the module doc).
    pub fn import_archive(
        &mut self,
        reader: &mut Reader,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ImportReport> {
        if reader.chunk_params() != self.chunk_params {
            let rec = reader.recording().clone();
            return self.import(&rec, reader, opts, progress);
        }
        let id = reader.id();
        let r = write::retry_raced(
            self,
            IMPORT_ATTEMPTS,
            &|_| format!("recording {id}"),
            "import",
            &mut |s: &mut Store| {
                let writers = s.share_writers();
                let attempt = s.archive_attempt(reader, opts, progress, &writers);
                s.unshare_writers(writers);
                attempt.map(Attempt::done)
            },
        )?;
        self.with_recovery(r)
    }

    fn archive_attempt(
        &mut self,
        reader: &Reader,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(u64),
        writers: &Writers,
    ) -> Result<Attempt> {
        let rec = reader.recording().clone();
        let id = reader.id();
        let mut report = ImportReport {
            id: id.to_hex(),
            kernel: rec.kernel.clone(),
            logical_bytes: rec.logical_size(),
            ..Default::default()
        };
        let mut plan = Plan::default();
        if self.contains(&id)? && self.recording_deliverable(&rec, &mut plan.pack_sizes)? {
            report.present = true;
            progress(rec.logical_size());
            return Ok(Attempt::Done(report));
        }
        let epoch0 = self.gc_epoch()?;
        let dir = self.dir.clone();
        let index_path = self.index_path();
        for part in &rec.parts {
            if self.plan_stored_part(&mut plan, part)? {
                progress(part.len);
                continue;
            }
            let mut lookup = self
                .conn
                .prepare_cached(super::heal::CHUNK_END_SQL)
                .map_err(self.ierr("preparing the chunk lookup"))?;
            let mut ws = writers.lock().map_err(|_| worker_panicked())?;
            let mut hasher = blake3::Hasher::new();
            let mut list = Vec::new();
            let mut len = 0u64;
            let mut chunks = reader.chunks(part.role)?;
            while let Some(c) = chunks.next() {
                let c = c?;
                hasher.update(chunks.plain());
                len += c.len as u64;
                list.push(c.hash);
                report.chunks += 1;
                report.chunked_bytes += c.len as u64;
                progress(c.len as u64);
                if plan.written.contains(&c.hash) {
                    continue;
                }
                let stored = chunk_stored(&mut lookup, &dir, &mut plan.pack_sizes, &c.hash)
                    .map_err(lookup_err(&index_path))?;
                match stored {
                    Stored::Yes => {
                        plan.reused_chunks.push(c.hash);
                        continue;
                    }
                    Stored::Lost => {
                        plan.healed.insert(c.hash);
                        report.healed_chunks += 1;
                    }
                    Stored::No => {}
                }
                plan.written.insert(c.hash);
                let new = append(&mut ws, &dir, c.hash, c.codec, c.len as usize, &c.data)?;
                report.new_chunks += 1;
                report.new_bytes += c.len as u64;
                report.stored_bytes += ENTRY_HEADER_LEN as u64 + new.stored_len as u64;
                plan.new_chunks.push(new);
            }
            let hash = *hasher.finalize().as_bytes();
            if len != part.len || hash != part.blake3 {
                return Err(StoreError::Format(FormatError::Corrupt {
                    path: reader.path().to_path_buf(),
                    offset: 0,
                    message: format!(
                        "the {} part's chunks add up to {len} bytes hashing to {}, but the manifest says {} bytes hashing to {}: the archive's index is damaged",
                        part.role,
                        rrstore_format::id::hex(&hash),
                        part.len,
                        rrstore_format::id::hex(&part.blake3)
                    ),
                }));
            }
            plan.new_parts.push(NewPart {
                hash: part.blake3,
                len: part.len,
                chunks: list,
            });
        }
        progress(rec.descriptor.len() as u64);
        let committed = self.sync_and_commit(&rec, &id, opts, &plan, epoch0, writers)?;
        Ok(Attempt::after_commit(committed, report))
    }
}
