//! `rrstore-store`: a content-addressed store of kernel recordings.
//!
//! Chunks (blake3-addressed, zstd-compressed) are appended to pack files and
//! deduplicated across all recordings and parts; an embedded SQLite index
//! maps chunks to pack locations and holds the recording metadata that `ls`
//! filters on. The layout and its invariants are written down in
//! spec/STORE.md.
//!
//! * [`Store`]: open a store, resolve IDs, read recordings back.
//! * [`import`]: add recordings (chunk, dedup, compress, append, commit);
//!   `.rra` archives are copied chunk by chunk as stored (`import_archive`).
//! * [`export`]: [`StoredRecording`], a `PartSource` over stored parts.
//! * [`query`]: `ls` filters; [`listing`]: the compact table `ls` prints;
//!   [`recordings`]: rm and tags.
//! * [`verify`], [`gc`], [`stats`], [`history`] (replay history rows).
//! * Regression workflow: [`images`] (content-addressed images),
//!   [`objects`] (stand-alone stored objects), [`outputs`] (saved replay
//!   outputs, replay cache lookups), [`changes`] (`history --changes`).

pub mod changes;
pub mod error;
pub mod export;
pub mod gc;
pub mod history;
pub mod images;
pub mod import;
mod import_archive;
mod index;
pub mod label_stats;
pub mod layout;
pub mod listing;
pub mod lock;
pub mod objects;
pub mod outputs;
pub mod pack;
pub mod query;
pub mod recordings;
#[cfg(feature = "remote")]
pub mod remote;
pub mod sharing;
pub mod sources;
pub mod stats;
pub mod verify;

use std::path::{Path, PathBuf};

use rrstore_format::chunk::ChunkParams;
use rrstore_format::{Recording, RecordingId};
use rusqlite::{Connection, OptionalExtension};

pub use error::{Result, StoreError};
pub use export::StoredRecording;
pub use history::HistoryEntry;
pub use import::{ImportOptions, ImportReport};
pub use listing::{LsRow, LsTable};
pub use query::{LsFilter, LsSort, RecordingSummary};
pub use sources::{find_sources, Source};

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
}

impl Store {
    /// Open the store at `dir`, creating it (directory, packs, index) on
    /// first use.
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        let dir = dir.as_ref().to_path_buf();
        for sub in [dir.clone(), dir.join(layout::PACKS_DIR)] {
            std::fs::create_dir_all(&sub).map_err(|source| StoreError::Dir {
                path: sub.clone(),
                source,
            })?;
        }
        let index_path = dir.join(layout::INDEX_FILE);
        let conn = index::open(&index_path, true)?;
        Ok(Store {
            dir,
            conn,
            writers: Vec::new(),
            chunk_params: ChunkParams::default(),
            zstd_level: 3,
        })
    }

    /// Open the store at `explicit`, else `$RRSTORE_DIR`, else the XDG data
    /// directory (see [`layout::resolve_dir`]).
    pub fn open_default(explicit: Option<&Path>) -> Result<Store> {
        let dir = layout::resolve_dir(explicit).ok_or_else(|| {
            StoreError::Invalid(
                "no store directory: set RRSTORE_DIR or HOME, or pass --store DIR".into(),
            )
        })?;
        Store::open(dir)
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

    /// Resolve a unique hex prefix (at least 4 digits) or a full ID.
    pub fn resolve(&self, prefix: &str) -> Result<RecordingId> {
        let p = prefix.trim().to_ascii_lowercase();
        if p.len() < 4 || p.len() > 64 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::BadPrefix(prefix.to_string()));
        }
        // Range scan on the id_hex index: [p, p with its last digit + 1).
        let mut upper = p.clone().into_bytes();
        if let Some(last) = upper.last_mut() {
            *last += 1;
        }
        let upper = String::from_utf8_lossy(&upper).into_owned();
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id_hex FROM recordings WHERE id_hex >= ?1 AND id_hex < ?2 \
                 ORDER BY id_hex LIMIT 11",
            )
            .map_err(self.ierr("resolving an ID prefix"))?;
        let found: Vec<String> = stmt
            .query_map([&p, &upper], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(self.ierr("resolving an ID prefix"))?;
        match found.len() {
            0 => Err(StoreError::NotFound(prefix.to_string())),
            1 => found[0]
                .parse()
                .map_err(|_| StoreError::NotFound(prefix.to_string())),
            _ => Err(StoreError::Ambiguous {
                prefix: prefix.to_string(),
                candidates: found
                    .iter()
                    .map(|h| h[..16.min(h.len())].to_string())
                    .collect(),
            }),
        }
    }

    /// Whether a recording with this ID is stored.
    pub fn contains(&self, id: &RecordingId) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM recordings WHERE id = ?1")
            .and_then(|mut s| s.exists([&id.0[..]]))
            .map_err(self.ierr("looking up a recording"))
    }

    /// The stored recording's manifest.
    pub fn recording(&self, id: &RecordingId) -> Result<Recording> {
        recording_from(&self.conn, &self.index_path(), id)
    }

    /// A [`rrstore_format::PartSource`] over a stored recording's parts.
    /// It has its own index connection, so it can outlive `self` and move
    /// to another thread.
    pub fn part_source(&self, id: &RecordingId) -> Result<StoredRecording<'static>> {
        StoredRecording::open(&self.dir, id)
    }

    /// [`part_source`](Self::part_source) reading through this store's own
    /// index connection: no second connection to open (for a short replay
    /// that is a measurable share of its start-up), but it borrows the store
    /// and stays on this thread.
    pub fn parts_of(&self, id: &RecordingId) -> Result<StoredRecording<'_>> {
        StoredRecording::in_store(&self.dir, &self.conn, id)
    }
}

/// Load and check a recording's manifest from the index.
pub(crate) fn recording_from(
    conn: &Connection,
    index_path: &Path,
    id: &RecordingId,
) -> Result<Recording> {
    let blob: Option<Vec<u8>> = conn
        .prepare_cached("SELECT manifest FROM manifests WHERE id = ?1")
        .and_then(|mut s| s.query_row([&id.0[..]], |r| r.get(0)).optional())
        .map_err(|source| StoreError::Index {
            path: index_path.to_path_buf(),
            context: "reading a recording manifest".into(),
            source,
        })?;
    let blob = blob.ok_or_else(|| StoreError::NotFound(id.to_hex()))?;
    let rec: Recording = rmp_serde::from_slice(&blob).map_err(|e| StoreError::CorruptIndex {
        recording: id.to_hex(),
        reason: format!("its manifest does not decode: {e}"),
    })?;
    if rec.id() != *id {
        return Err(StoreError::CorruptIndex {
            recording: id.to_hex(),
            reason: format!("its manifest hashes to {}", rec.id()),
        });
    }
    Ok(rec)
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
