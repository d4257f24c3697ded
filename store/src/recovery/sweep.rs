//! Checking the recovery metadata against the index: recordings whose
//! metadata the index does not list (gc's safety check), and the sweep of
//! part chunk lists no recording names.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{index_err, list, sync_dir};
use crate::error::{Result, StoreError};
use crate::layout::{META_PARTS, META_RECORDINGS};

/// Recording metadata files whose recording the index does not list: how
/// many, and the first one's ID.
pub fn unaccounted(conn: &Connection, dir: &Path) -> Result<(u64, Option<String>)> {
    let mut stmt = conn
        .prepare_cached("SELECT 1 FROM recordings WHERE id_hex = ?1")
        .map_err(index_err(dir, "checking recordings against their metadata"))?;
    let mut n = 0;
    let mut first = None;
    for p in list(dir, META_RECORDINGS)? {
        let hex = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let known = stmt
            .exists([&hex])
            .map_err(index_err(dir, "checking recordings against their metadata"))?;
        if !known {
            n += 1;
            first.get_or_insert(hex);
        }
    }
    Ok((n, first))
}

impl crate::Store {
    /// gc's safety check: fail with [`StoreError::IndexIncomplete`] when a
    /// recording's metadata is in the store but the index does not list it
    /// (the index was lost or replaced: its data would look unreferenced).
    /// Runs under the index's write lock, so no import is between writing
    /// its metadata and committing.
    pub fn check_index_accounts_for_store(&mut self) -> Result<()> {
        let dir = self.dir().to_path_buf();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(index_err(&dir, "locking the index to check it"))?;
        let (missing, example) = unaccounted(&tx, &dir)?;
        drop(tx);
        if missing > 0 {
            return Err(StoreError::IndexIncomplete {
                dir,
                missing,
                example: example.unwrap_or_default(),
            });
        }
        Ok(())
    }
}

impl crate::Store {
    /// gc's sweep of `meta/parts/`: remove the chunk lists of parts no
    /// recording in the index names any more (`repair` reads only those a
    /// recording names; a part kept for an image or a saved output needs
    /// none). Each file is checked and removed while this process holds
    /// the index's write lock, so no import or pull can commit a recording
    /// that names the part in between; one that commits after writes the
    /// list again (it writes a missing one after its commit). Returns how
    /// many were (with `dry_run`: would be) removed.
    pub(crate) fn sweep_part_lists(&mut self, dry_run: bool) -> Result<u64> {
        let dir = self.dir().to_path_buf();
        let files = list(&dir, META_PARTS)?;
        if files.is_empty() {
            return Ok(0);
        }
        if dry_run {
            return sweep_unnamed(&self.conn, &dir, &files, true);
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(index_err(&dir, "gc: locking the index to sweep meta/parts"))?;
        let removed = sweep_unnamed(&tx, &dir, &files, false)?;
        // Nothing was written: ending it only releases the lock.
        tx.rollback().map_err(index_err(
            &dir,
            "gc: unlocking the index after sweeping meta/parts",
        ))?;
        Ok(removed)
    }
}

/// Of the part lists `files`, those whose part no recording in `conn`'s
/// index names: unlinked (directories fsynced after), or with `dry_run`
/// only counted. Returns how many.
fn sweep_unnamed(conn: &Connection, dir: &Path, files: &[PathBuf], dry_run: bool) -> Result<u64> {
    let ierr = index_err(dir, "gc: checking the parts' recovery chunk lists");
    let mut named = conn
        .prepare_cached("SELECT 1 FROM recording_parts WHERE part = ?1")
        .map_err(&ierr)?;
    let mut removed = 0;
    let mut dirs = std::collections::BTreeSet::new();
    for p in files {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        // A name that is not a part hash is not ours to judge.
        let Some(hash) = name.as_deref().and_then(rrstore_format::id::parse_hex32) else {
            continue;
        };
        if named.exists([&hash[..]]).map_err(&ierr)? {
            continue;
        }
        removed += 1;
        if dry_run {
            continue;
        }
        match std::fs::remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(StoreError::io(p, e)),
            _ => {}
        }
        if let Some(d) = p.parent() {
            dirs.insert(d.to_path_buf());
        }
    }
    for d in &dirs {
        sync_dir(d)?;
    }
    Ok(removed)
}
