//! The words for what this machine does with a fresh arena's memory
//! (`rrstore_replay::backend::host::memory`): the `memory:` line of
//! `rrstore devices`, and the hint a slow fill of a replay gets.

use rrstore_replay::backend::host::held::{HeldError, Usage};
use rrstore_replay::backend::host::memory::{pages_for, HostMemory, POOL_PAGE};

/// Fills slower than this, of arenas of at least [`HINTED_ARENA`] bytes,
/// get the hint (the rate issue 24 sets as the floor).
const HINTED_RATE: f64 = 1.5e9;
const HINTED_ARENA: u64 = 16 << 20;

const MIB: u64 = 1 << 20;

/// The `memory:` line of `rrstore devices` (without the prefix).
pub fn describe(m: &HostMemory) -> String {
    let pool = if m.pool_pages == 0 {
        "no huge page pool reserved".to_string()
    } else {
        format!(
            "huge page pool: {} of {} pages of 2 MiB free (a fresh arena of up to {} MiB comes from it)",
            m.pool_free_pages,
            m.pool_pages,
            (m.pool_free_pages * POOL_PAGE).saturating_sub(2 * 4096) / MIB
        )
    };
    if !m.free_page_reporting {
        return format!("{pool}; arenas use transparent huge pages");
    }
    let mut s = format!(
        "this virtual machine hands free memory back to its host (virtio free page reporting); {pool}"
    );
    if m.pool_free_pages == 0 {
        s.push_str(
            ": a replay's fresh arena can fill several times slower when the last replay was \
             seconds ago; `arena_cache = \"256MiB\"` in the configuration file keeps that memory \
             on tmpfs (no root needed), and as root, `sysctl vm.nr_hugepages=N` keeps it in 2 MiB \
             pages (N: one page per 2 MiB of arena, per concurrent replay; docs/replay.md)",
        );
    }
    s
}

/// The `arena cache:` line of `rrstore devices` for the configuration's
/// `limit` and what the cache's directory holds; `None` when the cache is
/// off and holds nothing.
pub fn describe_cache(limit: u64, usage: &Result<Option<Usage>, HeldError>) -> Option<String> {
    let setting = if limit == 0 {
        "off".to_string()
    } else {
        format!("up to {} MiB", limit.div_ceil(MIB))
    };
    match usage {
        Err(e) => {
            (limit > 0).then(|| format!("{setting}, unusable ({e}): replays use fresh memory"))
        }
        Ok(None) => (limit > 0).then(|| format!("{setting}, nothing held yet")),
        Ok(Some(u)) if limit == 0 && u.slots == 0 => None,
        Ok(Some(u)) => Some(format!(
            "{setting}, {} slot(s) in {} holding {} MiB ({} in use){}",
            u.slots,
            u.dir.display(),
            u.bytes.div_ceil(MIB),
            u.in_use,
            if limit == 0 {
                "; the next replay removes the free ones"
            } else {
                ""
            }
        )),
    }
}

/// The host entry's `arena_cache` object of `rrstore devices --json`.
pub fn cache_json(limit: u64, usage: &Result<Option<Usage>, HeldError>) -> serde_json::Value {
    let u = usage.as_ref().ok().and_then(Option::as_ref);
    serde_json::json!({
        "limit_bytes": limit,
        "dir": u.map(|u| u.dir.display().to_string()),
        "slots": u.map_or(0, |u| u.slots),
        "bytes": u.map_or(0, |u| u.bytes),
        "in_use": u.map_or(0, |u| u.in_use),
        "error": usage.as_ref().err().map(|e| e.to_string()),
    })
}

/// The hint for a replay whose fill of `arena` bytes ran at `rate` bytes
/// per second, when this machine's memory (read by `probe`, only for a
/// slow fill) explains it; `None` otherwise.
pub fn slow_fill_hint(probe: impl FnOnce() -> HostMemory, arena: u64, rate: f64) -> Option<String> {
    if arena < HINTED_ARENA || rate >= HINTED_RATE {
        return None;
    }
    let m = probe();
    if !m.arena_pays_host_faults(arena) {
        return None;
    }
    Some(format!(
        "hint: the arena filled at {:.2} GB/s; this virtual machine hands free memory back to \
         its host, whose page faults then slow a fresh arena's first touch; the arena cache \
         keeps that memory (`arena_cache = \"{}MiB\"` in the configuration file, more for \
         concurrent replays), as does a huge page pool (as root: `sysctl vm.nr_hugepages={}` \
         for this arena; docs/replay.md)",
        rate / 1e9,
        arena.div_ceil(MIB),
        m.pool_pages + pages_for(arena).saturating_sub(m.pool_free_pages)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VM: HostMemory = HostMemory {
        free_page_reporting: true,
        pool_pages: 0,
        pool_free_pages: 0,
    };

    #[test]
    fn a_reporting_vm_without_a_pool_is_told_what_to_reserve() {
        let d = describe(&VM);
        assert!(d.contains("free page reporting"), "{d}");
        assert!(d.contains("sysctl vm.nr_hugepages=N"), "{d}");
        let pooled = HostMemory {
            pool_pages: 64,
            pool_free_pages: 40,
            ..VM
        };
        let d = describe(&pooled);
        assert!(d.contains("40 of 64 pages of 2 MiB free"), "{d}");
        assert!(d.contains("up to 79 MiB"), "{d}");
        assert!(!d.contains("sysctl"), "{d}");
        let bare = describe(&HostMemory::default());
        assert_eq!(
            bare,
            "no huge page pool reserved; arenas use transparent huge pages"
        );
    }

    #[test]
    fn the_cache_line_says_what_is_held_and_nothing_when_off_and_empty() {
        let u = |slots, in_use| {
            Ok(Some(Usage {
                dir: "/dev/shm/c".into(),
                slots,
                bytes: slots * (64 << 20),
                in_use,
            }))
        };
        assert_eq!(
            describe_cache(256 << 20, &u(2, 1)).unwrap(),
            "up to 256 MiB, 2 slot(s) in /dev/shm/c holding 128 MiB (1 in use)"
        );
        let off = describe_cache(0, &u(1, 0)).unwrap();
        assert!(off.starts_with("off, 1 slot(s)"), "{off}");
        assert!(
            off.ends_with("the next replay removes the free ones"),
            "{off}"
        );
        assert_eq!(describe_cache(0, &u(0, 0)), None);
        assert_eq!(describe_cache(0, &Ok(None)), None);
        assert_eq!(
            describe_cache(MIB, &Ok(None)).unwrap(),
            "up to 1 MiB, nothing held yet"
        );
        let refused = Err(HeldError::NotMemory {
            path: "/home/x".into(),
        });
        let line = describe_cache(MIB, &refused).unwrap();
        assert!(line.contains("unusable (/home/x is not on tmpfs"), "{line}");
        assert_eq!(describe_cache(0, &refused), None);
        let j = cache_json(MIB, &refused);
        assert_eq!(j["dir"], serde_json::Value::Null);
        assert!(j["error"].as_str().unwrap().contains("not on tmpfs"));
    }

    #[test]
    fn only_a_slow_large_fill_that_memory_explains_gets_the_hint() {
        let arena = (64 << 20) + 16;
        let h = slow_fill_hint(|| VM, arena, 0.7e9).unwrap();
        assert!(h.contains("0.70 GB/s"), "{h}");
        assert!(h.contains("vm.nr_hugepages=32"), "{h}");
        assert!(h.contains("arena_cache = \"65MiB\""), "{h}");
        // Fast, small, or a pool that holds it, or no reporting: nothing.
        assert_eq!(slow_fill_hint(|| VM, arena, 3e9), None);
        // A fast or small fill does not read sysfs at all.
        let unread = || -> HostMemory { panic!("probed for a fast fill") };
        assert_eq!(slow_fill_hint(unread, arena, 3e9), None);
        assert_eq!(slow_fill_hint(unread, 8 << 20, 0.1e9), None);
        assert_eq!(slow_fill_hint(|| VM, 8 << 20, 0.1e9), None);
        let pooled = HostMemory {
            pool_pages: 64,
            pool_free_pages: 40,
            ..VM
        };
        assert_eq!(slow_fill_hint(|| pooled, arena, 0.7e9), None);
        assert_eq!(slow_fill_hint(HostMemory::default, arena, 0.7e9), None);
        // A pool too small for this arena: enough pages added to what is there.
        let small = HostMemory {
            pool_pages: 16,
            pool_free_pages: 10,
            ..VM
        };
        let h = slow_fill_hint(|| small, arena, 0.7e9).unwrap();
        assert!(h.contains("vm.nr_hugepages=38"), "{h}");
    }
}
