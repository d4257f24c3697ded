//! `gc`: drop index rows no recording references, delete packs with no live
//! chunk, rewrite packs whose unused share exceeds a threshold, and sweep
//! orphan pack files left by crashed writers. Safe while imports run in
//! other processes; see spec/STORE.md, "Garbage collection". A dry run
//! ([`GcOptions::dry_run`]) computes the same plan from read-only queries
//! and changes nothing.
//!
//! Files: this one holds the options, the report and the entry points (the
//! run and the dry run's plan); `usage` measures each pack's live bytes
//! and decides its fate, `mark` removes the unreferenced rows (phase 1),
//! `packs` deletes and rewrites packs (phase 2), `orphans` sweeps pack
//! files no index row names (phase 3).

mod mark;
mod orphans;
mod packs;
mod usage;

use serde::Serialize;

use crate::error::Result;
use crate::index::u;
use crate::layout;
use crate::lock::{LockFile, Mode};
use crate::pack::PACK_HEADER_LEN;
use crate::Store;

use usage::{kept_with_unused, PackPlan};

/// How gc runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GcOptions {
    /// Only say what would be done; write nothing.
    pub dry_run: bool,
    /// Rewrite a pack when more than this percentage of its bytes is unused
    /// (0: any unused byte; 100: never rewrite, only delete dead packs).
    pub max_unused_percent: f64,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            dry_run: false,
            max_unused_percent: DEFAULT_MAX_UNUSED_PERCENT,
        }
    }
}

/// A pack is rewritten when more than this percentage of it is unused.
pub const DEFAULT_MAX_UNUSED_PERCENT: f64 = 50.0;

/// What gc did (or, in a dry run, would do: counts and bytes are then the
/// plan's).
#[derive(Clone, Debug, Default, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    pub max_unused_percent: f64,
    pub parts_removed: u64,
    pub chunks_removed: u64,
    pub packs_deleted: u64,
    pub packs_rewritten: u64,
    pub orphans_deleted: u64,
    /// Recovery chunk lists (`meta/parts/`) of parts no recording names.
    pub part_lists_removed: u64,
    /// Pack bytes on disk before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Packs skipped because a writer still holds them.
    pub packs_busy: u64,
    /// Packs left as they are although some of their bytes are unused (at
    /// most `max_unused_percent` of each), and those unused bytes.
    pub packs_kept_with_unused: u64,
    pub unused_bytes_kept: u64,
    /// Of those, the largest unused share of one pack, in percent.
    pub max_unused_kept_percent: f64,
}

/// The parts gc keeps: named by a recording, an image or a saved output.
pub(super) const LIVE_PARTS: &str = "SELECT hash FROM parts WHERE \
     EXISTS (SELECT 1 FROM recording_parts rp WHERE rp.part = parts.hash) \
     OR EXISTS (SELECT 1 FROM images im WHERE im.hash = parts.hash) \
     OR EXISTS (SELECT 1 FROM saved_outputs so WHERE so.part = parts.hash)";

impl Store {
    /// Collect garbage. Only one gc runs at a time (the next waits).
    pub fn gc(&mut self) -> Result<GcReport> {
        self.gc_with(&GcOptions::default())
    }

    /// [`Store::gc`] with options; a dry run takes no lock and writes
    /// nothing.
    pub fn gc_with(&mut self, opts: &GcOptions) -> Result<GcReport> {
        if opts.dry_run {
            return self.gc_plan(opts);
        }
        let _gc = LockFile::acquire(&self.dir().join(layout::GC_LOCK), Mode::Exclusive, true)?;
        // Never delete what the index cannot account for (spec/STORE.md).
        self.check_index_accounts_for_store()?;
        let mut report = GcReport {
            max_unused_percent: opts.max_unused_percent,
            bytes_before: self.stats()?.pack_bytes,
            ..Default::default()
        };
        self.gc_mark(&mut report)?;
        report.part_lists_removed = self.sweep_part_lists(false)?;
        self.gc_packs(&mut report, opts.max_unused_percent)?;
        self.gc_orphans(&mut report, false)?;
        report.bytes_after = self.stats()?.pack_bytes;
        Ok(report)
    }

    /// The dry run: what [`Store::gc_with`] would remove, delete and
    /// rewrite now, from read-only queries. `bytes_after` is the estimate
    /// (rewritten packs shrink to their live bytes).
    fn gc_plan(&mut self, opts: &GcOptions) -> Result<GcReport> {
        let ierr = self.ierr("gc (dry run): reading what is unreferenced");
        let conn = self.conn();
        // The last connection to close folds the write-ahead log back into
        // the index: not this one, so that no file of the store changes.
        let _ = conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
            true,
        );
        let count = |sql: &str| -> Result<u64> {
            conn.query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(u)
                .map_err(&ierr)
        };
        let parts_removed = count(&format!(
            "SELECT count(*) FROM parts WHERE hash NOT IN ({LIVE_PARTS})"
        ))?;
        let chunks_removed = count(&format!(
            "SELECT count(*) FROM chunks WHERE hash NOT IN \
             (SELECT pc.chunk FROM part_chunks pc WHERE pc.part IN ({LIVE_PARTS}))"
        ))?;
        let mut report = GcReport {
            dry_run: true,
            max_unused_percent: opts.max_unused_percent,
            bytes_before: self.stats()?.pack_bytes,
            parts_removed,
            chunks_removed,
            ..Default::default()
        };
        let mut freed = 0u64;
        for p in self.pack_usage(true)? {
            match p.plan(opts.max_unused_percent) {
                PackPlan::Delete => {
                    report.packs_deleted += 1;
                    freed += p.size;
                }
                PackPlan::Rewrite => {
                    report.packs_rewritten += 1;
                    freed += p.unused() + PACK_HEADER_LEN;
                }
                PackPlan::Keep => kept_with_unused(&mut report, &p),
            }
        }
        self.gc_orphans(&mut report, true)?;
        report.part_lists_removed = self.sweep_part_lists(true)?;
        report.bytes_after = report.bytes_before.saturating_sub(freed);
        Ok(report)
    }
}
