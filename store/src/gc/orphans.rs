//! gc phase 3: pack files the index does not know and no writer holds.

use std::collections::HashSet;
use std::fs::File;

use super::GcReport;
use crate::error::{Result, StoreError};
use crate::layout;
use crate::lock::{self, LockFile, Mode};
use crate::Store;

impl Store {
    /// Phase 3: pack files the index does not know and no writer holds are
    /// left-overs of crashed imports or gcs: delete them (`dry_run`: count
    /// them).
    pub(super) fn gc_orphans(&mut self, report: &mut GcReport, dry_run: bool) -> Result<()> {
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
        for p in layout::pack_files(self.dir()) {
            let Some(stem) = p.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if known.contains(stem) {
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
        Ok(())
    }
}
