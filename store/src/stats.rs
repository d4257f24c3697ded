//! `stats`: sizes and ratios of the whole store, from the index plus the
//! pack files' sizes on disk.

use serde::Serialize;

use crate::error::Result;
use crate::index::u;
use crate::Store;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub recordings: u64,
    /// Sum of the recordings' uncompressed sizes.
    pub logical_bytes: u64,
    /// Uncompressed bytes of the distinct chunks.
    pub unique_bytes: u64,
    /// Stored (compressed) bytes of the distinct chunks, entry headers included.
    pub chunk_bytes: u64,
    /// Bytes of all pack files on disk (garbage included).
    pub pack_bytes: u64,
    /// Size of the index (database plus WAL).
    pub index_bytes: u64,
    pub packs: u64,
    pub chunks: u64,
    pub parts: u64,
    /// logical / unique.
    pub dedup_ratio: f64,
    /// unique / chunk bytes.
    pub compression_ratio: f64,
}

impl Store {
    pub fn stats(&self) -> Result<Stats> {
        let ierr = self.ierr("computing statistics");
        let c = self.conn();
        let (recordings, logical): (i64, i64) = c
            .query_row(
                "SELECT count(*), coalesce(sum(logical_size), 0) FROM recordings",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(&ierr)?;
        let (chunks, unique, stored): (i64, i64, i64) = c
            .query_row(
                "SELECT count(*), coalesce(sum(len), 0), coalesce(sum(stored_len), 0) FROM chunks",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(&ierr)?;
        let parts: i64 = c
            .query_row("SELECT count(*) FROM parts", [], |r| r.get(0))
            .map_err(&ierr)?;
        let mut s = Stats {
            recordings: u(recordings),
            logical_bytes: u(logical),
            unique_bytes: u(unique),
            chunk_bytes: u(stored) + u(chunks) * crate::pack::ENTRY_HEADER_LEN as u64,
            chunks: u(chunks),
            parts: u(parts),
            ..Default::default()
        };
        for p in crate::layout::pack_files(self.dir()) {
            s.packs += 1;
            s.pack_bytes += std::fs::symlink_metadata(&p).map(|m| m.len()).unwrap_or(0);
        }
        for name in ["index.sqlite", "index.sqlite-wal"] {
            s.index_bytes += std::fs::metadata(self.dir().join(name))
                .map(|m| m.len())
                .unwrap_or(0);
        }
        s.dedup_ratio = ratio(s.logical_bytes, s.unique_bytes);
        s.compression_ratio = ratio(s.unique_bytes, s.chunk_bytes);
        Ok(s)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}
