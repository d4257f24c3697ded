//! How much of each pack is live, and what gc does with it.

use super::{GcReport, LIVE_PARTS};
use crate::error::Result;
use crate::index::u;
use crate::pack::{ENTRY_HEADER_LEN, PACK_HEADER_LEN};
use crate::Store;

/// One pack's usage: bytes on disk and bytes of live entries.
pub(super) struct PackUsage {
    pub(super) id: i64,
    pub(super) name: String,
    pub(super) size: u64,
    pub(super) live: u64,
}

impl PackUsage {
    /// Entry bytes not referenced by the index.
    pub(super) fn unused(&self) -> u64 {
        self.size
            .saturating_sub(PACK_HEADER_LEN)
            .saturating_sub(self.live)
    }

    pub(super) fn unused_percent(&self) -> f64 {
        let body = self.size.saturating_sub(PACK_HEADER_LEN).max(1);
        100.0 * self.unused() as f64 / body as f64
    }

    /// Delete (no live entry), rewrite (over the threshold) or keep.
    pub(super) fn plan(&self, max_unused_percent: f64) -> PackPlan {
        if self.live == 0 {
            PackPlan::Delete
        } else if self.unused() > 0 && self.unused_percent() > max_unused_percent {
            PackPlan::Rewrite
        } else {
            PackPlan::Keep
        }
    }
}

#[derive(PartialEq)]
pub(super) enum PackPlan {
    Delete,
    Rewrite,
    Keep,
}

impl Store {
    /// Every pack's size and live bytes. `after_mark`: count as live only
    /// the chunks a live part names (what is live once gc's first phase
    /// has run), else every chunk row.
    pub(super) fn pack_usage(&self, after_mark: bool) -> Result<Vec<PackUsage>> {
        let ierr = self.ierr("gc: reading pack usage");
        let filter = if after_mark {
            format!(
                " AND c.hash IN (SELECT pc.chunk FROM part_chunks pc WHERE pc.part IN ({LIVE_PARTS}))"
            )
        } else {
            String::new()
        };
        let mut stmt = self
            .conn()
            .prepare(&format!(
                "SELECT p.id, p.name, p.size, coalesce((SELECT sum(stored_len + ?1) \
                 FROM chunks c WHERE c.pack = p.id{filter}), 0) FROM packs p"
            ))
            .map_err(&ierr)?;
        let rows = stmt
            .query_map([ENTRY_HEADER_LEN as i64], |r| {
                Ok(PackUsage {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    size: u(r.get(2)?),
                    live: u(r.get(3)?),
                })
            })
            .map_err(&ierr)?;
        rows.collect::<rusqlite::Result<_>>().map_err(&ierr)
    }
}

/// Count pack `p`, kept, in the report's unused bytes left in place.
pub(super) fn kept_with_unused(report: &mut GcReport, p: &PackUsage) {
    if p.unused() > 0 {
        report.packs_kept_with_unused += 1;
        report.unused_bytes_kept += p.unused();
        report.max_unused_kept_percent = report.max_unused_kept_percent.max(p.unused_percent());
    }
}
