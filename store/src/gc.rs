//! `gc`: drop index rows no recording references, delete packs with no live
//! chunk, rewrite packs whose unused share exceeds a threshold, and sweep
//! orphan pack files left by crashed writers. Safe while imports run in
//! other processes; see spec/STORE.md, "Garbage collection". A dry run
//! ([`GcOptions::dry_run`]) computes the same plan from read-only queries
//! and changes nothing.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::FileExt;

use rusqlite::TransactionBehavior;
use serde::Serialize;

use crate::error::{Result, StoreError};
use crate::index::{i, u};
use crate::layout;
use crate::lock::{self, LockFile, Mode};
use crate::pack::writer::PackWriter;
use crate::pack::{EntryHeader, ENTRY_HEADER_LEN, PACK_HEADER_LEN, PACK_TARGET_SIZE};
use crate::Store;

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

/// One pack's usage: bytes on disk and bytes of live entries.
struct PackUsage {
    id: i64,
    name: String,
    size: u64,
    live: u64,
}

impl PackUsage {
    /// Entry bytes not referenced by the index.
    fn unused(&self) -> u64 {
        self.size
            .saturating_sub(PACK_HEADER_LEN)
            .saturating_sub(self.live)
    }

    fn unused_percent(&self) -> f64 {
        let body = self.size.saturating_sub(PACK_HEADER_LEN).max(1);
        100.0 * self.unused() as f64 / body as f64
    }

    /// Delete (no live entry), rewrite (over the threshold) or keep.
    fn plan(&self, max_unused_percent: f64) -> PackPlan {
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
enum PackPlan {
    Delete,
    Rewrite,
    Keep,
}

/// The parts gc keeps: named by a recording, an image or a saved output.
const LIVE_PARTS: &str = "SELECT hash FROM parts WHERE \
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

    /// Every pack's size and live bytes. `after_mark`: count as live only
    /// the chunks a live part names (what is live once gc's first phase
    /// has run), else every chunk row.
    fn pack_usage(&self, after_mark: bool) -> Result<Vec<PackUsage>> {
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

    /// Phase 1: one transaction removes unreferenced parts and chunks and
    /// bumps the gc epoch so concurrent imports re-check what they reuse.
    fn gc_mark(&mut self, report: &mut GcReport) -> Result<()> {
        let path = self.index_path();
        let err = |source| StoreError::Index {
            path: path.clone(),
            context: "gc: removing unreferenced rows".into(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let parts = tx
            .execute(
                "DELETE FROM parts WHERE NOT EXISTS \
                 (SELECT 1 FROM recording_parts rp WHERE rp.part = parts.hash) \
                 AND NOT EXISTS (SELECT 1 FROM images im WHERE im.hash = parts.hash) \
                 AND NOT EXISTS (SELECT 1 FROM saved_outputs so WHERE so.part = parts.hash)",
                [],
            )
            .map_err(err)?;
        tx.execute(
            "DELETE FROM part_chunks WHERE NOT EXISTS \
             (SELECT 1 FROM parts WHERE parts.hash = part_chunks.part)",
            [],
        )
        .map_err(err)?;
        let chunks = tx
            .execute(
                "DELETE FROM chunks WHERE NOT EXISTS \
                 (SELECT 1 FROM part_chunks pc WHERE pc.chunk = chunks.hash)",
                [],
            )
            .map_err(err)?;
        if parts + chunks > 0 {
            tx.execute(
                "UPDATE meta SET value = value + 1 WHERE key = 'gc_epoch'",
                [],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        report.parts_removed = parts as u64;
        report.chunks_removed = chunks as u64;
        Ok(())
    }

    /// Phase 2: delete dead packs, rewrite those over the unused threshold.
    fn gc_packs(&mut self, report: &mut GcReport, max_unused_percent: f64) -> Result<()> {
        let packs = self.pack_usage(false)?;
        let mut out: Option<PackWriter> = None;
        for p in packs {
            let plan = p.plan(max_unused_percent);
            if plan == PackPlan::Keep {
                kept_with_unused(report, &p);
                continue;
            }
            let (pid, live) = (p.id, p.live);
            let path = layout::pack_path(self.dir(), &p.name);
            // A pack still open in a writer (locked) is left alone.
            let file = match File::open(&path) {
                Ok(f) => Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(StoreError::io(&path, e)),
            };
            if let Some(f) = &file {
                if !lock::flock(f, Mode::Exclusive, false).map_err(|e| StoreError::io(&path, e))? {
                    report.packs_busy += 1;
                    continue;
                }
            }
            if live > 0 {
                let Some(f) = &file else { continue };
                if out.as_ref().is_none_or(|w| w.len() >= PACK_TARGET_SIZE) {
                    out = Some(PackWriter::create(self.dir())?);
                }
                if let Some(w) = out.as_mut() {
                    self.rewrite_pack(pid, &path, f, w)?;
                    report.packs_rewritten += 1;
                }
            } else {
                self.drop_pack_row(pid)?;
                report.packs_deleted += 1;
            }
            if file.is_some() {
                std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            }
        }
        Ok(())
    }

    fn drop_pack_row(&mut self, pid: i64) -> Result<()> {
        let err = self.ierr("gc: deleting a pack row");
        self.conn()
            .execute(
                "DELETE FROM packs WHERE id = ?1 AND NOT EXISTS \
                 (SELECT 1 FROM chunks WHERE pack = ?1)",
                [pid],
            )
            .map_err(err)?;
        Ok(())
    }

    /// Copy the live entries of pack `pid` into `w`, make them durable, then
    /// repoint the index in one transaction.
    fn rewrite_pack(
        &mut self,
        pid: i64,
        path: &std::path::Path,
        f: &File,
        w: &mut PackWriter,
    ) -> Result<()> {
        let ierr = self.ierr("gc: rewriting a pack");
        let live: Vec<(Vec<u8>, i64, i64)> = {
            let mut stmt = self
                .conn()
                .prepare(
                    "SELECT hash, offset, stored_len FROM chunks WHERE pack = ?1 ORDER BY offset",
                )
                .map_err(&ierr)?;
            let rows = stmt
                .query_map([pid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(&ierr)?;
            rows.collect::<rusqlite::Result<_>>().map_err(&ierr)?
        };
        let mut moved = Vec::with_capacity(live.len());
        let mut buf = Vec::new();
        for (hash, offset, stored_len) in live {
            let mut h = [0u8; ENTRY_HEADER_LEN];
            buf.resize(stored_len as usize, 0);
            f.read_exact_at(&mut h, u(offset))
                .and_then(|_| f.read_exact_at(&mut buf, u(offset) + ENTRY_HEADER_LEN as u64))
                .map_err(|e| StoreError::io(path, e))?;
            let header = EntryHeader::decode(&h).map_err(|reason| StoreError::CorruptPack {
                path: path.to_path_buf(),
                offset: u(offset),
                reason,
            })?;
            if header.hash[..] != hash[..] {
                return Err(StoreError::CorruptPack {
                    path: path.to_path_buf(),
                    offset: u(offset),
                    reason: "the entry header does not match the index; run `rrstore verify`"
                        .into(),
                });
            }
            let new_off = w.append(&header, &buf)?;
            moved.push((hash, new_off));
        }
        w.sync()?;
        let path_idx = self.index_path();
        let err = |source| StoreError::Index {
            path: path_idx.clone(),
            context: "gc: repointing moved chunks".into(),
            source,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        tx.execute(
            "INSERT INTO packs (name, size) VALUES (?1, ?2) \
             ON CONFLICT (name) DO UPDATE SET size = max(size, excluded.size)",
            rusqlite::params![w.name(), i(w.len())],
        )
        .map_err(err)?;
        let new_id: i64 = tx
            .query_row("SELECT id FROM packs WHERE name = ?1", [w.name()], |r| {
                r.get(0)
            })
            .map_err(err)?;
        {
            let mut up = tx
                .prepare_cached(
                    "UPDATE chunks SET pack = ?1, offset = ?2 WHERE hash = ?3 AND pack = ?4",
                )
                .map_err(err)?;
            for (hash, off) in &moved {
                up.execute(rusqlite::params![new_id, i(*off), hash, pid])
                    .map_err(err)?;
            }
        }
        let left: i64 = tx
            .query_row("SELECT count(*) FROM chunks WHERE pack = ?1", [pid], |r| {
                r.get(0)
            })
            .map_err(err)?;
        if left != 0 {
            // Cannot happen (only gc moves chunks, and gc is exclusive);
            // leave the pack in place rather than lose data.
            return Err(StoreError::PackStillUsed {
                path: path.to_path_buf(),
                left,
            });
        }
        tx.execute("DELETE FROM packs WHERE id = ?1", [pid])
            .map_err(err)?;
        tx.commit().map_err(err)
    }

    /// Phase 3: pack files the index does not know and no writer holds are
    /// left-overs of crashed imports or gcs: delete them (`dry_run`: count
    /// them).
    fn gc_orphans(&mut self, report: &mut GcReport, dry_run: bool) -> Result<()> {
        let _packs = if dry_run {
            None
        } else {
            LockFile::acquire(&self.dir().join(layout::PACKS_LOCK), Mode::Exclusive, true)?
        };
        let ierr = self.ierr("gc: listing packs");
        let known: HashSet<String> = {
            let mut stmt = self
                .conn()
                .prepare("SELECT name FROM packs")
                .map_err(&ierr)?;
            let rows = stmt.query_map([], |r| r.get(0)).map_err(&ierr)?;
            rows.collect::<rusqlite::Result<_>>().map_err(&ierr)?
        };
        let packs_dir = self.dir().join(layout::PACKS_DIR);
        for fan in std::fs::read_dir(&packs_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            for f in std::fs::read_dir(fan.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let p = f.path();
                let Some(stem) = p.file_stem().and_then(|s| s.to_str()) else {
                    continue;
                };
                if p.extension().is_none_or(|e| e != "pack") || known.contains(stem) {
                    continue;
                }
                let Ok(file) = File::open(&p) else { continue };
                if lock::flock(&file, Mode::Exclusive, false).unwrap_or(false) {
                    if !dry_run {
                        std::fs::remove_file(&p).map_err(|e| StoreError::io(&p, e))?;
                    }
                    report.orphans_deleted += 1;
                }
            }
        }
        Ok(())
    }
}

/// Count pack `p`, kept, in the report's unused bytes left in place.
fn kept_with_unused(report: &mut GcReport, p: &PackUsage) {
    if p.unused() > 0 {
        report.packs_kept_with_unused += 1;
        report.unused_bytes_kept += p.unused();
        report.max_unused_kept_percent = report.max_unused_kept_percent.max(p.unused_percent());
    }
}
