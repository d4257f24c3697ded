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
//!
//! Where the administrator reserved a pool of 2 MiB pages
//! (`vm.nr_hugepages`), the 2 MiB-aligned interior of the arena comes from
//! that pool instead (`MAP_HUGETLB`), and only the edges are ordinary
//! pages. Pool pages never return to the kernel's free lists, and that is
//! the point: a VM whose host reclaims free guest memory (virtio free page
//! reporting) makes the first touch of transparent huge pages cost
//! 10-60x more whenever they were free for a few seconds, which made one
//! fresh-arena replay in ten run at a third of the speed (issue 24,
//! BENCHMARKS.md). Pool pages stay backed by the host after their first
//! use. Without a pool, or when it lacks free pages, the arena is what it
//! was: anonymous memory with transparent huge pages.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::memory::{pool_free_pages, POOL_PAGE};
use crate::backend::fixed_range::{map_file_noreplace, map_noreplace};
pub use crate::backend::fixed_range::{occupants, overlapping};
pub use crate::backend::rehydrate::ArenaMemory;

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

/// An empty memfd that may be sealed, close-on-exec: the arena memory an
/// executed runner is handed (`--arena-fd`), used when the parent must map
/// the arena too ([`ArenaMemory::Shared`]).
pub fn create_sealable_memfd(name: &str) -> std::io::Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
    // SAFETY: `cname` is a valid NUL-terminated string.
    let fd =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Size the runner's arena memfd to `len` bytes and seal its size (and its
/// seals): after this neither side can shrink it, so the parent's mapping
/// of it can never fault on a page cut away (SIGBUS) whatever the image
/// does with its descriptor.
pub fn seal_shared(fd: &OwnedFd, len: u64) -> std::io::Result<()> {
    File::from(fd.try_clone()?).set_len(len)?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on a descriptor we own, with an integer argument.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Map the arena at exactly `[lo, lo + len)` without replacing anything
/// that is there: its 2 MiB-aligned interior from the huge page pool when
/// the pool has the pages ([`map_pool_interior`]), the rest (or all of it)
/// as [`map_fixed_transparent`]; or, without pool pages and given a held
/// slot ([`super::held`]), that file ([`map_held`]). The mappings are
/// deliberately leaked: they are the arena for the rest of the runner
/// process' life.
pub fn map_fixed(lo: u64, len: u64, held: Option<&Path>) -> Result<ArenaMemory, String> {
    let pooled = map_pool_interior(lo, len);
    if let (None, Some(path)) = (pooled, held) {
        match OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
        {
            Ok(file) if file.metadata().is_ok_and(|m| m.len() >= len) => {
                return map_held(lo, len, &file).map(|()| ArenaMemory::Held);
            }
            // Gone or cut back (a user removing the directory): the arena
            // is fresh memory, as without a cache.
            _ => {}
        }
    }
    if let Some((a, b)) = pooled {
        let edges = [(lo, a), (b, lo + len)];
        let mut mapped = vec![(a, b)];
        for (x, y) in edges.into_iter().filter(|(x, y)| y > x) {
            if map_fixed_transparent(x, y - x).is_err() {
                // An edge is occupied: undo, and let the plain path name
                // what is there.
                for (x, y) in mapped {
                    unmap(x, y - x);
                }
                return map_fixed_transparent(lo, len).map(|()| ArenaMemory::Transparent);
            }
            mapped.push((x, y));
        }
        return Ok(ArenaMemory::Pool);
    }
    map_fixed_transparent(lo, len).map(|()| ArenaMemory::Transparent)
}

/// Map `[a, b)`, the 2 MiB-aligned interior of `[lo, lo + len)`, from the
/// huge page pool at its exact address; `None` (nothing mapped) when the
/// interior is empty, the pool does not have that many free pages, or the
/// kernel refuses. Without `MAP_NORESERVE` the kernel reserves every pool
/// page at `mmap`, so a pool that runs dry fails here rather than with a
/// SIGBUS at the first touch.
fn map_pool_interior(lo: u64, len: u64) -> Option<(u64, u64)> {
    let a = lo.checked_add(POOL_PAGE - 1)? & !(POOL_PAGE - 1);
    let b = lo.checked_add(len)? & !(POOL_PAGE - 1);
    if b <= a || pool_free_pages()? < (b - a) / POOL_PAGE {
        return None;
    }
    let ulen = usize::try_from(b - a).ok()?;
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; a
    // mapping placed elsewhere (kernels before 4.17) is undone below.
    let p = unsafe {
        libc::mmap(
            a as *mut libc::c_void,
            ulen,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    if p as u64 != a {
        // SAFETY: unmapping the mapping just created at the wrong place.
        unsafe { libc::munmap(p, ulen) };
        return None;
    }
    Some((a, b))
}

/// Map anonymous memory at exactly `[lo, lo + len)` without replacing
/// anything that is there ([`map_noreplace`]), advised to use transparent
/// huge pages, never from the huge page pool: what a range that a forked
/// child inherits must be, since the pool pages of a private mapping are
/// reserved for the process that mapped it, and a child's first touch
/// after the parent unmapped its copy could find the pool empty (SIGBUS).
pub fn map_fixed_transparent(lo: u64, len: u64) -> Result<(), String> {
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

/// Map the first `len` bytes of the held slot `file` at exactly `[lo, lo +
/// len)`, shared, and zero its first and last page, whose bytes outside
/// the recorded arena no fill writes (a fresh arena has zeros there).
/// Its page tables are built apart ([`populate_in_background`]), by the
/// runner: a fork does not copy the page tables of a shared file mapping.
pub fn map_held(lo: u64, len: u64, file: &File) -> Result<(), String> {
    map_file_noreplace(lo, len, file.as_fd())?;
    let page = page_size();
    for at in [lo, (lo + len).saturating_sub(page).max(lo)] {
        // SAFETY: `[at, at + page)` lies in the mapping just made (`len` is
        // a whole number of pages, at least one).
        unsafe { std::ptr::write_bytes(at as *mut u8, 0, page as usize) };
    }
    Ok(())
}

/// Build the page tables of the held slot mapped at `[lo, lo + len)` in
/// a call per 2 MiB instead of a fault per 4 KiB page at the first touch.
/// `MADV_POPULATE_READ` (Linux 5.14+; elsewhere the first touch faults
/// them in as before): a read fault of a shared tmpfs page maps its
/// neighbours too (fault-around), and, tmpfs needing no write
/// notification, writably; half the time of `MADV_POPULATE_WRITE`, and
/// the fill that follows takes no fault (BENCHMARKS.md, session 17). One
/// thread, 2 MiB per call: each call holds the address space's lock, which
/// the runtime preload's mappings also need, and the other cores serve the
/// preload and the parent meanwhile.
pub fn populate(lo: u64, len: u64) {
    let mut p = lo;
    while p < lo + len {
        let piece = (lo + len - p).min(POOL_PAGE);
        // SAFETY: advice over part of a range this process mapped; it only
        // maps pages that are there, it changes no contents.
        unsafe {
            libc::madvise(
                p as *mut libc::c_void,
                piece as usize,
                libc::MADV_POPULATE_READ,
            );
        }
        p += piece;
    }
}

/// [`populate`] on a thread of its own, so that the reservation's reply
/// does not wait for it; whoever writes the arena next joins it first.
/// `None` (nothing populated: the first touch faults) when no thread can
/// be started.
pub fn populate_in_background(lo: u64, len: u64) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("rrstore-populate".into())
        .spawn(move || populate(lo, len))
        .ok()
}

/// Unmap `[lo, lo + len)` mapped by [`map_fixed`] or
/// [`map_fixed_transparent`] in this process: the parent's copy of an
/// arena that a forked runner inherited, or the runner's arena when the
/// parent releases it.
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
        let err = map_fixed(addr, page as u64, None).unwrap_err();
        assert!(err.contains("occupied by"), "{err}");
        assert!(err.contains("rw-p"), "{err}");
    }

    #[test]
    fn maps_a_free_range_at_its_exact_address() {
        // A range the test process certainly does not use: 1 TiB up.
        let lo = 0x100_0000_0000u64;
        map_fixed(lo, 4 << 20, None).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert_eq!(overlapping(&maps, lo, lo + (4 << 20)).len(), 1);
        // A second reservation of the same range names the first.
        let err = map_fixed(lo, 4096, None).unwrap_err();
        assert!(err.contains("0x10000000000-"), "{err}");
    }

    #[test]
    fn a_held_slot_is_mapped_shared_with_its_edge_pages_zeroed() {
        use std::os::unix::fs::{DirBuilderExt, FileExt};
        let dir = std::path::PathBuf::from(format!(
            "/dev/shm/rrstore-arena-test-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        let cache = super::super::held::HeldArenas {
            limit: 1 << 20,
            dir: Some(dir.clone()),
        };
        let page = page_size();
        let h = cache.acquire(3 * page).unwrap().unwrap();
        // What an earlier replay left.
        h.file()
            .write_all_at(&vec![0xab; 3 * page as usize], 0)
            .unwrap();
        let lo = 0x150_0000_0000u64;
        map_fixed(lo, 3 * page, Some(h.path())).unwrap();
        // SAFETY: `[lo, lo + 3 pages)` was just mapped read-write.
        let arena = unsafe { std::slice::from_raw_parts_mut(lo as *mut u8, 3 * page as usize) };
        let (first, rest) = arena.split_at_mut(page as usize);
        let (middle, last) = rest.split_at_mut(page as usize);
        assert!(first.iter().chain(last.iter()).all(|&b| b == 0));
        assert!(middle.iter().all(|&b| b == 0xab));
        middle.fill(0x5a);
        unmap(lo, 3 * page);
        // Shared: the next replay's mapping finds the pages (and bytes).
        let mut back = vec![0u8; page as usize];
        h.file().read_exact_at(&mut back, page).unwrap();
        assert!(back.iter().all(|&b| b == 0x5a));
        // A slot smaller than the arena (cut back since): fresh memory.
        map_fixed(lo, 4 * page, Some(h.path())).unwrap();
        // SAFETY: as above, four pages now.
        let fresh = unsafe { std::slice::from_raw_parts(lo as *const u8, 4 * page as usize) };
        assert!(fresh.iter().all(|&b| b == 0));
        unmap(lo, 4 * page);
        drop(h);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn kernel_space_is_reported_as_outside_the_address_space() {
        let err = map_fixed(0xffff_8000_0000_0000, page_size(), None).unwrap_err();
        assert!(err.contains("outside"), "{err}");
    }

    /// Whether this machine has a huge page pool to test with; where
    /// `RRSTORE_TEST_HUGE_POOL` is set (scripts/test.sh reserves a pool as
    /// root and sets it), a missing pool fails the test instead.
    fn pool_or_skip() -> bool {
        let have = pool_free_pages().is_some_and(|n| n >= 2);
        let total = std::fs::read_to_string("/proc/sys/vm/nr_hugepages").unwrap_or_default();
        if total.trim() == "0" && std::env::var_os("RRSTORE_TEST_HUGE_POOL").is_some() {
            panic!("RRSTORE_TEST_HUGE_POOL is set but vm.nr_hugepages is 0");
        }
        if !have {
            eprintln!("no huge page pool (vm.nr_hugepages): the pool path is not exercised");
        }
        have
    }

    /// `KernelPageSize` of the mapping that starts at `start`, in KiB.
    fn kernel_page_kib(start: u64) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        crate::backend::fixed_range::smaps_sum(&smaps, start, start + 1, "KernelPageSize:")
            .map(|b| b >> 10)
    }

    #[test]
    fn pool_pages_back_the_aligned_interior_and_the_edges_are_ordinary() {
        if !pool_or_skip() {
            return;
        }
        // 6 MiB starting 12 KiB past a 2 MiB boundary, 1.125 TiB up: the
        // interior is the 4 MiB from the next boundary.
        let base = 0x120_0000_0000u64;
        let (lo, len) = (base + 0x3000, 6 << 20);
        map_fixed(lo, len, None).unwrap();
        let a = base + POOL_PAGE;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert_eq!(overlapping(&maps, lo, lo + len).len(), 3, "{maps}");
        assert_eq!(kernel_page_kib(a), Some(2048));
        assert_eq!(kernel_page_kib(lo), Some(4));
        assert_eq!(kernel_page_kib(a + (4 << 20)), Some(4));
        // Every byte is writable and reads back, across both seams.
        // SAFETY: `[lo, lo + len)` was just mapped read-write.
        let arena = unsafe { std::slice::from_raw_parts_mut(lo as *mut u8, len as usize) };
        for (i, b) in arena.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        assert!(arena.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        unmap(lo, len);
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(overlapping(&maps, lo, lo + len).is_empty(), "{maps}");
    }

    #[test]
    fn an_occupied_edge_undoes_the_pool_interior_and_names_the_occupant() {
        let pool = pool_or_skip();
        let base = 0x130_0000_0000u64;
        let (lo, len) = (base + 0x3000, 6 << 20);
        // Something already sits in the upper edge.
        let squatter = lo + len - 0x1000;
        map_fixed_transparent(squatter, 0x1000).unwrap();
        let err = map_fixed(lo, len, None).unwrap_err();
        assert!(err.contains("occupied by"), "{err}");
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let left = overlapping(&maps, lo, lo + len);
        assert_eq!(
            left.len(),
            1,
            "only the squatter is left: {left:?} (pool: {pool})"
        );
        assert!(left[0].starts_with(&format!("{squatter:#x}-")), "{left:?}");
        unmap(squatter, 0x1000);
    }

    #[test]
    fn a_pool_without_enough_free_pages_leaves_the_arena_transparent() {
        if !pool_or_skip() {
            return;
        }
        // More pages than the whole pool has: the pool path gives up
        // before mapping anything, and one ordinary mapping is the arena.
        let total: u64 = std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let base = 0x140_0000_0000u64;
        let len = (total + 1) * POOL_PAGE;
        map_fixed(base, len, None).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert_eq!(overlapping(&maps, base, base + len).len(), 1, "{maps}");
        assert_eq!(kernel_page_kib(base), Some(4));
        unmap(base, len);
    }
}
