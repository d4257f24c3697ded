//! A device lane's lookahead (issue 21): while recording i's kernel runs,
//! prepare the lane's next recording, so that its replay does not start
//! from nothing when i ends. Preparing is two things, both off the lane's
//! critical path:
//!
//! * its GPU child is forked and opens the device
//!   ([`crate::backend::gpu::child::prestart`]), when its replay runs in a
//!   child and this process can fork (one lane);
//! * its input snapshot is decoded (decompressed, checked) into host
//!   memory on a helper thread; its replay's fills copy from there instead
//!   of decoding each window (every repetition, not only the first).
//!
//! The lane says what comes next ([`Lookahead::advance`], before each of
//! its recordings); the engine takes what was prepared when it starts a
//! replay ([`Lookahead::take`]) and starts the next preparation when its
//! first launch starts ([`Lookahead::launching`]). Preparation never
//! reports anything: whatever fails (the store, a corrupt chunk, the
//! device) is left for the next replay to meet and report as its own
//! verdict; a decode that failed is simply not used.
//!
//! Memory: at most two decoded inputs per lane (the current recording's,
//! kept for its later replays and repetitions, and the next one's), each
//! no larger than [`Lookahead::max_bytes`]; larger inputs are not
//! decoded ahead. The prestarted child holds a device context (and the
//! driver's per-context memory), nothing of the arena.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rrstore_format::{PartRole, PartSource, RecordingId};
use rrstore_store::Store;

use crate::backend::gpu::child::{self as gpu_child, prestart::ChildKey};
use crate::engine::ReplayOptions;

/// Largest input decoded ahead whatever the machine's memory.
const MAX_AHEAD: u64 = 16 << 30;
/// Decoded at once between two looks at the cancel flag.
const WINDOW: usize = 64 << 20;

/// Which replays the lookahead prepares for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Recordings replayed on a GPU backend (host replays read their input
    /// in the runner, on every core, already).
    #[default]
    Gpu,
    /// Every recording (tests, and measuring the decode alone).
    All,
}

/// What the lookahead did, counted (for tests and `RRSTORE_GPU_STATS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Preparations started (at a launch of the recording before).
    pub started: u64,
    /// GPU children prestarted.
    pub children: u64,
    /// Inputs decoded ahead completely.
    pub decoded: u64,
    /// Replays that used an input decoded ahead.
    pub used: u64,
}

struct Running {
    id: RecordingId,
    cancel: Arc<AtomicBool>,
    handle: JoinHandle<(Option<Store>, Option<Vec<u8>>)>,
}

struct State {
    store_dir: PathBuf,
    /// The lookahead's own store connection (the lane's is busy with the
    /// current replay), moved to the helper thread while it decodes.
    store: Option<Store>,
    mode: Mode,
    max_bytes: u64,
    /// The lane's next recording, not started yet.
    planned: Option<RecordingId>,
    running: Option<Running>,
    /// The recording this lane's prestarted GPU child was started for.
    child_for: Option<RecordingId>,
    /// Inputs decoded (at most two: the current recording's, taken by its
    /// replays, and the next one's once its decode has been waited for).
    decoded: Vec<(RecordingId, Arc<Vec<u8>>)>,
    stats: Stats,
}

impl State {
    /// Wait for the helper thread (cancelled unless `keep`) and keep what
    /// it decoded when `keep`.
    fn finish(&mut self, keep: bool) {
        let Some(r) = self.running.take() else {
            return;
        };
        if !keep {
            r.cancel.store(true, Ordering::Relaxed);
        }
        // A panic there is a bug; the replay then decodes for itself.
        if let Ok((store, buf)) = r.handle.join() {
            self.store = self.store.take().or(store);
            if let (Some(buf), true) = (buf, keep) {
                self.stats.decoded += 1;
                self.decoded.push((r.id, Arc::new(buf)));
            }
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        self.finish(false);
    }
}

/// One lane's lookahead; clones share it (the lane's run options carry
/// one).
#[derive(Clone)]
pub struct Lookahead(Arc<Mutex<State>>);

impl std::fmt::Debug for Lookahead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lookahead")
    }
}

/// Set once per process: `MemAvailable`, read the first time a lookahead
/// is made.
static AVAILABLE: AtomicU64 = AtomicU64::new(0);

fn mem_available() -> u64 {
    let cached = AVAILABLE.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    let kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    let bytes = kib.saturating_mul(1024).max(1);
    AVAILABLE.store(bytes, Ordering::Relaxed);
    bytes
}

impl Lookahead {
    /// A lookahead for one of `lanes` lanes over the store at `store_dir`.
    /// Each lane may hold two decoded inputs: an input is decoded ahead
    /// when it is at most an eighth of the memory available now divided
    /// by the lanes (and at most 16 GiB).
    pub fn new(store_dir: PathBuf, lanes: usize, mode: Mode) -> Lookahead {
        let share = mem_available() / 8 / lanes.max(1) as u64;
        Lookahead::with_limit(store_dir, mode, share.min(MAX_AHEAD))
    }

    /// [`new`](Self::new) with the largest input decoded ahead given.
    pub fn with_limit(store_dir: PathBuf, mode: Mode, max_bytes: u64) -> Lookahead {
        Lookahead(Arc::new(Mutex::new(State {
            store_dir,
            store: None,
            mode,
            max_bytes,
            planned: None,
            running: None,
            child_for: None,
            decoded: Vec::new(),
            stats: Stats::default(),
        })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding it is a bug elsewhere; the state is plain
        // data and stays usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The largest input decoded ahead.
    pub fn max_bytes(&self) -> u64 {
        self.state().max_bytes
    }

    /// What was done so far.
    pub fn stats(&self) -> Stats {
        self.state().stats
    }

    /// The lane is about to replay `current`, then `next` (`None`: the
    /// lane's last recording). What was prepared for another recording
    /// is dropped (its decode cancelled, its child ended).
    pub fn advance(&self, current: Option<RecordingId>, next: Option<RecordingId>) {
        let mut s = self.state();
        s.decoded.retain(|d| Some(&d.0) == current.as_ref());
        if s.running.as_ref().map(|r| &r.id) != current.as_ref() {
            s.finish(false);
        }
        if current.is_none() || (s.child_for.is_some() && s.child_for != current) {
            gpu_child::prestart::discard();
        }
        s.child_for = None;
        s.planned = next;
    }

    /// The input of `id` decoded ahead; `None` when there is none (not
    /// planned, too large, failed). Waits for a decode that still runs,
    /// whichever recording it is for, so that the replay starts with no
    /// helper thread left (it may fork its backend).
    pub fn take(&self, id: &RecordingId) -> Option<Arc<Vec<u8>>> {
        let mut s = self.state();
        s.finish(true);
        let buf = s.decoded.iter().find(|d| &d.0 == id)?.1.clone();
        s.stats.used += 1;
        Some(buf)
    }

    /// A replay with `opts` starts its first launch: start preparing the
    /// lane's next recording (once). The child is forked here, before the
    /// helper thread starts, while this process may still fork.
    pub fn launching(&self, opts: &ReplayOptions) {
        let mut s = self.state();
        if s.running.is_some() {
            return;
        }
        let Some(id) = s.planned.take() else {
            return;
        };
        if s.store.is_none() {
            s.store = Store::open_existing(&s.store_dir).ok();
        }
        let Some(store) = s.store.take() else {
            return;
        };
        let Ok(rec) = store.recording(&id) else {
            s.store = Some(store);
            return;
        };
        // The next replay's own options: its first replay is the recorded
        // image's (a check with `--image` replays the baseline first).
        let next_opts = ReplayOptions {
            image: None,
            ..opts.clone()
        };
        // The GPU backend and arena base of the next replay, if it runs on one.
        let gpu = crate::engine::preflight(&rec, &next_opts, None)
            .ok()
            .map(|p| (p.kind, p.base))
            .filter(|(k, _)| k.is_gpu());
        if gpu.is_none() && s.mode == Mode::Gpu {
            s.store = Some(store);
            return;
        }
        s.stats.started += 1;
        if let Some((k, base)) = gpu {
            let forks =
                k.runs_in_child(opts.timeout) && crate::backend::host::process::single_threaded();
            let key = ChildKey {
                name: k.as_str(),
                sandbox: opts.backends.sandbox,
                device: opts.device,
                arena: Some((base, rec.arena.size)),
                reserved: rec.arena.reserved,
            };
            if forks && gpu_child::prestart::prestart(key) {
                s.stats.children += 1;
                s.child_for = Some(id);
            }
        }
        let len = rec.arena.size;
        let whole = rec.part(PartRole::Input).is_some_and(|p| p.len == len);
        if !whole || len > s.max_bytes {
            s.store = Some(store);
            return;
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let stop = cancel.clone();
        let spawned = std::thread::Builder::new()
            .name("rrstore-lookahead".into())
            .spawn(move || {
                let buf = decode(&store, &id, len, &stop);
                (Some(store), buf)
            });
        match spawned {
            Ok(handle) => s.running = Some(Running { id, cancel, handle }),
            // No thread: nothing decoded ahead (the store went with the
            // closure; the next launch opens another).
            Err(_) => s.store = None,
        }
    }
}

/// The whole input of `id`, or `None` when it cannot be read (the replay
/// reads it again and reports why) or `stop` is set.
fn decode(store: &Store, id: &RecordingId, len: u64, stop: &AtomicBool) -> Option<Vec<u8>> {
    let mut parts = store.parts_of(id).ok()?;
    if !parts.random_access() {
        return None;
    }
    let n = usize::try_from(len).ok()?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(n).ok()?;
    buf.resize(n, 0);
    let mut off = 0usize;
    while off < n {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let w = WINDOW.min(n - off);
        parts
            .read_part_range_into(PartRole::Input, off as u64, &mut buf[off..off + w])
            .ok()?;
        off += w;
    }
    Some(buf)
}
