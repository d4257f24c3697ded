//! The arena's memory in the runner: anonymous memory mapped at the
//! page-rounded range `[lo, hi)` around the recorded arena
//! `[base, base + size)` (through [`crate::backend::fixed_range`], which
//! also names whatever occupies a range we could not map), advised to use
//! transparent huge pages; and the memfd the runner loads images from.
//!
//! Why anonymous memory owned by the runner rather than shared memory: the
//! first touch of each page is the dominant cost of rehydrating a fresh
//! arena (a page fault and zeroing per 4 KiB page; ~3 us per page on a VM),
//! and shared memory (memfd, tmpfs) gets 2 MiB pages only where the
//! administrator enabled them (`shmem_enabled`, off by default), while
//! `MADV_HUGEPAGE` on anonymous memory works with the default `madvise`
//! setting: 512 times fewer faults. The parent writes and reads it with
//! `process_vm_writev`/`readv` (see `transfer`).

use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd};

use crate::backend::fixed_range::map_noreplace;
pub use crate::backend::fixed_range::{occupants, overlapping};

/// Page-rounded range `[lo, hi)` covering `[base, base + size)`.
pub fn page_range(base: u64, size: u64) -> Option<(u64, u64)> {
    let page = page_size();
    let lo = base & !(page - 1);
    let end = base.checked_add(size.max(1))?;
    let hi = end.checked_add(page - 1)? & !(page - 1);
    Some((lo, hi))
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// A memfd of `len` bytes (zero-filled), close-on-exec.
pub fn create_memfd(name: &str, len: u64) -> std::io::Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
    // SAFETY: `cname` is a valid NUL-terminated string.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    File::from(owned.try_clone()?).set_len(len)?;
    Ok(owned)
}

/// Map anonymous memory at exactly `[lo, lo + len)` without replacing
/// anything that is there ([`map_noreplace`]), advised to use transparent
/// huge pages. The mapping is deliberately leaked: it is the arena for the
/// rest of the runner process' life.
pub fn map_fixed(lo: u64, len: u64) -> Result<(), String> {
    map_noreplace(lo, len, libc::PROT_READ | libc::PROT_WRITE)?;
    // Advice only: without transparent huge pages (`enabled` = never) the
    // arena simply keeps 4 KiB pages.
    // SAFETY: advising the mapping just created, over its exact range
    // (its length fit usize there).
    unsafe {
        libc::madvise(lo as *mut libc::c_void, len as usize, libc::MADV_HUGEPAGE);
    }
    Ok(())
}

/// Unmap `[lo, lo + len)` mapped by [`map_fixed`] in this process: the
/// parent's copy of an arena that a forked runner inherited.
pub fn unmap(lo: u64, len: u64) {
    if let Ok(ulen) = usize::try_from(len) {
        // SAFETY: the caller mapped exactly this range with `map_fixed` and
        // nothing in this process refers to it.
        unsafe { libc::munmap(lo as *mut libc::c_void, ulen) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_range_rounds_out() {
        let p = page_size();
        assert_eq!(page_range(p + 16, 64), Some((p, 2 * p)));
        assert_eq!(page_range(p, p), Some((p, 2 * p)));
        assert_eq!(page_range(u64::MAX - 10, 100), None);
    }

    #[test]
    fn mapping_over_an_existing_mapping_names_the_occupant() {
        let page = page_size() as usize;
        let heap = vec![0u8; 4 * page];
        let addr = (heap.as_ptr() as u64 + page as u64 - 1) & !(page as u64 - 1);
        let err = map_fixed(addr, page as u64).unwrap_err();
        assert!(err.contains("occupied by"), "{err}");
        assert!(err.contains("rw-p"), "{err}");
    }

    #[test]
    fn maps_a_free_range_at_its_exact_address() {
        // A range the test process certainly does not use: 1 TiB up.
        let lo = 0x100_0000_0000u64;
        map_fixed(lo, 4 << 20).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert_eq!(overlapping(&maps, lo, lo + (4 << 20)).len(), 1);
        // A second reservation of the same range names the first.
        let err = map_fixed(lo, 4096).unwrap_err();
        assert!(err.contains("0x10000000000-"), "{err}");
    }

    #[test]
    fn kernel_space_is_reported_as_outside_the_address_space() {
        let err = map_fixed(0xffff_8000_0000_0000, page_size()).unwrap_err();
        assert!(err.contains("outside"), "{err}");
    }
}
