//! What this machine does with a fresh arena's memory: the huge page pool
//! (`vm.nr_hugepages`, 2 MiB pages) and whether it is a virtual machine
//! that returns free memory to its host (virtio-balloon free page
//! reporting), read from sysfs for `rrstore devices` and the replay's
//! advice.
//!
//! Why it matters (issue 24, BENCHMARKS.md "Session 16"): on such a VM,
//! guest memory that stayed free for about two seconds is handed back to
//! the host, and the first touch of each of its pages then costs a host
//! page fault on top of the guest's. A fresh arena is faulted in by its
//! fill, so a replay that follows another within a second fills at 4-7
//! GB/s, and one that comes a few seconds after the last (the interactive
//! case) at 0.5-0.9 GB/s, with six times the CPU time. Pages of a reserved
//! pool never return to the kernel's free lists, so the host keeps them:
//! with one, the same replays filled at 4-6 GB/s however long the pause
//! ([`super::arena`] maps the arena's interior from it). Nothing here
//! changes what a replay does; it tells the user why and what to reserve.

use std::path::Path;

use serde::Serialize;

/// Size of a pool page (the x86-64 and arm64 default huge page).
pub const POOL_PAGE: u64 = 2 << 20;

/// `VIRTIO_ID_BALLOON`, as sysfs prints a virtio device's `device` file.
const BALLOON_DEVICE: &str = "0x0005";
/// `VIRTIO_BALLOON_F_REPORTING`: bit 5 of the negotiated features.
const F_REPORTING: usize = 5;

/// The arena-relevant facts about this machine's memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostMemory {
    /// A virtio balloon negotiated free page reporting: free guest memory
    /// goes back to the host after a few seconds.
    pub free_page_reporting: bool,
    /// 2 MiB pages reserved in the pool (`nr_hugepages`).
    pub pool_pages: u64,
    /// Of those, free now.
    pub pool_free_pages: u64,
}

impl HostMemory {
    /// This machine's figures, from `/sys` (`rrstore` gives the tree of
    /// its test hook `RRSTORE_DEBUG_SYSFS` to [`probe_at`](Self::probe_at)).
    pub fn probe() -> HostMemory {
        HostMemory::probe_at(Path::new("/sys"))
    }

    /// The figures as the sysfs tree at `root` gives them; what cannot be
    /// read counts as absent (no reporting, no pool).
    pub fn probe_at(root: &Path) -> HostMemory {
        let pool = root.join("kernel/mm/hugepages/hugepages-2048kB");
        HostMemory {
            free_page_reporting: reports_free_pages(root),
            pool_pages: read_u64(&pool.join("nr_hugepages")).unwrap_or(0),
            pool_free_pages: read_u64(&pool.join("free_hugepages")).unwrap_or(0),
        }
    }

    /// Whether a fresh arena of `bytes` gets its memory from where the host
    /// may have taken it back: the VM reports free pages and the pool
    /// cannot hold the arena's interior. Arenas under 2 MiB have no
    /// interior to take from a pool, and fill in microseconds anyway.
    pub fn arena_pays_host_faults(&self, bytes: u64) -> bool {
        bytes >= POOL_PAGE && self.free_page_reporting && self.pool_free_pages < pages_for(bytes)
    }
}

/// Pool pages that an arena of `bytes` takes at most, wherever it lies: the
/// 2 MiB-aligned interior of its page-rounded range, which is at most two
/// 4 KiB pages longer (what `vm.nr_hugepages` should add per concurrent
/// replay).
pub fn pages_for(bytes: u64) -> u64 {
    bytes.saturating_add(2 * 4096) / POOL_PAGE
}

/// Free pool pages now, `None` without a pool (what the runner checks
/// before it maps an arena from the pool).
/// Always the real `/sys`: the test hook changes what is reported, never
/// how an arena is mapped.
pub fn pool_free_pages() -> Option<u64> {
    read_u64(Path::new(
        "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
    ))
    .filter(|&n| n > 0)
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Whether any virtio balloon under `root/bus/virtio/devices` negotiated
/// free page reporting. A device's `features` file is one `0`/`1` per
/// feature bit, bit 0 first.
fn reports_free_pages(root: &Path) -> bool {
    let Ok(devices) = std::fs::read_dir(root.join("bus/virtio/devices")) else {
        return false;
    };
    devices.flatten().any(|d| {
        let dir = d.path();
        let is_balloon =
            std::fs::read_to_string(dir.join("device")).is_ok_and(|s| s.trim() == BALLOON_DEVICE);
        is_balloon
            && std::fs::read_to_string(dir.join("features"))
                .is_ok_and(|f| f.trim().as_bytes().get(F_REPORTING) == Some(&b'1'))
    })
}

/// Test fixtures: a sysfs tree with the given balloon features and pool.
#[cfg(test)]
pub fn write_fixture(root: &Path, balloon_features: Option<&str>, pool: Option<(u64, u64)>) {
    let ok = |r: std::io::Result<()>| r.unwrap_or_else(|e| panic!("fixture under {root:?}: {e}"));
    let net = root.join("bus/virtio/devices/virtio1");
    ok(std::fs::create_dir_all(&net));
    ok(std::fs::write(net.join("device"), "0x0001\n"));
    ok(std::fs::write(net.join("features"), "11111111\n"));
    if let Some(f) = balloon_features {
        let b = root.join("bus/virtio/devices/virtio0");
        ok(std::fs::create_dir_all(&b));
        ok(std::fs::write(b.join("device"), "0x0005\n"));
        ok(std::fs::write(b.join("features"), format!("{f}\n")));
    }
    if let Some((total, free)) = pool {
        let p = root.join("kernel/mm/hugepages/hugepages-2048kB");
        ok(std::fs::create_dir_all(&p));
        ok(std::fs::write(p.join("nr_hugepages"), format!("{total}\n")));
        ok(std::fs::write(
            p.join("free_hugepages"),
            format!("{free}\n"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The features string of this session's VM (Firecracker): stats,
    /// deflate on OOM, reporting.
    const FIRECRACKER: &str = "0110010100000000000000000000000010000000";

    fn probe(features: Option<&str>, pool: Option<(u64, u64)>) -> HostMemory {
        let d = tempfile::tempdir().unwrap();
        write_fixture(d.path(), features, pool);
        HostMemory::probe_at(d.path())
    }

    #[test]
    fn a_balloon_with_the_reporting_bit_is_seen_and_others_are_not() {
        assert!(probe(Some(FIRECRACKER), None).free_page_reporting);
        // Bit 5 clear (stats and deflate on OOM only): no reporting.
        assert!(!probe(Some("0110000100000000"), None).free_page_reporting);
        // A non-balloon device with every bit set does not count.
        assert!(!probe(None, None).free_page_reporting);
        // Short or empty features: no reporting, no panic.
        assert!(!probe(Some("011"), None).free_page_reporting);
        assert!(!probe(Some(""), None).free_page_reporting);
        // No sysfs at all.
        let m = HostMemory::probe_at(Path::new("/nonexistent/sysfs"));
        assert_eq!(m, HostMemory::default());
    }

    #[test]
    fn the_pool_is_read_and_decides_whether_an_arena_pays_host_faults() {
        let m = probe(Some(FIRECRACKER), Some((64, 40)));
        assert_eq!((m.pool_pages, m.pool_free_pages), (64, 40));
        let mib = 1u64 << 20;
        // 64 MiB (+16 bytes, as LLVM's arenas): an interior of 32 pages at
        // most; 2 MiB: one (when aligned); just under: none.
        assert_eq!(pages_for(64 * mib + 16), 32);
        assert_eq!(pages_for(2 * mib), 1);
        assert!(!m.arena_pays_host_faults(64 * mib + 16));
        assert!(!m.arena_pays_host_faults(80 * mib));
        assert!(m.arena_pays_host_faults(82 * mib));
        // Small arenas never, a VM without reporting never.
        assert!(!m.arena_pays_host_faults(mib));
        assert!(!probe(Some("0110000100"), None).arena_pays_host_faults(100 * mib));
        // Reporting without a pool: every arena of 2 MiB or more.
        assert!(probe(Some(FIRECRACKER), None).arena_pays_host_faults(2 * mib));
        assert!(probe(Some(FIRECRACKER), Some((0, 0))).arena_pays_host_faults(2 * mib));
    }
}
