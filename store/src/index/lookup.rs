//! Typed lookups of single index rows (is this chunk, part, recording or
//! image indexed; the gc epoch). They take a `Connection`, so the write path
//! asks the same questions inside its transaction as the importers ask
//! outside it; callers add the error context.

use rrstore_format::chunk::ChunkHash;
use rrstore_format::RecordingId;
use rusqlite::Connection;

use crate::error::Result;
use crate::Store;

/// `meta.gc_epoch`: bumped by every gc that deletes rows.
pub(crate) fn gc_epoch(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT value FROM meta WHERE key = 'gc_epoch'")?
        .query_row([], |r| r.get(0))
}

/// Whether a `chunks` row with this hash exists.
pub(crate) fn has_chunk(conn: &Connection, hash: &ChunkHash) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM chunks WHERE hash = ?1")?
        .exists([&hash[..]])
}

/// Whether a `parts` row with this blake3 exists.
pub(crate) fn has_part(conn: &Connection, hash: &[u8; 32]) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM parts WHERE hash = ?1")?
        .exists([&hash[..]])
}

/// Whether a `recordings` row with this ID exists.
pub(crate) fn has_recording(conn: &Connection, id: &RecordingId) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM recordings WHERE id = ?1")?
        .exists([&id.0[..]])
}

/// Whether the image library holds image `hash`.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub(crate) fn has_image(conn: &Connection, hash: &[u8; 32]) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM images WHERE hash = ?1")?
        .exists([&hash[..]])
}

impl Store {
    /// The current `gc_epoch`.
    pub(crate) fn gc_epoch(&self) -> Result<i64> {
        gc_epoch(&self.conn).map_err(self.ierr("reading the gc epoch"))
    }

    /// Whether a chunk with this hash is indexed.
    pub(crate) fn has_chunk(&self, hash: &ChunkHash) -> Result<bool> {
        has_chunk(&self.conn, hash).map_err(self.ierr("looking up a chunk"))
    }

    /// Whether a part (or stand-alone object) with this blake3 is stored.
    pub fn has_part(&self, hash: &[u8; 32]) -> Result<bool> {
        has_part(&self.conn, hash).map_err(self.ierr("looking up a part"))
    }

    /// Whether a recording with this ID is stored.
    pub fn contains(&self, id: &RecordingId) -> Result<bool> {
        has_recording(&self.conn, id).map_err(self.ierr("looking up a recording"))
    }

    /// Whether the image library holds image `hash`.
    #[cfg_attr(not(feature = "remote"), allow(dead_code))]
    pub(crate) fn has_image(&self, hash: &[u8; 32]) -> Result<bool> {
        has_image(&self.conn, hash).map_err(self.ierr("looking up an image"))
    }
}
