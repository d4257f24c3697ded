//! Moving bytes between the parent and the runner's arena.
//!
//! The arena lives in the runner (see `arena`). The parent copies into and
//! out of it with `process_vm_writev`/`process_vm_readv`: one kernel copy
//! from a buffer that is hot in this core's cache, split across cores for
//! large pieces, with no shared mapping and no pipe. The engine decodes the
//! input into a [`StagingBuf`] (the backend's staging window) first.
//!
//! Some sandboxes forbid these calls (a seccomp profile without them, Yama
//! `ptrace_scope` 2 or 3); the backend then falls back to sending the bytes
//! over its control socket (see the `Write`/`Read` requests), which is one
//! more copy but works everywhere.

use std::io;

/// Pieces at least this long are copied on several threads.
const PARALLEL_MIN: usize = 2 << 20;
/// Transparent huge page size on x86-64.
const HUGE_PAGE: usize = 2 << 20;

/// Copy `data` into process `pid` at address `addr`.
pub fn write_remote(pid: libc::pid_t, addr: u64, data: &[u8]) -> io::Result<()> {
    // SAFETY: `data` is initialized memory, borrowed for the whole copy;
    // `process_vm_writev` only reads it.
    unsafe {
        copy_remote(
            pid,
            addr,
            data.as_ptr() as usize,
            data.len(),
            libc::process_vm_writev,
        )
    }
}

/// Copy `dst.len()` bytes of process `pid` at address `addr` into `dst`.
pub fn read_remote(pid: libc::pid_t, addr: u64, dst: &mut [u8]) -> io::Result<()> {
    // SAFETY: `dst` is exclusively borrowed for the whole copy, and the
    // pieces the threads write are disjoint.
    unsafe {
        copy_remote(
            pid,
            addr,
            dst.as_mut_ptr() as usize,
            dst.len(),
            libc::process_vm_readv,
        )
    }
}

/// The signature `process_vm_readv` and `process_vm_writev` share.
type VmCopy = unsafe extern "C" fn(
    libc::pid_t,
    *const libc::iovec,
    libc::c_ulong,
    *const libc::iovec,
    libc::c_ulong,
    libc::c_ulong,
) -> isize;

/// Copy `len` bytes between this process at `local` and process `pid` at
/// `remote`, in one piece per core when large, with `op` (which fixes the
/// direction).
///
/// # Safety
/// `local..local + len` is memory of this process that `op` may read (a
/// write) or write (a read) for the duration of the call.
unsafe fn copy_remote(
    pid: libc::pid_t,
    remote: u64,
    local: usize,
    len: usize,
    op: VmCopy,
) -> io::Result<()> {
    split(len, |at, n| {
        let mut done = 0;
        while done < n {
            let local = libc::iovec {
                iov_base: (local + at + done) as *mut libc::c_void,
                iov_len: n - done,
            };
            let remote = libc::iovec {
                iov_base: (remote + (at + done) as u64) as *mut libc::c_void,
                iov_len: n - done,
            };
            // SAFETY: `local` lies in the caller's buffer (this function's
            // contract), split into disjoint pieces per thread; the kernel
            // checks `remote` against the target's mappings and fails with
            // EFAULT outside them.
            let r = unsafe { op(pid, &local, 1, &remote, 1, 0) };
            done += transferred(r)?;
        }
        Ok(())
    })
}

fn transferred(n: isize) -> io::Result<usize> {
    match n {
        n if n > 0 => Ok(n as usize),
        0 => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the runner's arena ended early",
        )),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Run `copy(offset, len)` over `0..total`, in one piece per core when
/// `total` is large.
fn split(total: usize, copy: impl Fn(usize, usize) -> io::Result<()> + Sync) -> io::Result<()> {
    // Small copies first: asking for the CPU count reads cgroup files.
    if total < PARALLEL_MIN {
        return copy(0, total);
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(total / (PARALLEL_MIN / 2))
        .max(1);
    if threads == 1 {
        return copy(0, total);
    }
    let step = total.div_ceil(threads);
    std::thread::scope(|s| {
        let copy = &copy;
        let others: Vec<_> = (1..threads)
            .map(|i| {
                let at = (i * step).min(total);
                let len = step.min(total - at);
                s.spawn(move || copy(at, len))
            })
            .collect();
        let mut result = copy(0, step.min(total));
        for t in others {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("a copy thread panicked")));
            result = result.and(r);
        }
        result
    })
}

/// Whether `e` says this process may not use `process_vm_*` on the runner
/// (rather than that the runner is gone or the range is wrong).
pub fn is_forbidden(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM) | Some(libc::ENOSYS) | Some(libc::EACCES)
    )
}

/// An anonymous buffer advised to use transparent huge pages and aligned to
/// them: the staging window the engine decodes into (its first fill takes a
/// few page faults, not one per 4 KiB). Unmapped on drop.
pub struct StagingBuf {
    map: *mut libc::c_void,
    map_len: usize,
    data: *mut u8,
    len: usize,
}

// SAFETY: the buffer is plain memory owned by this value; moving it to
// another thread moves the only handle to it.
unsafe impl Send for StagingBuf {}

impl StagingBuf {
    pub fn new(len: usize) -> io::Result<StagingBuf> {
        let map_len = len
            .checked_add(HUGE_PAGE)
            .ok_or_else(|| io::Error::other("staging buffer too large"))?;
        // SAFETY: a fresh private anonymous mapping at an address the kernel
        // picks; nothing existing is touched.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let data = (map as usize).next_multiple_of(HUGE_PAGE);
        // SAFETY: `data..data + len` lies inside the mapping (it was
        // over-allocated by one huge page for the alignment); the advice is
        // only a hint.
        unsafe {
            libc::madvise(data as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
        Ok(StagingBuf {
            map,
            map_len,
            data: data as *mut u8,
            len,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `data` points at `len` readable, writable bytes of the
        // mapping owned by `self`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len) }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: as in `as_mut_slice`, borrowed shared through `self`.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }
}

impl Drop for StagingBuf {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping `new` created.
        unsafe {
            libc::munmap(self.map, self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_into_and_out_of_a_process_in_parallel_pieces() {
        // This process stands in for the runner: the copy mechanics are the
        // same for any target process.
        let pid = std::process::id() as libc::pid_t;
        let src: Vec<u8> = (0..(5u32 << 20) + 333).map(|i| (i % 251) as u8).collect();
        let mut target = vec![0u8; src.len()];
        write_remote(pid, target.as_mut_ptr() as u64, &src).unwrap();
        assert!(target == src);
        let mut back = vec![0u8; src.len()];
        read_remote(pid, target.as_ptr() as u64, &mut back).unwrap();
        assert!(back == src);
    }

    #[test]
    fn a_range_outside_the_target_is_an_error_not_a_crash() {
        let pid = std::process::id() as libc::pid_t;
        let err = write_remote(pid, 0x10, &[1, 2, 3]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EFAULT), "{err}");
        assert!(!is_forbidden(&err));
    }

    #[test]
    fn staging_buffers_are_huge_page_aligned_and_writable() {
        let mut b = StagingBuf::new(3 << 20).unwrap();
        assert_eq!(b.as_mut_slice().as_ptr() as usize % HUGE_PAGE, 0);
        b.as_mut_slice().fill(7);
        assert_eq!(b.as_slice().len(), 3 << 20);
        assert!(b.as_slice().iter().all(|&x| x == 7));
    }
}
