//! Filling the arena from files, inside the runner.
//!
//! The parent sends the input part's extents (see
//! `rrstore_format::extents`: pack, archive or raw file ranges, each with the
//! blake3 of its decoded bytes when it has one) and the runner reads and
//! decodes them straight into the arena: every byte is copied once, from the
//! page cache into the arena, where handing them over from the parent costs a
//! decode into a staging window plus a cross-process copy.
//!
//! A fill that leaves a core free runs on worker threads in the background
//! while the runner goes on serving requests (it loads the image
//! meanwhile), and [`Fill::wait`] collects it; a fill that takes every core
//! is done before the runner reads its next request, since overlapping it
//! with the image load then only makes the two contend (measured on two
//! cores: no faster in wall time, and the fill itself slower). The runner
//! waits for a fill before anything else touches the arena (see `runner`).
//! The wire form of a plan is [`encode`] / [`decode`].

use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rrstore_format::chunk::Codec;
use rrstore_format::extents::{Extent, ExtentReader, PartExtents};

use super::protocol::{Fields, Msg};

/// Fills smaller than this run on the runner's own thread, at once.
const THREADED_MIN: u64 = 1 << 20;
/// At least this many bytes per worker thread.
const PER_THREAD_MIN: u64 = 2 << 20;
/// At most this many worker threads.
const MAX_THREADS: usize = 16;

/// Why a fill failed: the part offset of the extent and the reason.
pub type FillError = (u64, String);

/// One run of extents: on a thread, or done already (no thread could be
/// started, so it ran on the caller's).
enum Worker {
    Thread(JoinHandle<(Result<(), FillError>, Instant)>),
    Finished(Result<(), FillError>, Instant),
}

/// A fill started by the runner: finished, or going on in the background.
pub struct Fill {
    state: State,
    /// Started in the background (kept once settled).
    background: bool,
}

enum State {
    Done(Result<Duration, FillError>),
    Running {
        started: Instant,
        workers: Vec<Worker>,
    },
}

impl Fill {
    /// A fill that failed before it started.
    pub fn failed(e: FillError) -> Fill {
        Fill {
            state: State::Done(Err(e)),
            background: false,
        }
    }

    /// Whether it was left running in the background when it started.
    pub fn background(&self) -> bool {
        self.background
    }

    /// Wait for the workers, keeping the outcome for [`Fill::wait`].
    pub fn settle(self) -> Fill {
        let background = self.background;
        Fill {
            state: State::Done(self.wait()),
            background,
        }
    }

    /// Start decoding `plan` into memory at `base` (see the module
    /// documentation for when it finishes before returning).
    ///
    /// # Safety
    /// `base..base + plan.len()` is mapped writable memory that nothing
    /// else reads or writes until [`Fill::wait`] returns.
    pub unsafe fn start(plan: PartExtents, base: u64) -> Fill {
        let started = Instant::now();
        let total = plan.len();
        if total < THREADED_MIN {
            let r = fill_run(&plan, 0..plan.extents.len(), base);
            return Fill {
                state: State::Done(r.map(|()| started.elapsed())),
                background: false,
            };
        }
        let cpus = cpus();
        // On more than two cores one stays free for the image load.
        let usable = if cpus > 2 { cpus - 1 } else { cpus };
        let threads = usable
            .min(MAX_THREADS)
            .min((total / PER_THREAD_MIN).max(1) as usize);
        let plan = Arc::new(plan);
        let runs = plan.split(threads);
        let workers = runs
            .into_iter()
            .map(|(run, offset)| {
                let p = Arc::clone(&plan);
                let r = run.clone();
                let body = move || (fill_run(&p, r, base + offset), Instant::now());
                match std::thread::Builder::new().spawn(body) {
                    Ok(h) => Worker::Thread(h),
                    Err(_) => Worker::Finished(fill_run(&plan, run, base + offset), Instant::now()),
                }
            })
            .collect();
        let background = threads < cpus;
        let fill = Fill {
            state: State::Running { started, workers },
            background,
        };
        if background {
            fill
        } else {
            fill.settle()
        }
    }

    /// Wait for the workers: how long the fill took (start to the last
    /// worker's end), or its first failure.
    pub fn wait(self) -> Result<Duration, FillError> {
        let (started, workers) = match self.state {
            State::Done(r) => return r,
            State::Running { started, workers } => (started, workers),
        };
        let mut end = started;
        let mut first = Ok(());
        for w in workers {
            let (r, t) = match w {
                Worker::Thread(h) => h
                    .join()
                    .unwrap_or_else(|_| (Err((0, "a fill thread panicked".into())), started)),
                Worker::Finished(r, t) => (r, t),
            };
            end = end.max(t);
            if first.is_ok() {
                first = r;
            }
        }
        first.map(|()| end - started)
    }
}

/// CPUs this process may run on: the affinity mask, one system call
/// (`available_parallelism` also reads cgroup files, ~0.2 ms).
fn cpus() -> usize {
    // SAFETY: `set` is a plain bitmask the call fills in; its size is passed.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            (libc::CPU_COUNT(&set) as usize).max(1)
        } else {
            1
        }
    }
}

/// Decode the extents `run` of `plan` into consecutive memory from `at`.
fn fill_run(plan: &PartExtents, run: std::ops::Range<usize>, mut at: u64) -> Result<(), FillError> {
    let mut reader = ExtentReader::new(plan);
    let start = at;
    for i in run {
        let len = plan.extents[i].len;
        let part_offset = at - start;
        let n = usize::try_from(len).map_err(|_| (part_offset, "extent too large".to_string()))?;
        // SAFETY: `Fill::start`'s contract: the plan's bytes from `base`
        // are mapped, writable and untouched by anything else until the
        // fill is waited for; runs of different workers are disjoint
        // (`PartExtents::split`).
        let dst = unsafe { std::slice::from_raw_parts_mut(at as *mut u8, n) };
        reader
            .decode_into(i, dst)
            .map_err(|e| (part_offset, e.to_string()))?;
        at += len;
    }
    Ok(())
}

/// Append `plan` to a request.
pub fn encode(m: &mut Msg, plan: &PartExtents) {
    m.u64(plan.files.len() as u64);
    for f in &plan.files {
        m.bytes(f.as_os_str().as_bytes());
    }
    m.u64(plan.extents.len() as u64);
    for e in &plan.extents {
        m.u64(u64::from(e.file))
            .u64(e.offset)
            .u64(e.stored_len)
            .u64(e.len)
            .u64(e.codec as u64)
            .bytes(e.hash.as_ref().map_or(&[][..], |h| &h[..]));
    }
}

/// Read a plan written by [`encode`].
pub fn decode(f: &mut Fields<'_>) -> std::io::Result<PartExtents> {
    let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
    let nfiles = f.u64()?;
    let mut files = Vec::new();
    for _ in 0..nfiles {
        let bytes = f.bytes()?;
        files.push(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(bytes)));
    }
    let n = f.u64()?;
    let mut extents = Vec::new();
    for _ in 0..n {
        let file = u32::try_from(f.u64()?).map_err(|_| bad("extent file index"))?;
        let (offset, stored_len, len) = (f.u64()?, f.u64()?, f.u64()?);
        let codec = u8::try_from(f.u64()?)
            .ok()
            .and_then(Codec::from_u8)
            .ok_or_else(|| bad("extent codec"))?;
        let hash = match f.bytes()? {
            [] => None,
            h => Some(<[u8; 32]>::try_from(h).map_err(|_| bad("extent hash"))?),
        };
        if file as usize >= files.len() {
            return Err(bad("extent names a file that is not listed"));
        }
        extents.push(Extent {
            file,
            offset,
            stored_len,
            len,
            codec,
            hash,
        });
    }
    Ok(PartExtents { files, extents })
}
