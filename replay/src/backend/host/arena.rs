//! The arena's memory: one memfd shared by the parent (which decodes the
//! input into it and compares the output in place) and the runner child
//! (which maps it at the recorded address), plus the `/proc/self/maps`
//! lookup that names whatever occupies a range we could not map.
//!
//! The memfd covers the page-rounded range `[lo, hi)` around the recorded
//! arena `[base, base + size)`; the arena starts `base - lo` bytes into it.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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

/// A shared read-write mapping of a whole memfd, unmapped on drop.
pub struct SharedMap {
    ptr: *mut u8,
    len: usize,
}

impl SharedMap {
    /// Map `len` bytes of `fd` anywhere (the parent's view). `populate`
    /// allocates and maps every page now (`MAP_POPULATE`: one pass in the
    /// kernel instead of one page fault per page while rehydrating).
    pub fn map(fd: RawFd, len: u64, populate: bool) -> std::io::Result<SharedMap> {
        let len = usize::try_from(len).map_err(std::io::Error::other)?;
        // SAFETY: mapping a file descriptor we own with a length we set; the
        // kernel picks the address, so nothing existing is replaced.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | if populate { libc::MAP_POPULATE } else { 0 },
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(SharedMap { ptr: p.cast(), len })
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` is a live mapping of `len` readable, writable bytes
        // owned by `self`; the child process writes it only while the parent
        // waits for a launch to finish (no concurrent Rust access).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping this value created.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// Map `fd` at exactly `[lo, lo + len)` without replacing anything that is
/// there (`MAP_FIXED_NOREPLACE`). The mapping is deliberately leaked: it is
/// the arena for the rest of the runner process' life.
pub fn map_fixed(fd: RawFd, lo: u64, len: u64) -> Result<(), String> {
    let Ok(ulen) = usize::try_from(len) else {
        return Err("the range does not fit the address space".into());
    };
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; on
    // kernels older than 4.17 the flag is ignored and the kernel may choose
    // another address, which we detect and undo below.
    let p = unsafe {
        libc::mmap(
            lo as *mut libc::c_void,
            ulen,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let err = std::io::Error::last_os_error();
        let occupants = occupants(lo, lo.saturating_add(len));
        return Err(match err.raw_os_error() {
            Some(libc::EEXIST) if !occupants.is_empty() => {
                format!("the range is occupied by {}", occupants.join("; "))
            }
            Some(libc::EEXIST) => "the range is already mapped in the runner".into(),
            Some(libc::EPERM) | Some(libc::EACCES) => format!(
                "{err} (addresses below vm.mmap_min_addr cannot be mapped by unprivileged processes)"
            ),
            Some(libc::ENOMEM) => {
                format!("{err} (the range is outside this machine's user address space)")
            }
            _ => err.to_string(),
        });
    }
    if p as u64 != lo {
        // SAFETY: unmapping the mapping we just created at the wrong place.
        unsafe {
            libc::munmap(p, ulen);
        }
        let occ = occupants(lo, lo.saturating_add(len));
        return Err(if occ.is_empty() {
            "the kernel placed the mapping elsewhere (MAP_FIXED_NOREPLACE needs Linux 4.17+)".into()
        } else {
            format!("the range is occupied by {}", occ.join("; "))
        });
    }
    Ok(())
}

/// Lines of `/proc/self/maps` that overlap `[lo, hi)`, as
/// `start-end perms path` (path `[anon]` when the mapping has none).
pub fn occupants(lo: u64, hi: u64) -> Vec<String> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    overlapping(&maps, lo, hi)
}

/// The lines of a maps table overlapping `[lo, hi)`.
pub fn overlapping(maps: &str, lo: u64, hi: u64) -> Vec<String> {
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(s), Ok(e)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else {
            continue;
        };
        if s < hi && lo < e {
            let path = fields.nth(3).unwrap_or("[anon]");
            out.push(format!("{s:#x}-{e:#x} {perms} {path}"));
        }
    }
    out
}

/// Raw fd helper for the spawn code.
pub fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
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
        let fd = create_memfd("t", page_size()).unwrap();
        let mut first = SharedMap::map(raw(&fd), page_size(), false).unwrap();
        let addr = first.as_mut_slice().as_ptr() as u64;
        let err = map_fixed(raw(&fd), addr, page_size()).unwrap_err();
        assert!(err.contains("occupied by"), "{err}");
        assert!(err.contains(&format!("{addr:#x}-")), "{err}");
        assert!(err.contains("memfd:t"), "{err}");
    }

    #[test]
    fn kernel_space_is_reported_as_outside_the_address_space() {
        let fd = create_memfd("t", page_size()).unwrap();
        let err = map_fixed(raw(&fd), 0xffff_8000_0000_0000, page_size()).unwrap_err();
        assert!(err.contains("outside"), "{err}");
    }

    #[test]
    fn parses_maps_lines() {
        let maps = "00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/dbus-daemon\n\
                    7f0000000000-7f0000001000 rw-p 00000000 00:00 0\n";
        let o = overlapping(maps, 0x7f0000000800, 0x7f0000002000);
        assert_eq!(
            o,
            vec!["0x7f0000000000-0x7f0000001000 rw-p [anon]".to_string()]
        );
        assert!(overlapping(maps, 0, 0x1000).is_empty());
    }
}
