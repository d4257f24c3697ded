//! The parent's side of the trust boundary: everything the verdict rests
//! on is read by rrstore, never reported by the runner.
//!
//! Once the runner has loaded the image it runs foreign code, which can
//! take over its control socket and answer any request (a hostile image
//! did, and replied with the recorded output hash it found in memory). So
//! after the last launch the parent stops the runner (SIGSTOP to it and its
//! group: [`RunnerProcess::stop`](super::process::RunnerProcess::stop)),
//! waits until every thread of it has stopped, and only then reads the
//! arena: with `process_vm_readv` straight from the stopped runner's
//! memory (in pieces, hashed on every core as they arrive:
//! [`crate::hash::parallel_blake3_read`]), or, where that call is
//! forbidden, through its own mapping of the sealed memfd the runner
//! mapped as its arena ([`SharedView`]). A relocated arena is translated
//! back to the recorded addresses in the same pass (and written back, so
//! that the bytes read afterwards are the translated ones). The kernel's
//! time is measured by the parent around the launch request.
//!
//! A stopped runner runs no more of the image before the result is known:
//! it is killed when the backend ends, and only a runner with a large
//! arena is resumed first, after everything was read, to unmap it on
//! request (issue 24).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use super::client::{driver, internal};
use super::process::Stopped;
use super::{transfer, HostBackend};
use crate::backend::BackendError;
use crate::placement::Rebaser;

/// The parent's own mapping of a shared arena (the runner's sealed memfd,
/// `ArenaMemory::Shared`), covering the page range `[lo, lo + len)`.
pub(super) struct SharedView {
    ptr: *mut u8,
    len: usize,
    lo: u64,
}

impl SharedView {
    /// Map the sealed memfd `fd` of `len` bytes, which the runner maps at
    /// `lo`.
    pub(super) fn map(fd: &OwnedFd, lo: u64, len: u64) -> std::io::Result<SharedView> {
        let ulen = usize::try_from(len).map_err(std::io::Error::other)?;
        // SAFETY: a fresh shared mapping of a file we hold, at an address of
        // the kernel's choosing; its size is sealed (`arena::seal_shared`),
        // so no page of it can be cut away while it is mapped.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ulen,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(SharedView {
            ptr: p.cast(),
            len: ulen,
            lo,
        })
    }

    /// The bytes at runner address `addr..addr + len`, if they lie inside.
    fn range(&self, addr: u64, len: usize) -> Option<(*mut u8, usize)> {
        let off = usize::try_from(addr.checked_sub(self.lo)?).ok()?;
        (off.checked_add(len)? <= self.len).then(|| {
            // SAFETY: `off + len` lies within the mapping (checked above).
            (unsafe { self.ptr.add(off) }, len)
        })
    }

    /// Copy `data` to runner address `addr`.
    pub(super) fn write(&self, addr: u64, data: &[u8]) -> Option<()> {
        let (p, n) = self.range(addr, data.len())?;
        // SAFETY: `p..p + n` lies in our writable mapping; the runner may
        // write the same pages meanwhile (it is another process: no Rust
        // reference of ours aliases them), which only decides the bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, n) };
        Some(())
    }

    /// Copy the bytes at runner address `addr` into `dst`.
    pub(super) fn read(&self, addr: u64, dst: &mut [u8]) -> Option<()> {
        let (p, n) = self.range(addr, dst.len())?;
        // SAFETY: as in `write`, reading instead.
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), n) };
        Some(())
    }

    /// The bytes at runner address `addr..addr + len`, for hashing once
    /// the runner is stopped.
    ///
    /// # Safety
    /// The runner is stopped or gone, so nothing writes them while the
    /// slice lives, and no other slice of them is alive.
    unsafe fn slice_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let (p, n) = self.range(addr, len)?;
        // SAFETY: in the mapping (range), exclusive (the caller's contract).
        Some(unsafe { std::slice::from_raw_parts_mut(p, n) })
    }
}

impl Drop for SharedView {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping `map` made; no slice of it
        // outlives the borrow that made it.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

// SAFETY: the view is a plain mapping; the backend that owns it is moved
// between threads (lanes) but used from one at a time.
unsafe impl Send for SharedView {}

impl HostBackend {
    /// Stop the runner before anything of the arena is read back: replies
    /// still due are collected first (they were sent before the launch),
    /// then no code of the image runs again. A runner found dead is
    /// reported as its death (a crash after the launch's reply).
    pub(super) fn freeze(&mut self) -> Result<(), BackendError> {
        if self.frozen {
            return Ok(());
        }
        self.settle()?;
        let stopped = self.live()?.stop();
        match stopped {
            Ok(Stopped::Stopped) => {
                self.frozen = true;
                Ok(())
            }
            Ok(Stopped::Ended) => Err(self.collect_death()),
            Err(e) => Err(driver("stopping the host runner", e)),
        }
    }

    /// [`Backend::restore_words`](crate::backend::Backend::restore_words)
    /// on the stopped runner: read and written by this process.
    pub(super) fn restore_stopped(
        &mut self,
        words: &[(u64, u64, u64)],
    ) -> Result<u64, BackendError> {
        self.freeze()?;
        let base = self.arena_at(0, 0)?.base;
        let pid = self.live()?.pid;
        let mut n = 0;
        for &(at, now, recorded) in words {
            self.arena_at(at, 8)?;
            let mut b = [0u8; 8];
            match self.shared.as_ref() {
                Some(view) => view
                    .read(base + at, &mut b)
                    .ok_or_else(|| internal("the arena lies outside its shared mapping"))?,
                None => transfer::read_remote(pid, base + at, &mut b)
                    .map_err(|e| self.arena_io_error("process_vm_readv", at, 8, e))?,
            }
            if u64::from_le_bytes(b) != now {
                continue;
            }
            let b = recorded.to_le_bytes();
            match self.shared.as_ref() {
                Some(view) => view
                    .write(base + at, &b)
                    .ok_or_else(|| internal("the arena lies outside its shared mapping"))?,
                None => transfer::write_remote(pid, base + at, &b)
                    .map_err(|e| self.arena_io_error("process_vm_writev", at, 8, e))?,
            }
            n += 1;
        }
        Ok(n)
    }

    /// The blake3 of the arena, read by this process from the stopped
    /// runner; with `translate`, the arena is translated back to the
    /// recorded addresses first, in the same pass, and written back; the
    /// count of translated words comes with the hash.
    pub(super) fn judge(
        &mut self,
        translate: Option<&Rebaser>,
    ) -> Result<([u8; 32], u64), BackendError> {
        self.freeze()?;
        let a = self.arena_at(0, 0)?;
        let (base, size) = (a.base, a.size);
        let pid = self.live()?.pid;
        let words = AtomicU64::new(0);
        let prepare = |b: &mut [u8], at: u64| {
            if let Some(r) = translate {
                words.fetch_add(r.back_translate(b, at), Ordering::Relaxed);
            }
        };
        if let Some(view) = self.shared.as_mut() {
            let len = usize::try_from(size).map_err(|e| internal(e.to_string()))?;
            // SAFETY: the runner is stopped (`freeze`), and this is the only
            // slice of the view alive.
            let bytes = unsafe { view.slice_mut(base, len) }
                .ok_or_else(|| internal("the arena lies outside its shared mapping"))?;
            let hash = match translate {
                Some(_) => crate::hash::parallel_blake3_prepared(bytes, &prepare),
                None => crate::hash::parallel_blake3(bytes),
            };
            return Ok((hash, words.into_inner()));
        }
        let read = |b: &mut [u8], at: u64| {
            transfer::read_remote(pid, base + at, b)?;
            if translate.is_some() {
                prepare(b, at);
                transfer::write_remote(pid, base + at, b)?;
            }
            Ok(())
        };
        match crate::hash::parallel_blake3_read(size, &read) {
            Ok(hash) => Ok((hash, words.into_inner())),
            Err(e) => Err(self.arena_io_error("process_vm_readv", 0, size as usize, e)),
        }
    }
}
