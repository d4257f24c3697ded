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
//!
//! Files: this one holds the import's types and entry points and its retry
//! loop; [`pipeline`] plans and streams the parts, [`commit`] syncs the
//! packs and commits through the index's one write path, [`archive`] copies
//! `.rra` archives, [`heal`] decides whether a stored chunk is deliverable,
//! [`known`] remembers the chunks this handle's imports committed.

mod archive;
mod commit;
mod heal;
pub(crate) mod known;
mod pipeline;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rrstore_format::chunk::ChunkHash;
use rrstore_format::{PartSource, Recording, RecordingId};
use serde::Serialize;

use crate::error::Result;
use crate::index::write::{self, AsPartRow, ChunkRow, Outcome, PartRow};
use crate::pack::writer::PackWriter;
use crate::Store;

use heal::PackSizes;

/// Caller-supplied metadata for an import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Free-form label (program, run).
    pub label: String,
    /// Where the recording came from (path shown by `ls --json`, `show`).
    pub source: String,
    /// The launch environment to store with recordings read from LLVM's
    /// files, which do not say (`rrstore record` knows it:
    /// [`rrstore_format::environment`]); `.rra` archives keep their own.
    pub environment: Option<Vec<(String, String)>>,
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
    /// Pack file sizes seen in this attempt (`heal`).
    pub(crate) pack_sizes: PackSizes,
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
            crate::recovery::write_recording(&self.conn, &self.dir, &id, &self.meta_sync)?;
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
}
