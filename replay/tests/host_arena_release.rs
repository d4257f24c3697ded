//! Issue 24: a runner with a large arena has given its memory back by the
//! time the backend lets it go, however busy the CPUs are (its own
//! teardown runs at `SCHED_IDLE`), so the next replay's arena gets those
//! pages rather than memory nothing touched lately; and the fill trace
//! (`RRSTORE_FILL_TRACE`) says what a fill did.

mod common;

use rrstore_format::extents::PartExtents;
use rrstore_replay::backend::host::fill_trace::TRACE_ENV;
use rrstore_replay::backend::host::{HostBackend, RELEASE_ARENA_MIN};
use rrstore_replay::backend::Backend;

/// Anonymous resident bytes of process `pid`, pages of the huge page pool
/// included (an arena's interior comes from the pool where the machine
/// has one); 0 once it has none left (a zombie lists none).
fn anon_resident(pid: u64) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb << 10)
    };
    kb("RssAnon:") + kb("HugetlbPages:")
}

/// Pin the calling thread (and so the runners it starts) to the CPU it
/// runs on.
fn pin_to_this_cpu() {
    // SAFETY: plain system calls; `set` is a zeroed bitmask we fill in.
    unsafe {
        let cpu = libc::sched_getcpu().max(0) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

#[test]
fn a_large_arena_is_freed_as_the_backend_ends_its_runner() {
    // The runner shares this thread's only CPU, and after the kill its
    // teardown (at SCHED_IDLE) cannot run while this thread does: what is
    // freed before we look was freed by the backend itself.
    pin_to_this_cpu();
    let tmp = tempfile::tempdir().unwrap();
    let len = 32usize << 20;
    assert!(len as u64 >= RELEASE_ARENA_MIN);
    let data = rrstore_tests::XorShift::new(0x2545_f491_4f6c_dd1d).bytes(len, 0);
    let input = tmp.path().join("input.raw");
    std::fs::write(&input, &data).unwrap();
    let trace = tmp.path().join("fill.trace");

    let p = common::map_anonymous(len);
    // SAFETY: unmapping the mapping just made, which nothing uses.
    unsafe { libc::munmap(p, len) };
    let mut config = common::host_config();
    config.env.push((TRACE_ENV.into(), trace.clone().into()));
    let mut b = HostBackend::new(config);
    b.reserve(p as u64, len as u64).unwrap();
    b.start_fill(&PartExtents::plain_file(input, len as u64))
        .unwrap();
    b.finish_fill().unwrap().unwrap();
    assert_eq!(
        b.arena_hash().unwrap(),
        Some(*blake3::hash(&data).as_bytes())
    );

    // The trace: one line for the fill, its threads covering the input.
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    let line = &lines[0];
    assert_eq!(line["arena_bytes"].as_u64(), Some(len as u64), "{line}");
    let threads = line["threads"].as_array().unwrap();
    let sum = |k: &str| threads.iter().map(|t| t[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("bytes"), len as u64, "{line}");
    assert!(sum("cpu_ns") > 0 && sum("minflt") > 0, "{line}");
    assert!(line["took_ns"].as_u64().unwrap() > 0, "{line}");
    // Where the machine has a huge page pool (scripts/test.sh reserves one
    // as root and says so), the arena's aligned interior came from it.
    if std::env::var_os("RRSTORE_TEST_HUGE_POOL").is_some() {
        let pool = line["pool_bytes"].as_u64().unwrap();
        assert!(pool >= len as u64 - (4 << 20), "{line}");
    }
    let pid = line["pid"].as_u64().unwrap();
    assert!(
        anon_resident(pid) >= len as u64 / 2,
        "the arena is resident"
    );

    drop(b);
    let left = anon_resident(pid);
    assert!(
        left < 4 << 20,
        "the killed runner still holds {left} bytes of anonymous memory"
    );
}
