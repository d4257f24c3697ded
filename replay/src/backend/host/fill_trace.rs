//! A debugging aid of rehydration (issue 24): where a fill's time went.
//!
//! With `RRSTORE_FILL_TRACE=FILE` in its environment, a runner appends
//! one JSON line per fill from files to FILE (opened for appending before
//! the runner confines itself, since fills come before the image load):
//! when it started, how long it took, whether the runtime's preload was
//! still running, how much of the arena got transparent huge pages or
//! pages of the huge page pool, and
//! per fill thread how long it waited to start, ran, spent on a CPU, spent
//! waiting for one (`/proc/thread-self/schedstat`) and how many page faults
//! it took. CPU time and fault counts do not depend on the machine's load,
//! where wall time does: `bench/rehydrate_consecutive.py` reads them.
//! Nothing is collected without the variable.

use std::io::Write;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::backend::fixed_range::smaps_sum;

/// The variable naming the trace file. Read by the host runner, a process
/// of its own that inherits it from `rrstore` (kept by `sandbox::env`), so
/// it stays a variable rather than an option (issue 40).
pub const TRACE_ENV: &str = "RRSTORE_FILL_TRACE";

/// One fill thread's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThreadFigures {
    /// Part offset and length of what it filled.
    pub offset: u64,
    pub bytes: u64,
    /// From the fill request to the thread's first instruction.
    pub start_ns: u64,
    pub wall_ns: u64,
    pub cpu_ns: u64,
    /// Time runnable but not running (another task had the CPU).
    pub runq_ns: u64,
    pub minflt: u64,
    pub majflt: u64,
}

/// A thread's counters at one moment.
pub struct Probe {
    at: Instant,
    cpu_ns: u64,
    runq_ns: u64,
    minflt: u64,
    majflt: u64,
}

impl Probe {
    /// The calling thread's counters now.
    pub fn now() -> Probe {
        let (minflt, majflt) = thread_faults();
        Probe {
            at: Instant::now(),
            cpu_ns: thread_cpu_ns(),
            runq_ns: thread_runq_ns(),
            minflt,
            majflt,
        }
    }

    /// The figures of the calling thread since `self`, which it took.
    pub fn finish(self, requested: Instant, offset: u64, bytes: u64) -> ThreadFigures {
        let end = Probe::now();
        ThreadFigures {
            offset,
            bytes,
            start_ns: self.at.saturating_duration_since(requested).as_nanos() as u64,
            wall_ns: end.at.duration_since(self.at).as_nanos() as u64,
            cpu_ns: end.cpu_ns.saturating_sub(self.cpu_ns),
            runq_ns: end.runq_ns.saturating_sub(self.runq_ns),
            minflt: end.minflt.saturating_sub(self.minflt),
            majflt: end.majflt.saturating_sub(self.majflt),
        }
    }
}

/// The trace of one fill, collected while it runs.
pub struct Trace {
    file: std::fs::File,
    /// When the fill was asked for.
    pub requested: Instant,
    unix_ns: u64,
    preloading: bool,
    threads: Mutex<Vec<ThreadFigures>>,
}

impl Trace {
    /// A trace for a fill starting now, if [`TRACE_ENV`] names a file that
    /// can be opened; `preloading`: the runtime's preload is still running.
    pub fn start(preloading: bool) -> Option<Trace> {
        let path = std::env::var_os(TRACE_ENV)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()?;
        Some(Trace {
            file,
            requested: Instant::now(),
            unix_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            preloading,
            threads: Mutex::new(Vec::new()),
        })
    }

    /// Record one thread's figures.
    pub fn add(&self, t: ThreadFigures) {
        if let Ok(mut v) = self.threads.lock() {
            v.push(t);
        }
    }

    /// Append the fill's line: it took `took_ns` (as reported) over the
    /// arena `[lo, lo + len)`.
    pub fn write(mut self, took_ns: u64, lo: u64, len: u64) {
        let mut threads = self.threads.into_inner().unwrap_or_default();
        threads.sort_by_key(|t| t.offset);
        let huge = huge_bytes(lo, len).unwrap_or_default();
        let line = Line {
            pid: std::process::id(),
            unix_ns: self.unix_ns,
            took_ns,
            total_ns: self.requested.elapsed().as_nanos() as u64,
            preloading: self.preloading,
            arena_bytes: len,
            anon_huge_bytes: huge.transparent,
            pool_bytes: huge.pool,
            threads,
        };
        if let Ok(mut text) = serde_json::to_string(&line) {
            text.push('\n');
            let _ = self.file.write_all(text.as_bytes());
        }
    }
}

/// One fill's line in the trace file.
#[derive(Serialize)]
struct Line {
    pid: u32,
    /// When the fill was asked for (Unix time).
    unix_ns: u64,
    /// The fill's duration as reported (from its first thread's start).
    took_ns: u64,
    /// From the request to the line.
    total_ns: u64,
    /// The runtime's preload was still running when the fill was asked for.
    preloading: bool,
    arena_bytes: u64,
    /// How much of the arena is backed by transparent huge pages.
    anon_huge_bytes: u64,
    /// How much of it comes from the huge page pool (`vm.nr_hugepages`).
    pool_bytes: u64,
    threads: Vec<ThreadFigures>,
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill in.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Minor and major page faults of the calling thread.
fn thread_faults() -> (u64, u64) {
    // SAFETY: `ru` is a plain struct the call fills in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_THREAD names the calling thread.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return (0, 0);
    }
    (ru.ru_minflt as u64, ru.ru_majflt as u64)
}

/// Nanoseconds the calling thread waited on a run queue (the second field
/// of `/proc/thread-self/schedstat`); 0 where the kernel has no schedstat.
fn thread_runq_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// Huge-page backing of an arena, from `smaps`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Huge {
    /// `AnonHugePages`: transparent huge pages.
    transparent: u64,
    /// `Private_Hugetlb`: pages of the huge page pool.
    pool: u64,
}

/// [`Huge`] of the mappings of this process that start in `[lo, lo + len)`
/// (the arena is one mapping, or three when its interior is pool pages).
fn huge_bytes(lo: u64, len: u64) -> Option<Huge> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    huge_in(&smaps, lo, lo.saturating_add(len))
}

/// [`huge_bytes`] on the text of a `smaps` file; `None` when no mapping
/// starts in the range.
fn huge_in(smaps: &str, lo: u64, hi: u64) -> Option<Huge> {
    Some(Huge {
        transparent: smaps_sum(smaps, lo, hi, "AnonHugePages:")?,
        pool: smaps_sum(smaps, lo, hi, "Private_Hugetlb:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_huge_pages_of_one_mapping() {
        let smaps = "7f0000000000-7f0004000000 rw-p 00000000 00:00 0 \n\
                     Size:              65536 kB\n\
                     AnonHugePages:     63488 kB\n\
                     Private_Hugetlb:       0 kB\n\
                     7f0004000000-7f0004001000 r--p 00000000 08:01 12 /usr/lib/x.so\n\
                     AnonHugePages:         0 kB\n";
        let thp = |t| {
            Some(Huge {
                transparent: t,
                pool: 0,
            })
        };
        assert_eq!(
            huge_in(smaps, 0x7f00_0000_0000, 0x7f00_0000_1000),
            thp(63488 << 10)
        );
        assert_eq!(huge_in(smaps, 0x7f00_0400_0000, 0x7f00_0400_1000), thp(0));
        assert_eq!(huge_in(smaps, 0x1000, 0x2000), None);
    }

    #[test]
    fn adds_up_an_arena_whose_interior_is_pool_pages() {
        let smaps = "7f00001ff000-7f0000200000 rw-p 00000000 00:00 0 \n\
                     AnonHugePages:         0 kB\n\
                     Private_Hugetlb:       0 kB\n\
                     7f0000200000-7f0004200000 rw-p 00000000 00:10 7 /anon_hugepage (deleted)\n\
                     AnonHugePages:         0 kB\n\
                     Private_Hugetlb:   65536 kB\n\
                     7f0004200000-7f0004201000 rw-p 00000000 00:00 0 \n\
                     AnonHugePages:         0 kB\n\
                     7f0004201000-7f0004202000 rw-p 00000000 00:00 0 \n\
                     Private_Hugetlb:    2048 kB\n";
        let h = huge_in(smaps, 0x7f00_001f_f000, 0x7f00_0420_1000);
        assert_eq!(
            h,
            Some(Huge {
                transparent: 0,
                pool: 64 << 20
            })
        );
    }

    #[test]
    fn a_thread_probe_counts_its_own_faults_and_time() {
        let requested = Instant::now();
        let p = Probe::now();
        // A fresh mapping: heap memory could be reused, already faulted.
        let len = 8usize << 20;
        // SAFETY: a new private anonymous mapping, touched only inside
        // its length and unmapped before the test ends.
        let m = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(m, libc::MAP_FAILED);
        for i in (0..len).step_by(4096) {
            // SAFETY: inside the mapping made above.
            unsafe { std::ptr::write_volatile((m as *mut u8).add(i), 1) };
        }
        let f = p.finish(requested, 0, len as u64);
        // SAFETY: the mapping made above, no longer used.
        unsafe { libc::munmap(m, len) };
        assert!(f.minflt > 0, "{f:?}");
        assert!(f.cpu_ns > 0 && f.wall_ns > 0, "{f:?}");
    }
}
