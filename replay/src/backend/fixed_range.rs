//! Memory (anonymous, or a file's) at exactly a given address range, never
//! over what is already there (`MAP_FIXED_NOREPLACE`), and the report of what occupies
//! a range that could not be had: shared by the host runner's arena
//! ([`crate::backend::host::arena`]) and the GPU backends' placeholder
//! ([`crate::backend::gpu::placeholder`]).

/// Map `len` anonymous bytes with protection `prot` at exactly `lo`,
/// without replacing anything (`MAP_NORESERVE`: nothing is committed until
/// touched). `Err` is a sentence saying what occupies the range or why the
/// kernel refused it.
pub fn map_noreplace(lo: u64, len: u64, prot: libc::c_int) -> Result<(), String> {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    map_at(lo, len, prot, flags, -1)
}

/// Map the first `len` bytes of the file open as `fd`, shared and
/// read-write, at exactly `lo`, without replacing anything: the held
/// arena ([`crate::backend::host::held`]). `Err` as for [`map_noreplace`].
pub fn map_file_noreplace(
    lo: u64,
    len: u64,
    fd: std::os::fd::BorrowedFd<'_>,
) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    map_at(lo, len, prot, libc::MAP_SHARED, fd.as_raw_fd())
}

fn map_at(
    lo: u64,
    len: u64,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: libc::c_int,
) -> Result<(), String> {
    let Ok(ulen) = usize::try_from(len) else {
        return Err("the range does not fit the address space".into());
    };
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; on
    // kernels older than 4.17 the flag is ignored and the kernel may choose
    // another address, which is detected and undone below. `fd` is -1 or a
    // descriptor the caller keeps open for the call.
    let p = unsafe {
        libc::mmap(
            lo as *mut libc::c_void,
            ulen,
            prot,
            flags | libc::MAP_FIXED_NOREPLACE,
            fd,
            0,
        )
    };
    let hi = lo.saturating_add(len);
    if p == libc::MAP_FAILED {
        let err = std::io::Error::last_os_error();
        let occupants = occupants(lo, hi);
        return Err(match err.raw_os_error() {
            Some(libc::EEXIST) if !occupants.is_empty() => {
                format!("the range is occupied by {}", occupants.join("; "))
            }
            Some(libc::EEXIST) => "the range is already mapped in this process".into(),
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
        // SAFETY: unmapping the mapping just created at the wrong place.
        unsafe { libc::munmap(p, ulen) };
        let occ = occupants(lo, hi);
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

/// [`occupants`] of `len` bytes at `start` as one sentence part, for a
/// reservation the driver refused: at most four mappings, or that none of
/// this process is there.
pub fn occupant_report(start: u64, len: u64) -> String {
    let mut hits = occupants(start, start.saturating_add(len));
    if hits.is_empty() {
        return "no mapping of this process (the driver's own address space)".into();
    }
    hits.truncate(4);
    hits.join("; ")
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

/// The sum of the `key` fields (`AnonHugePages:`, `Private_Hugetlb:`,
/// `KernelPageSize:`..., in kB, returned in bytes) of the mappings in the
/// text of a `smaps` file that start in `[lo, hi)`; `None` when no mapping
/// starts there.
pub fn smaps_sum(smaps: &str, lo: u64, hi: u64, key: &str) -> Option<u64> {
    let mut inside = false;
    let mut sum = None;
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((start, _)) = head.split_once('-') {
            if let Ok(start) = u64::from_str_radix(start, 16) {
                inside = (lo..hi).contains(&start);
                if inside {
                    sum.get_or_insert(0);
                }
                continue;
            }
        }
        if let (true, Some(v), Some(s)) = (inside, line.strip_prefix(key), sum.as_mut()) {
            let kb = v.trim().trim_end_matches("kB").trim().parse::<u64>();
            *s += kb.map_or(0, |k| k << 10);
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_a_smaps_field_over_the_mappings_starting_in_a_range() {
        let smaps = "7f00001ff000-7f0000200000 rw-p 00000000 00:00 0 \n\
                     KernelPageSize:        4 kB\n\
                     Private_Hugetlb:       0 kB\n\
                     7f0000200000-7f0004200000 rw-p 00000000 00:10 7 /anon_hugepage (deleted)\n\
                     KernelPageSize:     2048 kB\n\
                     Private_Hugetlb:   65536 kB\n\
                     7f0004200000-7f0004201000 rw-p 00000000 00:00 0 \n\
                     Private_Hugetlb:    2048 kB\n";
        let (lo, hi) = (0x7f00_001f_f000, 0x7f00_0420_0000);
        assert_eq!(smaps_sum(smaps, lo, hi, "Private_Hugetlb:"), Some(64 << 20));
        assert_eq!(smaps_sum(smaps, lo, hi, "AnonHugePages:"), Some(0));
        let one = 0x7f00_0020_0000;
        assert_eq!(
            smaps_sum(smaps, one, one + 1, "KernelPageSize:"),
            Some(2 << 20)
        );
        assert_eq!(smaps_sum(smaps, 0x1000, 0x2000, "KernelPageSize:"), None);
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

    #[test]
    fn a_range_nobody_maps_is_reported_as_the_drivers() {
        assert!(occupant_report(0x10, 0x10).contains("driver's own address space"));
        let local = 0u64;
        let at = &local as *const u64 as u64;
        assert!(occupant_report(at, 8).contains("rw-p"));
    }
}
