//! Size, dedup and compression of each label's recordings as they were
//! imported: one point per label and import instant, counting what that
//! label held then (for `rrstore report`'s store chart).

use serde::Serialize;

use crate::error::Result;
use crate::index::u;
use crate::Store;

/// What one label's recordings imported up to `at` take.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LabelPoint {
    pub label: String,
    /// Unix seconds of the import that brought this point.
    pub at: i64,
    pub recordings: u64,
    /// Sum of the recordings' uncompressed sizes.
    pub logical_bytes: u64,
    /// Uncompressed bytes of the distinct chunks they reference.
    pub unique_bytes: u64,
    /// Compressed bytes of those chunks.
    pub stored_bytes: u64,
}

impl LabelPoint {
    /// logical / unique (1 when nothing is shared).
    pub fn dedup_ratio(&self) -> f64 {
        ratio(self.logical_bytes, self.unique_bytes)
    }

    /// unique / stored.
    pub fn compression_ratio(&self) -> f64 {
        ratio(self.unique_bytes, self.stored_bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

impl Store {
    /// Every label's growth, oldest first within each label; labels in
    /// name order. Only labels matching `label_glob` (SQLite GLOB) when given.
    pub fn label_growth(&self, label_glob: Option<&str>) -> Result<Vec<LabelPoint>> {
        let ierr = self.ierr("computing the size of each label over time");
        let c = self.conn();
        let mut instants = c
            .prepare(
                "SELECT label, imported_at, count(*), sum(logical_size) FROM recordings \
                 WHERE ?1 IS NULL OR label GLOB ?1 \
                 GROUP BY label, imported_at ORDER BY label, imported_at",
            )
            .map_err(&ierr)?;
        let rows: Vec<(String, i64, i64, i64)> = instants
            .query_map([label_glob], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .and_then(|m| m.collect())
            .map_err(&ierr)?;
        let mut chunks = c
            .prepare(
                "SELECT coalesce(sum(len), 0), coalesce(sum(stored_len), 0) FROM chunks \
                 WHERE hash IN (SELECT pc.chunk FROM recordings r \
                   JOIN recording_parts rp ON rp.recording = r.id \
                   JOIN part_chunks pc ON pc.part = rp.part \
                   WHERE r.label = ?1 AND r.imported_at <= ?2)",
            )
            .map_err(&ierr)?;
        let mut out: Vec<LabelPoint> = Vec::with_capacity(rows.len());
        for (label, at, n, logical) in rows {
            let (unique, stored): (i64, i64) = chunks
                .query_row(rusqlite::params![label, at], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(&ierr)?;
            let before = out
                .last()
                .filter(|p| p.label == label)
                .map(|p| (p.recordings, p.logical_bytes))
                .unwrap_or((0, 0));
            out.push(LabelPoint {
                label,
                at,
                recordings: before.0 + u(n),
                logical_bytes: before.1 + u(logical),
                unique_bytes: u(unique),
                stored_bytes: u(stored),
            });
        }
        Ok(out)
    }
}
