//! Appending chunk entries to a pack file owned by this process.
//!
//! A writer creates a fresh pack (never appends to another process's pack),
//! holds an exclusive `flock` on it until dropped so gc leaves it alone, and
//! makes its entries durable with [`PackWriter::sync`] before the index
//! commit that references them.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};
use crate::layout;
use crate::lock::{self, LockFile, Mode};
use crate::pack::{pack_header, EntryHeader, PACK_HEADER_LEN};

/// Start write-back of appended bytes every this many bytes.
const WRITEBACK_STEP: u64 = 4 << 20;

pub struct PackWriter {
    name: String,
    path: PathBuf,
    out: BufWriter<File>,
    /// Bytes written (buffered included).
    len: u64,
    /// Bytes known durable.
    synced_len: u64,
    /// Bytes whose write-back has been started (see `append`).
    started_len: u64,
    dir_synced: bool,
}

impl PackWriter {
    /// Create a new, locked pack file in the store at `dir`.
    pub fn create(dir: &Path) -> Result<PackWriter> {
        let id = random_id();
        let name = rrstore_format::id::hex(&id);
        let path = layout::pack_path(dir, &name);
        let fan = path.parent().unwrap_or(dir).to_path_buf();
        std::fs::create_dir_all(&fan).map_err(|e| StoreError::io(&fan, e))?;
        // Hold packs.lock (shared) across create + flock so a concurrent gc
        // never sees this file unlocked and mistakes it for an orphan.
        let guard = LockFile::acquire(&dir.join(layout::PACKS_LOCK), Mode::Shared, true)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        lock::flock(&file, Mode::Exclusive, true).map_err(|e| StoreError::io(&path, e))?;
        drop(guard);
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&pack_header(&id))
            .map_err(|e| StoreError::io(&path, e))?;
        Ok(PackWriter {
            name,
            path,
            out,
            len: PACK_HEADER_LEN,
            synced_len: 0,
            started_len: 0,
            dir_synced: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the pack so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len <= PACK_HEADER_LEN
    }

    /// Append one entry; returns the offset of its header.
    pub fn append(&mut self, header: &EntryHeader, stored: &[u8]) -> Result<u64> {
        let offset = self.len;
        let h = header.encode();
        self.out
            .write_all(&h)
            .and_then(|_| self.out.write_all(stored))
            .map_err(|e| StoreError::io(&self.path, e))?;
        self.len += h.len() as u64 + stored.len() as u64;
        if self.len - self.started_len >= WRITEBACK_STEP {
            self.start_writeback()?;
        }
        Ok(offset)
    }

    /// Hand what was appended to the kernel and start its write-back now,
    /// without waiting, so the `fdatasync` before the commit finds little
    /// left to write (I/O overlaps chunking and compression).
    fn start_writeback(&mut self) -> Result<()> {
        self.out
            .flush()
            .map_err(|e| StoreError::io(&self.path, e))?;
        // POSIX_FADV_DONTNEED starts write-back of the dirty range on Linux
        // (and lets the page cache drop it once written); failure only
        // loses the optimization, fdatasync still follows.
        let _ = rustix::fs::fadvise(
            self.out.get_ref(),
            self.started_len,
            std::num::NonZeroU64::new(self.len - self.started_len),
            rustix::fs::Advice::DontNeed,
        );
        self.started_len = self.len;
        Ok(())
    }

    /// Make everything appended so far durable (file data, and the directory
    /// entries the first time).
    pub fn sync(&mut self) -> Result<()> {
        if self.synced_len == self.len {
            return Ok(());
        }
        self.out
            .flush()
            .map_err(|e| StoreError::io(&self.path, e))?;
        self.out
            .get_ref()
            .sync_data()
            .map_err(|e| StoreError::io(&self.path, e))?;
        if !self.dir_synced {
            if let Some(fan) = self.path.parent() {
                sync_dir(fan)?;
                if let Some(packs) = fan.parent() {
                    sync_dir(packs)?;
                }
            }
            self.dir_synced = true;
        }
        self.synced_len = self.len;
        Ok(())
    }
}

/// fsync a directory so the entries created in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(dir, e))
}

/// 16 random bytes for a pack ID (from the kernel; a time/pid hash if that
/// is unavailable).
fn random_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    let filled = rustix::rand::getrandom(&mut id, rustix::rand::GetRandomFlags::empty());
    if !matches!(filled, Ok(n) if n == id.len()) {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut h = blake3::Hasher::new();
        h.update(&std::process::id().to_le_bytes());
        h.update(
            &COUNTER
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                .to_le_bytes(),
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        h.update(&now.to_le_bytes());
        id.copy_from_slice(&h.finalize().as_bytes()[..16]);
    }
    id
}
