//! Zeroed slack after a host arena (issue 44, item 2): how far past the
//! recorded bytes a replay's memory reaches, and the runner's mapping of
//! it.
//!
//! Why: LLVM's `llvm-omp-kernel-replay` puts the replay memory in one block
//! the size of the recording's device memory (an `mmap` of 64 MiB + 4 KiB
//! under `strace` for a recording made with a 64 MiB host arena), with the
//! recorded bytes at its start. A kernel that reads past its last buffer
//! (a garbage index, an off-by-n) but inside that block read zeros while
//! it was recorded and reads zeros under LLVM's tool; with only the
//! recorded bytes mapped it faulted under rrstore (measured: 25 crashes in
//! 25 replays against none: docs/replay.md, "The host call path").
//!
//! The rule ([`footprint`]): the arena reaches `arena.reserved` bytes from
//! its base where the recording says (`VAllocSize`), else up to the next
//! multiple of [`UNKNOWN_RESERVATION_STEP`] (64 MiB: the host arena of the
//! recordings this project makes and measures, `tests/src/offload.rs`).
//! Past the page-rounded recorded bytes, that is anonymous memory mapped
//! `MAP_NORESERVE` (nothing is committed until a kernel touches it), never
//! over an existing mapping: where something already lies in the range,
//! only what lies before it is mapped, and the replay's placement report
//! says so. Slack is never filled, read back, hashed, saved or compared:
//! the output is the recorded bytes only. It lives in the runner alone
//! (never in a held slot of the arena cache), so every replay starts with
//! fresh zeros, and it is cleared again before each later repetition's
//! fill ([`clear`]).

use crate::backend::fixed_range::{map_noreplace, occupants};

/// The slack rule's step where a recording does not say how much memory
/// its arena had: 64 MiB.
pub const UNKNOWN_RESERVATION_STEP: u64 = 64 << 20;

/// Bytes from the arena's base that the replay's memory reaches: the
/// recorded reservation when known (and not below `size`), else `size`
/// rounded up to a multiple of [`UNKNOWN_RESERVATION_STEP`].
pub fn footprint(size: u64, reserved: Option<u64>) -> u64 {
    match reserved {
        Some(r) if r >= size => r,
        _ => {
            let step = UNKNOWN_RESERVATION_STEP;
            size.max(1).checked_next_multiple_of(step).unwrap_or(size)
        }
    }
}

/// Bytes of slack wanted after the arena recorded at `base`, `size` bytes,
/// whose page-rounded mapping ends at `hi`: from `hi` to the page-rounded
/// end of the [`footprint`] (0 when the footprint ends within the mapped
/// pages, or the range would wrap).
pub fn wanted(base: u64, size: u64, reserved: Option<u64>, hi: u64, page: u64) -> u64 {
    let end = base
        .checked_add(footprint(size, reserved))
        .and_then(|e| e.checked_next_multiple_of(page));
    end.map_or(0, |e| e.saturating_sub(hi))
}

/// What the runner mapped after the arena.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slack {
    /// Bytes wanted ([`wanted`]).
    pub wanted: u64,
    /// Bytes mapped, from the end of the arena's pages.
    pub mapped: u64,
    /// Why fewer than wanted were mapped (what lies in the range).
    pub short: Option<String>,
}

/// Map `wanted` zeroed bytes at `lo` (the end of the arena's pages), or as
/// many as lie before the first mapping of this process in that range;
/// best effort: a refusal maps nothing, and says why.
pub fn map(lo: u64, wanted: u64) -> Slack {
    let mut slack = Slack {
        wanted,
        ..Slack::default()
    };
    if wanted == 0 {
        return slack;
    }
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let Err(why) = map_noreplace(lo, wanted, prot) else {
        slack.mapped = wanted;
        return slack;
    };
    // Partly taken: the first occupant starts at or after `lo` (the
    // arena's own pages end there).
    let hi = lo.saturating_add(wanted);
    let first = occupants(lo, hi)
        .iter()
        .filter_map(|line| line.split('-').next())
        .filter_map(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .min();
    let fits = first.map_or(0, |s| s.saturating_sub(lo));
    if fits > 0 && map_noreplace(lo, fits, prot).is_ok() {
        slack.mapped = fits;
    }
    slack.short = Some(why);
    slack
}

/// Give the slack at `[lo, lo + len)` fresh zeros: its touched pages are
/// dropped (`MADV_DONTNEED` on private anonymous memory), so the next read
/// of each is a zero page. What a kernel wrote there never reaches a later
/// launch.
pub fn clear(lo: u64, len: u64) {
    if len == 0 {
        return;
    }
    if let Ok(ulen) = usize::try_from(len) {
        // SAFETY: `[lo, lo + len)` is the slack this runner mapped and
        // nothing of this process refers to it; dropping its pages changes
        // no other memory.
        unsafe { libc::madvise(lo as *mut libc::c_void, ulen, libc::MADV_DONTNEED) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_footprint_is_the_reservation_else_the_next_64_mib() {
        assert_eq!(footprint(16400, None), 64 * MIB);
        assert_eq!(footprint(64 * MIB, None), 64 * MIB);
        assert_eq!(footprint(64 * MIB + 16, None), 128 * MIB);
        assert_eq!(footprint(0, None), 64 * MIB);
        assert_eq!(footprint(16400, Some(MIB)), MIB);
        // A reservation below the recorded bytes (refused by the loaders)
        // falls back to the rule.
        assert_eq!(footprint(2 * MIB, Some(MIB)), 64 * MIB);
        assert_eq!(footprint(u64::MAX, None), u64::MAX);
    }

    #[test]
    fn slack_starts_at_the_end_of_the_arena_pages() {
        let page = 4096;
        let base = 0x7f00_0000_0010;
        // 16400 bytes at base: the pages end at base - 16 + 20480.
        let hi = base - 16 + 5 * page;
        assert_eq!(
            wanted(base, 16400, None, hi, page),
            64 * MIB + page - 5 * page
        );
        assert_eq!(wanted(base, 16400, Some(16400), hi, page), 0);
        assert_eq!(wanted(u64::MAX - 10, 5, None, u64::MAX, page), 0);
    }

    #[test]
    fn a_partly_taken_range_maps_what_lies_before_the_occupant() {
        let page = 4096;
        // 1.375 TiB up: a range no other test of this process uses.
        let lo = 0x160_0000_0000u64;
        let squatter = lo + 8 * page;
        map_noreplace(squatter, page, libc::PROT_READ).unwrap();
        let s = map(lo, 16 * page);
        assert_eq!(s.mapped, 8 * page, "{s:?}");
        assert!(
            s.short.as_deref().unwrap_or("").contains("occupied"),
            "{s:?}"
        );
        // Zeros, writable, then zeros again once cleared.
        // SAFETY: `[lo, lo + 8 pages)` was just mapped read-write.
        let bytes = unsafe { std::slice::from_raw_parts_mut(lo as *mut u8, 8 * page as usize) };
        assert!(bytes.iter().all(|&b| b == 0));
        bytes.fill(0x5a);
        clear(lo, s.mapped);
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(lo as *const u8, 8 * page as usize) };
        assert!(bytes.iter().all(|&b| b == 0));
        // A range taken from its start maps nothing.
        let none = map(squatter, 4 * page);
        assert_eq!(none.mapped, 0);
        assert!(none.short.is_some());
        // SAFETY: unmapping what this test mapped.
        unsafe {
            libc::munmap(lo as *mut libc::c_void, (8 * page) as usize);
            libc::munmap(squatter as *mut libc::c_void, page as usize);
        }
    }
}
