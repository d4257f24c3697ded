//! `rrstore-store`: a content-addressed store of kernel recordings.
//!
//! Chunks (blake3-addressed, zstd-compressed) are appended to pack files and
//! deduplicated across all recordings and parts; an embedded SQLite index
//! maps chunks to pack locations and holds the recording metadata that `ls`
//! filters on. The layout and its invariants are written down in
//! spec/STORE.md.
//!
//! * [`Store`]: the open store; its methods live in the file of their verb:
//!   open (`opening.rs`), resolve and ls (`query.rs`), read (`read/`),
//!   import (`import/`), is it stored (`index/lookup.rs`), rm and tag
//!   (`recordings.rs`), verify, gc, repair, stats, history, images, objects,
//!   outputs (their own files), transfers (`remote/local.rs`).
//! * [`import`]: add recordings (chunk, dedup, compress, append, commit);
//!   `.rra` archives are copied chunk by chunk as stored (`import::archive`).
//!   Every write of stored data goes through the index's one write path
//!   (`index::write`, spec/STORE.md "Index writes").
//! * [`read`]: the read path: [`StoredRecording`], a `PartSource` over
//!   stored parts.
//! * [`query`]: `ls` filters; [`listing`]: the compact table `ls` prints;
//!   [`recordings`]: rm and tags.
//! * [`verify`], [`gc`], [`stats`], [`history`] (replay history rows).
//! * Regression workflow: [`images`] (content-addressed images),
//!   [`objects`] (stand-alone stored objects), [`outputs`] (saved replay
//!   outputs, replay cache lookups), [`changes`] (`history --changes`).
//! * Signed recordings: [`signing`] (keys, signature objects),
//!   [`signatures`] (the verified signatures a store keeps).

pub mod changes;
pub mod error;
pub mod gc;
pub mod history;
pub mod history_compiled;
pub mod history_query;
pub mod image_add;
pub mod image_rm;
pub mod images;
pub mod import;
mod index;
pub mod label_stats;
pub mod layout;
pub mod listing;
pub mod lock;
pub mod marker;
pub mod objects;
mod opening;
pub mod outputs;
pub mod pack;
pub mod query;
pub mod read;
pub mod recordings;
pub mod recovery;
#[cfg(feature = "remote")]
pub mod remote;
pub mod repair;
pub mod run_profiles;
pub mod sharing;
pub mod signatures;
pub mod signing;
pub mod sources;
pub mod stats;
pub mod verify;

use std::path::{Path, PathBuf};

use rrstore_format::chunk::ChunkParams;
use rusqlite::Connection;

pub use error::{Result, StoreError};
pub use history::HistoryEntry;
pub use history_compiled::Compilation;
pub use history_query::HistoryFilter;
pub use import::{ImportOptions, ImportReport};
pub use listing::{LsRow, LsTable};
pub use opening::StoreSettings;
pub use query::{LsFilter, LsSort, RecordingSummary};
pub use read::StoredRecording;
pub use sources::{find_sources, find_sources_skipped, Source};

/// An open store: its directory, a connection to its index and, while
/// importing, the pack files this process is writing.
pub struct Store {
    dir: PathBuf,
    conn: Connection,
    writers: Vec<pack::writer::PackWriter>,
    /// Chunking parameters for new parts (the format's defaults, so chunk
    /// addresses match `.rra` archives).
    pub chunk_params: ChunkParams,
    /// zstd level for new chunks.
    pub zstd_level: i32,
    /// The store directory cannot be written (read-only mount): the index
    /// was opened read-only.
    read_only: bool,
    /// The `meta/` files written through this handle, made durable
    /// together ([`Store::sync_meta`], or when the store is dropped).
    meta_sync: recovery::MetaSync,
    /// Chunks this handle's imports committed (`import::known`).
    known: import::known::KnownChunks,
    /// The machine name this handle's history rows get; `None`: the host
    /// name ([`history::machine`]; the CLI fills it from
    /// `RRSTORE_MACHINE`).
    pub machine: Option<String>,
}

impl Store {
    /// Whether the store was opened read-only (its directory cannot be
    /// written): reads work, writes fail.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Make what this handle committed and wrote so far durable: the index
    /// commits of imports (one fsync of the index's log) and the recovery
    /// metadata (fsyncs after the last write); nothing when there is none. Commands call it
    /// before they report success; dropping the store does it too.
    pub fn sync_meta(&self) -> Result<()> {
        let deferred = self.meta_sync.index_deferred();
        self.meta_sync.flush()?;
        if deferred {
            self.conn
                .pragma_update(None, "synchronous", "full")
                .map_err(self.ierr("restoring synchronous=full after an import"))?;
        }
        Ok(())
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn index_path(&self) -> PathBuf {
        self.dir.join(layout::INDEX_FILE)
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Map a rusqlite error to a store error with context.
    pub(crate) fn ierr(&self, context: &str) -> impl Fn(rusqlite::Error) -> StoreError {
        let context = context.to_string();
        let path = self.index_path();
        move |source| StoreError::Index {
            path: path.clone(),
            context: context.clone(),
            source,
        }
    }
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
