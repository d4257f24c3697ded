//! `show`: what a recording costs in the store and which other recordings
//! share its chunks.

use rrstore_format::RecordingId;
use serde::Serialize;

use crate::error::Result;
use crate::index::u;
use crate::Store;

/// Another recording sharing chunks with the one shown.
#[derive(Clone, Debug, Serialize)]
pub struct Sharer {
    pub id: String,
    pub kernel: String,
    pub label: String,
    /// Uncompressed bytes of the distinct chunks both reference.
    pub shared_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Sharing {
    /// Uncompressed bytes of the recording's distinct chunks.
    pub unique_bytes: u64,
    /// Stored bytes of those chunks (compressed, entry headers included).
    pub stored_bytes: u64,
    /// Stored bytes of chunks no other recording references (what `rm`
    /// plus `gc` would free).
    pub exclusive_stored_bytes: u64,
    pub shared_with: Vec<Sharer>,
}

impl Store {
    pub fn sharing(&self, id: &RecordingId) -> Result<Sharing> {
        let ierr = self.ierr("computing chunk sharing");
        let hdr = crate::pack::ENTRY_HEADER_LEN as i64;
        let c = self.conn();
        let (unique, stored): (i64, i64) = c
            .query_row(
                "WITH mine AS (SELECT DISTINCT pc.chunk FROM recording_parts rp \
                 JOIN part_chunks pc ON pc.part = rp.part WHERE rp.recording = ?1) \
                 SELECT coalesce(sum(c.len), 0), coalesce(sum(c.stored_len + ?2), 0) \
                 FROM mine JOIN chunks c ON c.hash = mine.chunk",
                rusqlite::params![&id.0[..], hdr],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(&ierr)?;
        let mut stmt = c
            .prepare(
                "WITH mine AS (SELECT DISTINCT pc.chunk FROM recording_parts rp \
                 JOIN part_chunks pc ON pc.part = rp.part WHERE rp.recording = ?1), \
                 pairs AS (SELECT DISTINCT rp2.recording AS rec, mine.chunk AS chunk FROM mine \
                 JOIN part_chunks pc2 ON pc2.chunk = mine.chunk \
                 JOIN recording_parts rp2 ON rp2.part = pc2.part WHERE rp2.recording != ?1) \
                 SELECT r.id_hex, r.kernel, r.label, sum(c.len), 0 FROM pairs \
                 JOIN chunks c ON c.hash = pairs.chunk JOIN recordings r ON r.id = pairs.rec \
                 GROUP BY pairs.rec ORDER BY sum(c.len) DESC, r.id_hex",
            )
            .map_err(&ierr)?;
        let shared_with = stmt
            .query_map([&id.0[..]], |r| {
                Ok(Sharer {
                    id: r.get(0)?,
                    kernel: r.get(1)?,
                    label: r.get(2)?,
                    shared_bytes: u(r.get(3)?),
                })
            })
            .map_err(&ierr)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(&ierr)?;
        let exclusive: i64 = c
            .query_row(
                "WITH mine AS (SELECT DISTINCT pc.chunk FROM recording_parts rp \
                 JOIN part_chunks pc ON pc.part = rp.part WHERE rp.recording = ?1) \
                 SELECT coalesce(sum(c.stored_len + ?2), 0) FROM mine \
                 JOIN chunks c ON c.hash = mine.chunk WHERE NOT EXISTS ( \
                 SELECT 1 FROM part_chunks pc2 JOIN recording_parts rp2 ON rp2.part = pc2.part \
                 WHERE pc2.chunk = mine.chunk AND rp2.recording != ?1)",
                rusqlite::params![&id.0[..], hdr],
                |r| r.get(0),
            )
            .map_err(&ierr)?;
        Ok(Sharing {
            unique_bytes: u(unique),
            stored_bytes: u(stored),
            exclusive_stored_bytes: u(exclusive),
            shared_with,
        })
    }
}
