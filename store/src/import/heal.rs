//! Healing on import: a chunk or part counts as stored only if the pack
//! file its `chunks` row points into exists and is long enough for the
//! entry. Otherwise the import stores the chunk again and its commit
//! repoints the row (spec/STORE.md, "Import"), so importing a recording
//! again after a pack was lost repairs it.

use std::collections::HashMap;
use std::path::Path;

use rrstore_format::chunk::ChunkHash;
use rrstore_format::Recording;

use crate::error::{Result, StoreError};
use crate::index::u;
use crate::pack::ENTRY_HEADER_LEN;
use crate::{layout, Store};

/// Where a chunk's row says its entry ends, by chunk hash.
pub(crate) const CHUNK_END_SQL: &str = "SELECT p.name, c.offset + ?2 + c.stored_len \
     FROM chunks c LEFT JOIN packs p ON p.id = c.pack WHERE c.hash = ?1";

/// What the index and the pack files say about one chunk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Stored {
    /// No `chunks` row.
    No,
    /// Its row points at an entry that the pack file can deliver.
    Yes,
    /// Its row points into a pack that is gone or too short: store it again.
    Lost,
}

/// Sizes of pack files (None: missing), looked up once per import attempt.
pub(crate) type PackSizes = HashMap<String, Option<u64>>;

pub(crate) fn delivers(dir: &Path, sizes: &mut PackSizes, pack: Option<&str>, end: u64) -> bool {
    let Some(pack) = pack else {
        return false;
    };
    let size = *sizes.entry(pack.to_string()).or_insert_with(|| {
        std::fs::metadata(layout::pack_path(dir, pack))
            .ok()
            .map(|m| m.len())
    });
    size.is_some_and(|s| s >= end)
}

/// Look one chunk up with a statement prepared from [`CHUNK_END_SQL`].
pub(crate) fn chunk_stored(
    stmt: &mut rusqlite::CachedStatement<'_>,
    dir: &Path,
    sizes: &mut PackSizes,
    hash: &ChunkHash,
) -> rusqlite::Result<Stored> {
    use rusqlite::OptionalExtension;
    let row: Option<(Option<String>, i64)> = stmt
        .query_row(rusqlite::params![&hash[..], ENTRY_HEADER_LEN as i64], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    Ok(match row {
        None => Stored::No,
        Some((pack, end)) if delivers(dir, sizes, pack.as_deref(), u(end)) => Stored::Yes,
        Some(_) => Stored::Lost,
    })
}

impl Store {
    /// Whether every chunk of a stored part can be delivered by its pack.
    pub(crate) fn part_deliverable(&self, hash: &[u8; 32], sizes: &mut PackSizes) -> Result<bool> {
        let ierr = self.ierr("checking that a stored part's packs are intact");
        let unindexed: i64 = self
            .conn()
            .prepare_cached(
                "SELECT count(*) FROM part_chunks pc LEFT JOIN chunks c ON c.hash = pc.chunk \
                 WHERE pc.part = ?1 AND c.hash IS NULL",
            )
            .and_then(|mut s| s.query_row([&hash[..]], |r| r.get(0)))
            .map_err(&ierr)?;
        if unindexed > 0 {
            return Ok(false);
        }
        let ends: Vec<(Option<String>, i64)> = self
            .conn()
            .prepare_cached(
                "SELECT p.name, max(c.offset + ?2 + c.stored_len) FROM part_chunks pc \
                 JOIN chunks c ON c.hash = pc.chunk LEFT JOIN packs p ON p.id = c.pack \
                 WHERE pc.part = ?1 GROUP BY c.pack",
            )
            .and_then(|mut s| {
                s.query_map(rusqlite::params![&hash[..], ENTRY_HEADER_LEN as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect()
            })
            .map_err(&ierr)?;
        let dir = self.dir().to_path_buf();
        Ok(ends
            .iter()
            .all(|(pack, end)| delivers(&dir, sizes, pack.as_deref(), u(*end))))
    }

    /// Whether a stored recording's parts can all be delivered.
    pub(crate) fn recording_deliverable(
        &self,
        rec: &Recording,
        sizes: &mut PackSizes,
    ) -> Result<bool> {
        for p in &rec.parts {
            if !self.has_part(&p.blake3)? || !self.part_deliverable(&p.blake3, sizes)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The error of a failed chunk lookup.
pub(crate) fn lookup_err(index_path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Index {
        path: index_path.to_path_buf(),
        context: "looking up a chunk".into(),
        source,
    }
}
