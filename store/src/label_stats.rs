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

/// Points per label at most.
pub const MAX_POINTS: usize = 64;

impl Store {
    /// Every label's growth, oldest first within each label; labels in
    /// name order; at most [`MAX_POINTS`] points per label (the newest
    /// instant always among them). Only labels matching `label_glob`
    /// (SQLite GLOB) when given.
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
        // Running totals per label, then the chunk query (a join over the
        // label's parts) only for at most MAX_POINTS instants per label,
        // evenly spread, the last always kept: bounded work for a store
        // with thousands of imports.
        let mut out: Vec<LabelPoint> = Vec::with_capacity(rows.len());
        let mut start = 0;
        while start < rows.len() {
            let label = rows[start].0.clone();
            let end = start + rows[start..].iter().take_while(|r| r.0 == label).count();
            let (mut n_sum, mut l_sum) = (0u64, 0u64);
            let totals: Vec<(i64, u64, u64)> = rows[start..end]
                .iter()
                .map(|(_, at, n, logical)| {
                    n_sum += u(*n);
                    l_sum += u(*logical);
                    (*at, n_sum, l_sum)
                })
                .collect();
            let k = totals.len();
            let step = k.div_ceil(MAX_POINTS).max(1);
            let mut kept: Vec<usize> = (0..k).rev().step_by(step).collect();
            kept.reverse();
            for &(at, recordings, logical_bytes) in kept.iter().map(|&i| &totals[i]) {
                let (unique, stored): (i64, i64) = chunks
                    .query_row(rusqlite::params![label, at], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(&ierr)?;
                out.push(LabelPoint {
                    label: label.clone(),
                    at,
                    recordings,
                    logical_bytes,
                    unique_bytes: u(unique),
                    stored_bytes: u(stored),
                });
            }
            start = end;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;

    /// Many imports into one label: at most MAX_POINTS points, the last
    /// with every recording; totals are running sums.
    #[test]
    fn growth_is_bounded_and_cumulative() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path().join("s")).unwrap();
        let c = s.conn();
        for i in 0..200i64 {
            c.execute(
                "INSERT INTO recordings (id, id_hex, kernel, generation, target, arena_size, \
                 num_args, num_globals, logical_size, imported_at, source, label) \
                 VALUES (?1, ?2, 'k', 'g', 't', 0, 0, 0, 10, ?3, 's', 'lab')",
                rusqlite::params![i.to_le_bytes().to_vec(), format!("{i:064x}"), 1000 + i],
            )
            .unwrap();
        }
        let g = s.label_growth(None).unwrap();
        assert!(g.len() <= super::MAX_POINTS, "{} points", g.len());
        let last = g.last().unwrap();
        assert_eq!(
            (last.at, last.recordings, last.logical_bytes),
            (1199, 200, 2000)
        );
        assert!(g
            .windows(2)
            .all(|w| w[0].at < w[1].at && w[0].recordings < w[1].recordings));
        assert!(s.label_growth(Some("other*")).unwrap().is_empty());
    }
}
