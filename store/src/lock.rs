//! Advisory file locks (`flock`) coordinating processes that share a store:
//! a pack writer holds its pack locked until it closes it, gc holds
//! `gc.lock`, and `packs.lock` closes the window between creating a pack
//! file and locking it (spec/STORE.md, "Concurrency").

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::error::{Result, StoreError};

/// Lock kinds.
#[derive(Clone, Copy)]
pub enum Mode {
    Shared,
    Exclusive,
}

/// Take a lock on an open file. `wait = false` returns `Ok(false)` when
/// another process holds a conflicting lock.
pub fn flock(file: &File, mode: Mode, wait: bool) -> std::io::Result<bool> {
    use rustix::fs::FlockOperation as Op;
    let op = match (mode, wait) {
        (Mode::Shared, true) => Op::LockShared,
        (Mode::Exclusive, true) => Op::LockExclusive,
        (Mode::Shared, false) => Op::NonBlockingLockShared,
        (Mode::Exclusive, false) => Op::NonBlockingLockExclusive,
    };
    loop {
        match rustix::fs::flock(file, op) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::WOULDBLOCK) if !wait => return Ok(false),
            Err(e) => return Err(e.into()),
        }
    }
}

/// A lock file held until dropped (closing the descriptor releases it).
pub struct LockFile {
    _file: File,
}

impl LockFile {
    /// Open (creating) `path` and lock it; `None` when `wait` is false and the
    /// lock is held elsewhere.
    pub fn acquire(path: &Path, mode: Mode, wait: bool) -> Result<Option<LockFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        if flock(&file, mode, wait).map_err(|e| StoreError::io(path, e))? {
            Ok(Some(LockFile { _file: file }))
        } else {
            Ok(None)
        }
    }
}
