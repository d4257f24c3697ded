//! Durability of a command's `meta/` files and deferred index commits:
//! written at once, fsynced together when the command is done.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::sync_dir;
use crate::error::{Result, StoreError};
use crate::layout;

/// Durability of what one command writes besides packs: the `meta/`
/// files, and the index commits of an import of several recordings.
///
/// `meta/` files: fsyncing each file and its directory as it was written
/// cost an import of 11 small recordings 100 extra fsyncs, each its own
/// journal commit; instead the files are written and renamed at once and
/// fsynced (files, then their directories up to the store's) when the
/// command is done with the store ([`MetaSync::flush`], also on drop): the
/// first fsync commits the journal transaction holding all of them, the
/// others find their changes committed. Not `syncfs`, which also waits for
/// every other process's dirty data on the file system (1.2 s for a small
/// import beside a large copy). Until then a power failure can lose them, never a process
/// crash (the renames are in the page cache): the same kind of window as the
/// one between an index commit and its metadata write (spec/STORE.md,
/// "Recovery metadata"). Removals stay durable at once.
///
/// Index commits: an import commits each recording with
/// `synchronous=NORMAL` ([`MetaSync::defer_index`]: atomic, consistent,
/// safe against a killed process) and the flush fsyncs the index's log
/// once, before the `meta/` files (spec/STORE.md, "Import durability").
#[derive(Debug)]
pub struct MetaSync {
    dir: PathBuf,
    /// Files renamed into place since the last flush.
    files: std::cell::RefCell<Vec<PathBuf>>,
    /// Index commits were made without syncing the log.
    index: std::cell::Cell<bool>,
}

impl MetaSync {
    /// For the store at `dir`.
    pub fn new(dir: &Path) -> Self {
        MetaSync {
            dir: dir.to_path_buf(),
            files: std::cell::RefCell::new(Vec::new()),
            index: std::cell::Cell::new(false),
        }
    }

    /// Whether files were written since the last flush.
    pub fn pending(&self) -> bool {
        !self.files.borrow().is_empty()
    }

    /// Index commits are being made without syncing the index's log: the
    /// next flush fsyncs it.
    pub fn defer_index(&self) {
        self.index.set(true);
    }

    /// Whether index commits wait for the next flush to be durable.
    pub fn index_deferred(&self) -> bool {
        self.index.get()
    }

    /// Make everything deferred since the last flush durable: the index's
    /// log first (one fsync), then every `meta/` file written and the
    /// directories holding them, so a recording's file is never durable
    /// before the commit that added it.
    pub fn flush(&self) -> Result<()> {
        if self.index.get() {
            sync_index_log(&self.dir)?;
            self.index.set(false);
        }
        let files = std::mem::take(&mut *self.files.borrow_mut());
        // Start every file's write-back first, then wait for each: the
        // blocks of all of them are allocated in one journal transaction,
        // which the first wait commits, instead of one commit per file
        // (~4 ms each on a VM disk: 35 ms at the end of an import of three
        // recordings). `POSIX_FADV_DONTNEED` starts write-back without
        // waiting; failing, it only loses that overlap.
        let mut open = Vec::with_capacity(files.len());
        for f in &files {
            match File::open(f) {
                Ok(file) => {
                    let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
                    open.push((f, file));
                }
                // Removed since (an `rm` in the same command): nothing to keep.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io(f, e)),
            }
        }
        let mut dirs = std::collections::BTreeSet::new();
        for (f, file) in open {
            file.sync_data().map_err(|e| StoreError::io(f, e))?;
            // Its directory holds the rename; the ones above, directories
            // this command may have created.
            let mut d = f.parent();
            while let Some(p) = d {
                if !p.starts_with(&self.dir) || !dirs.insert(p.to_path_buf()) {
                    break;
                }
                d = p.parent();
            }
        }
        for d in dirs.iter().rev() {
            sync_dir(d)?;
        }
        Ok(())
    }

    /// `path` was renamed into place: fsynced at the next flush.
    pub(super) fn written(&self, path: &Path) {
        self.files.borrow_mut().push(path.to_path_buf());
    }
}

/// fsync the index's log (`index.sqlite-wal`, none is fine) of the store at
/// `dir`: makes every commit made with `synchronous=NORMAL` durable.
pub(crate) fn sync_index_log(dir: &Path) -> Result<()> {
    let wal = dir.join(format!("{}-wal", layout::INDEX_FILE));
    match File::open(&wal) {
        Ok(f) => f.sync_all().map_err(|e| StoreError::io(&wal, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(&wal, e)),
    }
}

impl Drop for MetaSync {
    fn drop(&mut self) {
        // A command that returns early (an error) still syncs what it wrote.
        let _ = self.flush();
    }
}
