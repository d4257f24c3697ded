//! The chunk side of `pull`: download the chunks the store lacks, check
//! each, append them to the pull's local pack and index them in batches
//! (so an interrupted pull does not fetch them again), then read each new
//! part back and check it against its blake3.

use rrstore_format::chunk::ChunkHash;

use super::{corrupt, Session};
use crate::pack::writer::PackWriter;
use crate::pack::{ENTRY_HEADER_LEN, PACK_TARGET_SIZE};
use crate::remote::error::Result;
use crate::remote::local::{check_entry, PulledChunk};
use crate::remote::v3::Kind;
use crate::remote::Event;
use crate::{Store, StoreError};

/// Index pulled chunks after this many bytes have been appended.
const COMMIT_EVERY: u64 = 64 << 20;

/// Test hooks (docs/remote.md; the remote's
/// [`TransferHooks`](crate::remote::options::TransferHooks)):
/// `pull_batch_bytes` overrides [`COMMIT_EVERY`]; `pull_pause_after_batches`
/// makes the pull announce on stderr and then wait forever once N batches
/// are committed, and `pull_pause_after_recordings` once N recordings are,
/// so a test can kill it at a known point.
fn commit_every(hooks: &crate::remote::options::TransferHooks) -> u64 {
    hooks
        .pull_batch_bytes
        .filter(|&n| n > 0)
        .unwrap_or(COMMIT_EVERY)
}

/// The recordings test hook: pause once `n` recordings are committed.
pub(super) fn pause_point(hooks: &crate::remote::options::TransferHooks, what: &str, n: u64) {
    if hooks.pull_pause_after_recordings == Some(n) {
        eprintln!("rrstore: committed {what} {n}; pausing (RRSTORE_PULL_PAUSE_AFTER_RECORDINGS)");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

impl Session<'_> {
    /// Download `missing` chunks, check each, append them to the pull's
    /// local pack and index them in batches. `quiet` (prefetch): a chunk
    /// that is missing or fails its check is left out, not an error.
    pub(super) fn fetch_chunks(
        &mut self,
        missing: &[ChunkHash],
        quiet: bool,
        progress: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let remote = self.remote;
        let dir = self.store.dir().to_path_buf();
        let every = commit_every(&remote.options.hooks);
        let pause = remote.options.hooks.pull_pause_after_batches;
        // One pack for the whole pull (until full), not one per recording.
        let mut writer: Option<PackWriter> = self.pack.take();
        let mut batch: Vec<PulledChunk> = Vec::new();
        let mut since_commit = 0u64;
        let store = &mut *self.store;
        let report = &mut self.report;
        let batches = &mut self.batches;
        let mut flush = |store: &mut Store,
                         writer: &mut Option<PackWriter>,
                         batch: &mut Vec<PulledChunk>|
         -> Result<()> {
            if let Some(w) = writer.as_mut() {
                w.sync()?;
            }
            if batch.is_empty() {
                return Ok(());
            }
            store.xfer_commit_chunks(batch)?;
            batch.clear();
            *batches += 1;
            if pause == Some(*batches) {
                eprintln!("rrstore: committed chunk batch {batches}; pausing (RRSTORE_PULL_PAUSE_AFTER_BATCHES)");
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
            }
            Ok(())
        };
        let blobs = &self.blobs;
        let got = blobs.get(Kind::Chunk, missing, &mut |h, key, body| {
            let checked = body
                .map_err(|r| format!("{r} (a chunk list names it)"))
                .and_then(|body| check_entry(&body, &h).map(|header| (body, header)));
            let (body, header) = match checked {
                Ok(c) => c,
                Err(_) if quiet => return Ok(()),
                Err(r) => return Err(corrupt(remote, &key, r)),
            };
            if writer.as_ref().is_none_or(|w| w.len() >= PACK_TARGET_SIZE) {
                if writer.is_some() {
                    flush(store, &mut writer, &mut batch)?;
                }
                writer = Some(PackWriter::create(&dir)?);
            }
            let w = writer
                .as_mut()
                .ok_or_else(|| StoreError::Internal("no pack writer".into()))?;
            let offset = w.append(&header, &body[ENTRY_HEADER_LEN..])?;
            batch.push(PulledChunk {
                header,
                pack: w.name().to_string(),
                pack_size: w.len(),
                offset,
            });
            report.chunks += 1;
            report.chunk_bytes += body.len() as u64;
            report.missing_stored_bytes += header.stored_len as u64;
            since_commit += body.len() as u64;
            progress(Event::Bytes(header.len as u64));
            if since_commit >= every {
                flush(store, &mut writer, &mut batch)?;
                since_commit = 0;
            }
            Ok(())
        });
        // Chunks received before an error are indexed too, so a pull
        // started again does not fetch them again.
        let flushed = flush(store, &mut writer, &mut batch);
        got?;
        flushed?;
        self.pack = writer;
        Ok(())
    }
}
