//! One replay of a stored recording with a given image (or its recorded
//! one), through the replay cache and keeping its output.
//!
//! Cache: the key is (recording ID, image hash, launch: team and thread
//! counts and overrides, `OMP_*` included; device: ordinal, and UUID where
//! both sides know it; [`settings_key`]: backend, verification, tolerance,
//! timeout, sandbox, placement); the newest history row for it
//! that has an output hash (or crashed / timed out) is reused instead of
//! replaying. Rows with the verdict `error` (the replay could not start) are
//! never reused, nor rows without a settings key (written by `replay`, or
//! before keys were kept). docs/regress.md, "The replay cache". Kept outputs: a run's arena is written to a scratch file in
//! the store's `tmp/` by the engine's `--save-output` path, then linked to
//! its history row: by reference when it equals the recorded output (no
//! bytes stored), else as a chunk-deduplicated object.

use rrstore_format::{PartRole, RecordingId};
use rrstore_store::{HistoryEntry, Store};
use serde::Serialize;

use super::image::ImageOverride;
use super::RegressError;
use crate::{ReplayOptions, ReplaySource};

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Base replay options (`image` and `save_output` are set per run).
    pub replay: ReplayOptions,
    /// Reuse a history row with the same recording, image hash and launch.
    pub use_cache: bool,
    /// Keep the output bytes in the store, linked to the history row.
    pub keep_output: bool,
}

/// The outcome of one run (replayed now or taken from the history).
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// History row.
    pub row: i64,
    /// Taken from the history; nothing was replayed.
    pub cached: bool,
    #[serde(with = "hexs")]
    pub image: [u8; 32],
    pub verdict: String,
    #[serde(with = "opt_hexs")]
    pub output: Option<[u8; 32]>,
    /// Fastest kernel time, nanoseconds.
    pub kernel_ns: Option<u64>,
    /// Kernel time of every repetition, nanoseconds (empty when the
    /// kernel did not run).
    pub kernel_times_ns: Vec<u64>,
    /// Team and thread counts and the launch overrides (history row).
    pub launch: String,
    /// Why it failed, or what differs (history detail).
    pub detail: String,
    /// The output is kept in the store (for `diff h:ROW`).
    pub output_kept: bool,
    /// How the image run was compiled from LLVM IR (the history row's
    /// provenance); None for a native image.
    pub compiled: Option<rrstore_store::Compilation>,
    /// What the replay's runners printed (empty when taken from the
    /// history), for the command to show.
    #[serde(skip)]
    pub runner_output: crate::sandbox::output::RunnerOutput,
}

impl Run {
    fn from_entry(e: &HistoryEntry, cached: bool, kept: bool) -> Run {
        Run {
            row: e.id,
            cached,
            image: e.image_hash,
            verdict: e.verdict.clone(),
            output: e.output_blake3,
            kernel_ns: e.kernel_ns.iter().min().copied(),
            kernel_times_ns: e.kernel_ns.clone(),
            launch: e.launch_text(),
            detail: e.detail.clone(),
            output_kept: kept,
            compiled: e.compiled.clone(),
            runner_output: Default::default(),
        }
    }

    /// The run as the history row `e` recorded it (nothing replayed).
    pub fn from_history(e: &HistoryEntry) -> Run {
        Run::from_entry(e, true, false)
    }

    /// The run produced no output (crashed, timed out, failed).
    pub fn failed(&self) -> bool {
        self.output.is_none()
    }
}

/// The hash of the image `image` stands for: the override's, or the
/// recording's own.
pub fn image_hash(
    store: &Store,
    id: &RecordingId,
    image: Option<&ImageOverride>,
) -> Result<[u8; 32], RegressError> {
    match image {
        Some(i) => Ok(i.hash),
        None => Ok(store.recording_image_hash(id)?.unwrap_or([0; 32])),
    }
}

/// What a replay's result depends on beyond the recording, the image, the
/// launch and the device (the history row's own columns; `confirm`: a
/// differing run's verdict depends on it): kept with each
/// row the regression commands write, and part of the cache key. Leaves
/// out what changes only where the output goes or how fast the input gets
/// in (`--save-output`, the host runner's arena I/O and preload, its
/// `KMP_*` wait policy), and the number of launches: every launch starts
/// from the same input, so the output and verdict are those of one, and a
/// reused row's kernel times are the launches it measured (a time
/// comparison with too few says so), which lets `check` reuse `bisect`'s
/// one-launch runs.
pub fn settings_key(opts: &ReplayOptions) -> String {
    let tolerance = match &opts.tolerance {
        None => "exact".to_string(),
        Some(t) => format!(
            "{:?}:rtol={:e}:atol={:e}:ulp={}",
            t.dtype,
            t.rtol,
            t.atol,
            t.max_ulp.map_or("-".to_string(), |u| u.to_string())
        ),
    };
    let timeout = opts
        .timeout
        .map_or("none".to_string(), |t| format!("{}ns", t.as_nanos()));
    let relocate_to = opts
        .relocate_to
        .map_or(String::new(), |a| format!("@{a:#x}"));
    format!(
        "v1 backend={} verify={:?} tolerance={tolerance} timeout={timeout} sandbox={} placement={}{relocate_to} ignore_limits={} confirm={}",
        opts.backend.as_str(),
        opts.verify,
        opts.backends.sandbox.as_str(),
        opts.placement.as_str(),
        opts.ignore_limits,
        opts.confirm,
    )
}

/// Whether history row `e` ran on the device `opts` asks for: the same
/// ordinal, and the same UUID where the row and this machine both know
/// one (another machine's host, a renumbered GPU).
fn same_device(e: &HistoryEntry, opts: &ReplayOptions) -> bool {
    let uuid = crate::fleet::devices::uuid_of(&e.backend, opts.device);
    e.device_ordinal == Some(u64::from(opts.device))
        && (uuid.is_empty() || e.device_uuid.is_empty() || uuid == e.device_uuid)
}

/// The newest reusable history row of `id` with image `image` that ran with
/// the launch, device and settings `opts` give it.
pub fn cached(
    store: &Store,
    id: &RecordingId,
    image: &[u8; 32],
    opts: &ReplayOptions,
) -> Result<Option<HistoryEntry>, RegressError> {
    newest(store, id, image, opts, Some(&settings_key(opts)))
}

/// The newest completed (or crashed, timed-out) history row of `id` with
/// image `image` on the launch and device `opts` give, whatever its other
/// settings (a `replay` row too): a reference to compare a new run's time
/// and output with, never reused in its place.
pub fn previous(
    store: &Store,
    id: &RecordingId,
    image: &[u8; 32],
    opts: &ReplayOptions,
) -> Result<Option<HistoryEntry>, RegressError> {
    newest(store, id, image, opts, None)
}

/// The newest row of `id` with `image` on the launch and device `opts`
/// give, with settings `key` when given.
fn newest(
    store: &Store,
    id: &RecordingId,
    image: &[u8; 32],
    opts: &ReplayOptions,
    key: Option<&str>,
) -> Result<Option<HistoryEntry>, RegressError> {
    let rec = store.recording(id)?;
    Ok(store.cached_run(id, image, key, &|e| {
        crate::history::same_launch(e, &rec, opts) && same_device(e, opts)
    })?)
}

/// Replay recording `id` with `image` (None: the recorded image).
pub fn run(
    store: &mut Store,
    id: &RecordingId,
    image: Option<&ImageOverride>,
    opts: &RunOptions,
) -> Result<Run, RegressError> {
    let hash = image_hash(store, id, image)?;
    // A run of the recording's `.bc` part runs the compiled image, not the
    // recorded one whose hash `hash` is: rows of that image are no answer.
    let compiles_part =
        image.is_none() && crate::engine::uses_bitcode_part(&store.recording(id)?, &opts.replay);
    if opts.use_cache && !compiles_part {
        if let Some(e) = cached(store, id, &hash, &opts.replay)? {
            let kept = store.saved_output(e.id)?.is_some();
            return Ok(Run::from_entry(&e, true, kept));
        }
    }
    let mut src = ReplaySource::stored(store, &id.to_hex())?;
    let mut ropts = opts.replay.clone();
    ropts.image = image.cloned();
    let scratch = store.dir().join(rrstore_store::layout::TMP_DIR);
    let tmp = opts.keep_output.then(|| {
        // Unique per replay: parallel checks (fleet) may replay the same
        // image in two threads of this process at once.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        scratch.join(format!(
            "regress-{}-{n}-{}.out",
            std::process::id(),
            super::short(&hash)
        ))
    });
    if let Some(t) = &tmp {
        std::fs::create_dir_all(&scratch).map_err(|source| RegressError::Read {
            what: scratch.display().to_string(),
            source,
        })?;
        ropts.save_output = Some(t.clone());
        // The confirmation's kept outputs go there too (`--confirm`).
        ropts.scratch_dir = Some(scratch.clone());
    }
    let report = crate::replay(&mut src, &ropts);
    let recorded = src.recording.part(PartRole::Output).map(|p| p.blake3);
    // It reads through the store's connection; done with it before the
    // store is written below.
    drop(src);
    let row = crate::history::record_for(store, *id, &report, &ropts)?;
    crate::history::register_compiled(store, &report)?;
    store.set_run_key(row, &settings_key(&ropts))?;
    // The index's log, when due, is folded back between replays, off any
    // replay's own time.
    store.fold_history_log();
    let mut kept = false;
    if let (Some(t), Some(out)) = (&tmp, report.output_blake3) {
        if t.is_file() {
            if recorded == Some(out) {
                store.link_output(row, &out)?;
            } else {
                store.save_output_file(row, t)?;
            }
            kept = true;
        }
    }
    if let Some(t) = &tmp {
        let _ = std::fs::remove_file(t);
    }
    let entry = crate::history::entry_for(*id, &report, &ropts);
    let mut r = Run::from_entry(&entry, false, kept);
    r.row = row;
    r.runner_output = report.runner_output;
    Ok(r)
}

mod hexs {
    pub fn serialize<S: serde::Serializer>(v: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&rrstore_format::id::hex(v))
    }
}

mod opt_hexs {
    pub fn serialize<S: serde::Serializer>(v: &Option<[u8; 32]>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(h) => s.serialize_str(&rrstore_format::id::hex(h)),
            None => s.serialize_none(),
        }
    }
}
