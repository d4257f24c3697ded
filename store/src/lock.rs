//! Advisory file locks (`flock`) coordinating processes that share a store:
//! a pack writer holds its pack locked until it closes it, gc holds
//! `gc.lock`, and `packs.lock` closes the window between creating a pack
//! file and locking it (spec/STORE.md, "Concurrency").

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
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
    let mut op = match mode {
        Mode::Shared => libc::LOCK_SH,
        Mode::Exclusive => libc::LOCK_EX,
    };
    if !wait {
        op |= libc::LOCK_NB;
    }
    loop {
        // SAFETY: flock on a valid, open file descriptor has no memory effects.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if !wait => return Ok(false),
            _ => return Err(e),
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
