//! gc phase 2: delete packs with no live chunk, rewrite those whose unused
//! share exceeds the threshold (live entries copied to a new pack, rows
//! repointed, then the old file deleted).

use std::fs::File;
use std::os::unix::fs::FileExt;

use rusqlite::TransactionBehavior;

use super::usage::{kept_with_unused, PackPlan};
use super::GcReport;
use crate::error::{Result, StoreError};
use crate::index::{i, u};
use crate::layout;
use crate::lock::{self, Mode};
use crate::pack::writer::PackWriter;
use crate::pack::{EntryHeader, ENTRY_HEADER_LEN, PACK_TARGET_SIZE};
use crate::Store;

impl Store {
    /// Phase 2: delete dead packs, rewrite those over the unused threshold.
    pub(super) fn gc_packs(
        &mut self,
        report: &mut GcReport,
        max_unused_percent: f64,
    ) -> Result<()> {
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
            .map_err(&err)?;
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
        let err = self.ierr("gc: repointing moved chunks");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        tx.execute(
            "INSERT INTO packs (name, size) VALUES (?1, ?2) \
             ON CONFLICT (name) DO UPDATE SET size = max(size, excluded.size)",
            rusqlite::params![w.name(), i(w.len())],
        )
        .map_err(&err)?;
        let new_id: i64 = tx
            .query_row("SELECT id FROM packs WHERE name = ?1", [w.name()], |r| {
                r.get(0)
            })
            .map_err(&err)?;
        {
            let mut up = tx
                .prepare_cached(
                    "UPDATE chunks SET pack = ?1, offset = ?2 WHERE hash = ?3 AND pack = ?4",
                )
                .map_err(&err)?;
            for (hash, off) in &moved {
                up.execute(rusqlite::params![new_id, i(*off), hash, pid])
                    .map_err(&err)?;
            }
        }
        let left: i64 = tx
            .query_row("SELECT count(*) FROM chunks WHERE pack = ?1", [pid], |r| {
                r.get(0)
            })
            .map_err(&err)?;
        if left != 0 {
            // Cannot happen (only gc moves chunks, and gc is exclusive);
            // leave the pack in place rather than lose data.
            return Err(StoreError::PackStillUsed {
                path: path.to_path_buf(),
                left,
            });
        }
        tx.execute("DELETE FROM packs WHERE id = ?1", [pid])
            .map_err(&err)?;
        tx.commit().map_err(&err)
    }
}
