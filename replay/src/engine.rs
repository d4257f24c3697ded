//! The replay sequence: check the recording and the options, pick and drive
//! a backend (reserve, rehydrate, load, globals, launch; repeated for
//! `--repetitions`), then one streamed pass over the arena that verifies it
//! against the recorded output, hashes it and saves it.
//!
//! [`replay`] never fails once a recording is resolved: every outcome,
//! errors included, becomes a [`ReplayReport`] with a [`Verdict`], because
//! every replay gets a history row.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use rrstore_format::extents::PartExtents;
use rrstore_format::image::ImageTarget;
use rrstore_format::{PartRole, Recording};
use serde::Serialize;

use crate::backend::host::{ArenaIo, HostBackend, HostConfig, Preload, Runner};
use crate::backend::{Backend, BackendError, LaunchParams};
use crate::error::ReplayError;
use crate::placement::{Placement, PlacementReport, Rebaser};
use crate::source::ReplaySource;
use crate::verify::arg_pointers;
use crate::verify::ranges::{RangeReport, RangeTally};
use crate::verify::tolerance::{Tolerance, ToleranceComparer, ToleranceReport};

/// Piece size of streamed uploads, downloads and comparisons.
const PIECE: usize = 1 << 20;
/// Largest image or globals table read into memory.
const MAX_SMALL_PART: u64 = 4 << 30;

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Auto,
    Host,
    Cuda,
    Hip,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Host => "host",
            BackendKind::Cuda => "cuda",
            BackendKind::Hip => "hip",
        }
    }

    /// The backend that runs images of `target`.
    pub fn for_target(target: &ImageTarget) -> Option<BackendKind> {
        match target {
            ImageTarget::X86_64 => Some(BackendKind::Host),
            ImageTarget::Cubin { .. } | ImageTarget::Ptx { .. } | ImageTarget::Fatbin => {
                Some(BackendKind::Cuda)
            }
            ImageTarget::Amdgpu { .. } => Some(BackendKind::Hip),
            ImageTarget::None | ImageTarget::Unknown => None,
        }
    }

    /// What this backend's device is, for target-mismatch errors.
    fn device_words(self) -> &'static str {
        match self {
            BackendKind::Host => "x86_64 (this CPU)",
            BackendKind::Cuda => "cubin/PTX (an NVIDIA GPU)",
            BackendKind::Hip => "AMDGPU code object (an AMD GPU)",
            BackendKind::Auto => "any target",
        }
    }
}

/// `--verify` / `--no-verify` / neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyMode {
    /// Verify when the recording has an output snapshot.
    Auto,
    /// Verify; an error when there is no output snapshot.
    On,
    Off,
}

/// Everything `rrstore replay` can ask for.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub backend: BackendKind,
    pub verify: VerifyMode,
    /// Tolerance mode instead of byte-exact comparison.
    pub tolerance: Option<Tolerance>,
    pub num_teams: Option<u64>,
    pub num_threads: Option<u64>,
    pub ignore_limits: bool,
    /// Launches (each after re-uploading the input and globals); at least 1.
    pub repetitions: u32,
    pub timeout: Option<Duration>,
    pub save_output: Option<PathBuf>,
    /// How to start the host runner (default: this executable).
    pub host_runner: Option<Runner>,
    /// Extra environment for the host runner.
    pub host_env: Vec<(OsString, OsString)>,
    /// How the host backend moves bytes into its runner's arena.
    pub host_arena_io: ArenaIo,
    /// What the host backend's spare runner loads before the recording is
    /// known (see [`crate::backend::host::preload`]).
    pub host_preload: Preload,
    /// Run this image instead of the recorded one (`replay --image`, the
    /// regression commands); checked against the recording first.
    pub image: Option<crate::regress::image::ImageOverride>,
    /// Where the arena goes (`--placement`, `--relocate-to`; issue 19).
    pub placement: Placement,
    pub relocate_to: Option<u64>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            backend: BackendKind::Auto,
            verify: VerifyMode::Auto,
            tolerance: None,
            num_teams: None,
            num_threads: None,
            ignore_limits: false,
            repetitions: 1,
            timeout: None,
            save_output: None,
            host_runner: None,
            host_env: Vec::new(),
            host_arena_io: ArenaIo::Auto,
            host_preload: Preload::Auto,
            image: None,
            placement: Placement::Auto,
            relocate_to: None,
        }
    }
}

/// How a replay ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "verdict")]
pub enum Verdict {
    /// Byte-identical to the recorded output.
    Verified,
    /// Within the `--tolerance` bounds (not byte-identical).
    WithinTolerance,
    Mismatch,
    /// Ran, not compared (`--no-verify` or no output snapshot).
    Unverified,
    Crashed {
        signal: i32,
    },
    TimedOut,
    Error,
}

impl Verdict {
    /// Stable name stored in the history.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Verified => "verified",
            Verdict::WithinTolerance => "within-tolerance",
            Verdict::Mismatch => "mismatch",
            Verdict::Unverified => "unverified",
            Verdict::Crashed { .. } => "crashed",
            Verdict::TimedOut => "timed-out",
            Verdict::Error => "error",
        }
    }
}

/// How the input snapshot reached the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RehydratePath {
    /// The backend read and decoded the source's files itself.
    Files,
    /// The engine decoded the input and handed the bytes over.
    Engine,
}

/// Where the time went (nanoseconds).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timing {
    pub reserve_ns: u64,
    /// Per repetition: writing the input snapshot into the arena.
    pub rehydrate_ns: Vec<u64>,
    pub rehydrate_bytes: u64,
    /// How the input reached the arena in the last repetition (`None`
    /// when the replay stopped before).
    pub rehydrate_path: Option<RehydratePath>,
    pub load_image_ns: u64,
    pub globals_ns: u64,
    /// Per repetition, measured around the call in the runner/device.
    pub kernel_ns: Vec<u64>,
    pub verify_ns: u64,
    pub wall_ns: u64,
}

impl Timing {
    /// Rehydration throughput of the fastest repetition, bytes per second.
    pub fn rehydrate_bytes_per_s(&self) -> Option<f64> {
        let best = *self.rehydrate_ns.iter().min()?;
        (best > 0).then(|| self.rehydrate_bytes as f64 / (best as f64 / 1e9))
    }

    pub fn kernel_min_ns(&self) -> Option<u64> {
        self.kernel_ns.iter().min().copied()
    }

    pub fn kernel_median_ns(&self) -> Option<u64> {
        let mut v = self.kernel_ns.clone();
        v.sort_unstable();
        v.get(v.len().checked_sub(1)? / 2).copied()
    }

    /// Mean kernel time over the repetitions, nanoseconds.
    pub fn kernel_mean_ns(&self) -> Option<f64> {
        let n = self.kernel_ns.len();
        (n > 0).then(|| self.kernel_ns.iter().map(|&t| t as f64).sum::<f64>() / n as f64)
    }

    /// Sample standard deviation of the kernel times, nanoseconds (0 for a
    /// single launch).
    pub fn kernel_sd_ns(&self) -> Option<f64> {
        let mean = self.kernel_mean_ns()?;
        let n = self.kernel_ns.len();
        if n < 2 {
            return Some(0.0);
        }
        let ss: f64 = self
            .kernel_ns
            .iter()
            .map(|&t| (t as f64 - mean).powi(2))
            .sum();
        Some((ss / (n - 1) as f64).sqrt())
    }
}

/// The outcome of one replay.
#[derive(Debug, Serialize)]
pub struct ReplayReport {
    pub recording_id: String,
    pub kernel: String,
    pub source: String,
    pub backend: String,
    pub device: String,
    pub runtime_libraries: Vec<String>,
    /// blake3 of the image run (hex).
    pub image_blake3: Option<String>,
    pub arena_base: Option<u64>,
    pub arena_size: u64,
    pub args: Vec<u64>,
    pub num_teams: u64,
    pub num_threads: u64,
    pub repetitions: u32,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// What failed, when the verdict is crashed, timed-out or error.
    pub error: Option<String>,
    pub mismatch: Option<RangeReport>,
    pub tolerance: Option<ToleranceReport>,
    /// blake3 of the arena after the (last) launch (hex).
    pub output_blake3: Option<String>,
    pub saved_output: Option<PathBuf>,
    /// Where the arena was placed (`None` when the replay stopped before).
    pub placement: Option<PlacementReport>,
    /// Unix seconds.
    pub started_at: i64,
    pub timing: Timing,
    #[serde(skip)]
    pub failure: Option<ReplayError>,
    #[serde(skip)]
    pub image_hash: [u8; 32],
    #[serde(skip)]
    pub output_hash: Option<[u8; 32]>,
}

/// Replay `src` as `opts` say. See the module documentation.
pub fn replay(src: &mut ReplaySource, opts: &ReplayOptions) -> ReplayReport {
    replay_with(src, opts, &mut || {})
}

/// [`replay`], running `meanwhile` once while the backend loads the image,
/// when all the first launch needs was handed to it and this process has
/// nothing to do but wait (with the host backend: for its runner's
/// `dlopen` of the OpenMP runtime, ~10 ms, and the runner's fill where it
/// fills the arena). For work the caller has to do anyway, taken off the
/// time to the result (`rrstore replay` folds the store index's log back
/// there). Not run when the replay fails before.
pub fn replay_with(
    src: &mut ReplaySource,
    opts: &ReplayOptions,
    meanwhile: &mut dyn FnMut(),
) -> ReplayReport {
    let t0 = Instant::now();
    let rec = &src.recording;
    let started_at = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut report = ReplayReport {
        recording_id: src.id.to_hex(),
        kernel: rec.kernel.clone(),
        source: src.origin.to_string(),
        backend: String::new(),
        device: String::new(),
        runtime_libraries: Vec::new(),
        image_blake3: None,
        arena_base: rec.arena.base,
        arena_size: rec.arena.size,
        args: rec.args.clone(),
        num_teams: opts.num_teams.unwrap_or(rec.launch.num_teams),
        num_threads: opts.num_threads.unwrap_or(rec.launch.num_threads),
        repetitions: opts.repetitions.max(1),
        verdict: Verdict::Error,
        error: None,
        mismatch: None,
        tolerance: None,
        output_blake3: None,
        saved_output: None,
        placement: None,
        started_at,
        timing: Timing::default(),
        failure: None,
        image_hash: [0; 32],
        output_hash: None,
    };
    if let Err(e) = run(src, opts, meanwhile, &mut report) {
        report.verdict = match &e {
            ReplayError::Backend(BackendError::Crashed { signal }) => {
                Verdict::Crashed { signal: *signal }
            }
            ReplayError::Backend(BackendError::TimedOut(_)) => Verdict::TimedOut,
            _ => Verdict::Error,
        };
        report.error = Some(e.to_string());
        report.failure = Some(e);
    }
    report.image_blake3 = (report.image_hash != [0; 32]).then(|| hex(&report.image_hash));
    report.output_blake3 = report.output_hash.as_ref().map(|h| hex(h));
    report.timing.wall_ns = t0.elapsed().as_nanos() as u64;
    report
}

fn hex(h: &[u8]) -> String {
    rrstore_format::id::hex(h)
}

/// Check what can be checked before any backend work.
fn preflight(
    rec: &Recording,
    opts: &ReplayOptions,
) -> Result<(BackendKind, bool, u64), ReplayError> {
    let not_replayable = |why: &str| ReplayError::NotReplayable {
        kernel: rec.kernel.clone(),
        why: why.into(),
    };
    let Some(base) = rec.arena.base else {
        return Err(not_replayable(
            "it has no arena address (LLVM 16-17 recordings do not save BumpAllocVAStart), so pointers in its snapshot cannot be placed",
        ));
    };
    if rec.part(PartRole::Image).is_none() || rec.image_target == ImageTarget::None {
        return Err(not_replayable("it has no device image"));
    }
    let has_output = rec.part(PartRole::Output).is_some();
    let verify = match opts.verify {
        VerifyMode::Off => false,
        VerifyMode::Auto if opts.tolerance.is_none() => has_output,
        _ if !has_output => {
            return Err(ReplayError::NoOutput {
                kernel: rec.kernel.clone(),
            })
        }
        _ => true,
    };
    if let Some(t) = &opts.tolerance {
        t.validate()?;
    }
    let image_target = opts.image.as_ref().map_or(&rec.image_target, |o| &o.target);
    let wanted = BackendKind::for_target(image_target);
    let kind = match (opts.backend, wanted) {
        (BackendKind::Auto, Some(k)) => k,
        // Not a device image rrstore knows: the recording (or --image) is
        // malformed input, not a backend missing here.
        (BackendKind::Auto, None) => {
            return Err(ReplayError::UnknownTarget {
                kernel: rec.kernel.clone(),
                target: image_target.describe(),
            })
        }
        (k, Some(w)) if k == w => k,
        (k, _) => {
            return Err(BackendError::TargetMismatch {
                image: image_target.describe(),
                device: format!("{} of the {} backend", k.device_words(), k.as_str()),
            }
            .into())
        }
    };
    check_limit(
        "--num-teams",
        opts.num_teams,
        rec.launch.teams_limits,
        "TeamsLimits",
        opts,
    )?;
    check_limit(
        "--num-threads",
        opts.num_threads,
        rec.launch.threads_limits,
        "ThreadsLimits",
        opts,
    )?;
    Ok((kind, verify, base))
}

fn check_limit(
    what: &'static str,
    value: Option<u64>,
    limits: Option<[u64; 2]>,
    key: &'static str,
    opts: &ReplayOptions,
) -> Result<(), ReplayError> {
    let (Some(value), Some([min, max])) = (value, limits) else {
        return Ok(());
    };
    if opts.ignore_limits {
        return Ok(());
    }
    if value < min || (max != 0 && value > max) {
        return Err(ReplayError::Limits {
            what,
            value,
            min,
            max,
            key,
        });
    }
    Ok(())
}

/// The host backend's settings for `opts`.
fn host_config(opts: &ReplayOptions) -> Result<HostConfig, ReplayError> {
    let runner = match &opts.host_runner {
        Some(r) => r.clone(),
        None => Runner::current_exe()?,
    };
    let mut env = opts.host_env.clone();
    if let Some(t) = opts.num_teams {
        env.push(("OMP_NUM_TEAMS".into(), t.to_string().into()));
    }
    if let Some(t) = opts.num_threads {
        env.push(("OMP_NUM_THREADS".into(), t.to_string().into()));
        env.push(("OMP_TEAMS_THREAD_LIMIT".into(), t.to_string().into()));
    }
    Ok(HostConfig {
        runner,
        env,
        arena_io: opts.host_arena_io,
        preload: opts.host_preload.clone(),
    })
}

/// Call before opening the recording (the store): when `opts` may pick the
/// host backend, start its runner process now, forked while this process is
/// still small (it starts loading the OpenMP runtime at once), or executed
/// so that its start-up overlaps opening the store (see
/// [`crate::backend::host::prestart`] and [`crate::backend::host::preload`]
/// for how the arena keeps its address either way). Harmless when the
/// replay ends up not using it. Call it from the thread that runs
/// [`replay`]: the runner dies with the thread that started it.
pub fn prestart(opts: &ReplayOptions) {
    crate::placement::occupy::occupy_from_env();
    if matches!(opts.backend, BackendKind::Auto | BackendKind::Host) {
        if let Ok(config) = host_config(opts) {
            crate::backend::host::prestart(&config);
        }
    }
}

fn open_backend(
    kind: BackendKind,
    opts: &ReplayOptions,
    arena: Option<(u64, u64)>,
    recorded_reservation: Option<u64>,
) -> Result<Box<dyn Backend>, ReplayError> {
    if !matches!(kind, BackendKind::Host | BackendKind::Auto) {
        // A spare host runner started by `prestart` (it may hold the OpenMP
        // runtime it preloaded) is of no use to this replay.
        crate::backend::host::end_spare();
    }
    match kind {
        BackendKind::Host | BackendKind::Auto => Ok(Box::new(HostBackend::new(host_config(opts)?))),
        // GPU backends hold the arena range before their runtime initializes.
        // HIP (and CUDA under --timeout) run in a child process.
        BackendKind::Cuda => Ok(crate::backend::gpu_child::open_gpu(
            "cuda",
            arena,
            recorded_reservation,
            opts.timeout,
        )?),
        BackendKind::Hip => Ok(crate::backend::gpu_child::open_gpu(
            "hip",
            arena,
            recorded_reservation,
            opts.timeout,
        )?),
    }
}

/// Read a small part (image, globals) whole, checked against its length.
fn read_small(src: &mut ReplaySource, role: PartRole) -> Result<Vec<u8>, ReplayError> {
    let kernel = src.recording.kernel.clone();
    let Some(info) = src.recording.part(role) else {
        return Ok(Vec::new());
    };
    if info.len > MAX_SMALL_PART {
        return Err(ReplayError::PartSize {
            kernel,
            role,
            expected: MAX_SMALL_PART,
            actual: info.len,
        });
    }
    let mut buf = vec![0u8; info.len as usize];
    src.parts
        .read_part_into(role, &mut buf)
        .map_err(|source| ReplayError::Part {
            kernel,
            role,
            source,
        })?;
    Ok(buf)
}

fn part_error(rec: &Recording, role: PartRole) -> impl Fn(std::io::Error) -> ReplayError + '_ {
    move |source| ReplayError::Part {
        kernel: rec.kernel.clone(),
        role,
        source,
    }
}

/// Write the input snapshot into the arena: window by window straight into
/// the backend's staging windows when it has them, else piece by piece
/// through `upload`. Random-access sources (the store) decode each window on
/// all cores.
fn rehydrate(
    src: &mut ReplaySource,
    backend: &mut dyn Backend,
    scan: Option<&Rebaser>,
    rebased: &mut Vec<u64>,
) -> Result<(), ReplayError> {
    let rec = &src.recording;
    let size = rec.arena.size;
    let len = rec.part(PartRole::Input).map(|p| p.len).unwrap_or(0);
    if len != size {
        return Err(ReplayError::PartSize {
            kernel: rec.kernel.clone(),
            role: PartRole::Input,
            expected: size,
            actual: len,
        });
    }
    if src.parts.random_access() {
        let parts = &mut src.parts;
        let mut fill = |off: u64, dst: &mut [u8]| {
            parts
                .read_part_range_into(PartRole::Input, off, dst)
                .map_err(part_error(rec, PartRole::Input))?;
            // Relocation: scanned before commit, while the window is hot.
            if let Some(r) = scan {
                rebased.extend(r.rebase(dst, off));
            }
            Ok(())
        };
        upload_windows(backend, size, WINDOW, &mut fill)
    } else {
        let mut r = src
            .parts
            .open_part(PartRole::Input)
            .map_err(part_error(rec, PartRole::Input))?;
        let mut fill = |off: u64, dst: &mut [u8]| {
            r.read_exact(dst)
                .map_err(part_error(rec, PartRole::Input))?;
            if let Some(r) = scan {
                rebased.extend(r.rebase(dst, off));
            }
            Ok(())
        };
        upload_windows(backend, size, PIECE, &mut fill)
    }
}

/// The input part as extents of files, when the source can give them and
/// they cover exactly the arena (anything else is left to [`rehydrate`],
/// which reports it).
fn input_extents(src: &mut ReplaySource) -> Option<PartExtents> {
    let plan = src.parts.extents(PartRole::Input).ok().flatten()?;
    (plan.len() == src.recording.arena.size).then_some(plan)
}

/// Largest window decoded at once from a random-access source when the
/// backend has no staging windows (bounded memory).
const WINDOW: usize = 64 << 20;

/// Writes the input bytes at an offset into a buffer.
type Fill<'a> = dyn FnMut(u64, &mut [u8]) -> Result<(), ReplayError> + 'a;

/// Feed `size` input bytes to `backend` in order: `fill(offset, dst)` writes
/// the bytes at `offset` into `dst`, a staging window when the backend has
/// one, else a buffer of at most `piece` bytes passed to `upload`.
fn upload_windows(
    backend: &mut dyn Backend,
    size: u64,
    piece: usize,
    fill: &mut Fill<'_>,
) -> Result<(), ReplayError> {
    let mut buf = Vec::new();
    let mut off = 0u64;
    while off < size {
        let left = usize::try_from(size - off).unwrap_or(usize::MAX);
        if let Some(w) = backend.staging_window(left)? {
            let n = w.len().min(left);
            if n > 0 {
                fill(off, &mut w[..n])?;
                backend.commit_staging(off, n)?;
                off += n as u64;
                continue;
            }
        }
        let n = piece.min(left);
        buf.resize(n, 0);
        fill(off, &mut buf[..n])?;
        backend.upload(off, &buf[..n])?;
        off += n as u64;
    }
    Ok(())
}

fn run(
    src: &mut ReplaySource,
    opts: &ReplayOptions,
    meanwhile: &mut dyn FnMut(),
    report: &mut ReplayReport,
) -> Result<(), ReplayError> {
    let (kind, verify, base) = preflight(&src.recording, opts)?;
    report.backend = kind.as_str().to_string();
    let image = match &opts.image {
        Some(o) => o.checked_bytes(&src.recording)?,
        None => read_small(src, PartRole::Image)?,
    };
    let rec = src.recording.clone();
    let mut backend = open_backend(kind, opts, Some((base, rec.arena.size)), rec.arena.reserved)?;
    let params = LaunchParams {
        num_teams: report.num_teams,
        num_threads: report.num_threads,
        shared_memory: rec.launch.shared_memory,
        loop_trip_count: rec.launch.loop_trip_count,
        timeout: opts.timeout,
    };

    backend.expect_image(&image);
    let t = Instant::now();
    // Relocation (issue 19): the placement decides where to reserve.
    crate::placement::occupy::occupy_from_env();
    let placed = crate::placement::place(
        backend.as_mut(),
        opts.placement,
        base,
        rec.arena.size,
        opts.relocate_to,
    )?;
    let rebaser = placed.rebaser;
    let scan = rebaser.filter(|_| crate::placement::scan_enabled());
    report.placement = Some(PlacementReport {
        mode: if rebaser.is_some() {
            "relocated"
        } else {
            "recorded"
        },
        address: placed.base,
        recorded_address: base,
        scan: rebaser.is_some() && scan.is_some(),
        ..PlacementReport::default()
    });
    report.timing.reserve_ns = t.elapsed().as_nanos() as u64;
    report.timing.rehydrate_bytes = rec.arena.size;
    // The image is loaded right after the arena is reserved (nothing it maps
    // can land there any more) and before anything else, so a backend may
    // load it while the engine goes on (the host backend does: its runner
    // runs dlopen, the longest step of a small replay, meanwhile). Where
    // the backend reads the input's files itself (the host runner), that
    // fill is requested just before: the runner fills, then loads.
    // A backend that cannot scan its own fills is handed scanned bytes.
    let scans_fills = scan.is_none() || backend.scan_fills(scan);
    let mut fill_plan = if scans_fills && backend.fills_from_files(rec.arena.size) {
        input_extents(src)
    } else {
        None
    };
    if let Some(plan) = &fill_plan {
        backend.start_fill(plan)?;
    }
    let t = Instant::now();
    backend.load_image(&image, &rec.kernel)?;
    report.timing.load_image_ns = t.elapsed().as_nanos() as u64;
    report.image_hash = *blake3::hash(&image).as_bytes();
    report.device = backend.device_description();
    let globals_part = read_small(src, PartRole::Globals)?;
    let mut globals = Vec::new();
    for g in &rec.globals {
        let end = g.data_offset.checked_add(g.size);
        let Some(data) = end.and_then(|e| globals_part.get(g.data_offset as usize..e as usize))
        else {
            return Err(ReplayError::GlobalBounds {
                kernel: rec.kernel.clone(),
                name: g.name.clone(),
                offset: g.data_offset,
                size: g.size,
                len: globals_part.len() as u64,
            });
        };
        // Relocation: declare-target pointers into the arena, rebased.
        let mut data = data.to_vec();
        if let (Some(r), Some(p)) = (&rebaser, report.placement.as_mut()) {
            p.rebased_globals += crate::placement::scan::rebase_global(r, &mut data);
        }
        globals.push((g.name.as_str(), data));
    }
    let (launch_args, rebased_args) = match &rebaser {
        Some(r) => crate::placement::scan::rebase_args(r, &rec.args),
        None => (rec.args.clone(), 0),
    };
    // The first launch's globals go right behind the image: a backend that
    // loads it in the background (the host runner) writes them as soon as
    // it is loaded, without waiting for the engine to ask after the fill.
    // They live in the image, not the arena, so the fill's fallback copy
    // below cannot undo them.
    let write_globals = |backend: &mut Box<dyn Backend>, report: &mut ReplayReport| {
        let t = Instant::now();
        for (name, data) in &globals {
            backend.write_global(name, data)?;
        }
        report.timing.globals_ns += t.elapsed().as_nanos() as u64;
        Ok::<(), BackendError>(())
    };
    write_globals(&mut backend, report)?;
    // The caller's work runs once, when this process first has nothing to
    // do but wait for the backend: before the fill's result where the
    // backend fills the arena, else after the engine's own copy.
    let mut meanwhile = Some(meanwhile);
    let mut engine_rebased = Vec::new();
    let mut idle = || {
        if let Some(f) = meanwhile.take() {
            f();
        }
    };
    for rep in 0..report.repetitions {
        let t = Instant::now();
        // The fill's own duration (measured where it ran); when it failed
        // (a pack moved by gc, a corrupt chunk), the bytes are handed over
        // instead, which retries and reports precisely.
        let filled = match &fill_plan {
            Some(plan) => {
                if rep > 0 {
                    backend.start_fill(plan)?;
                }
                idle();
                backend.finish_fill()?.ok()
            }
            None => None,
        };
        let ns = match filled {
            Some(took) => {
                report.timing.rehydrate_path = Some(RehydratePath::Files);
                if let Some(p) = report.placement.as_mut() {
                    p.rebased_pointers = backend.fill_rebased();
                }
                took.as_nanos() as u64
            }
            None => {
                fill_plan = None;
                engine_rebased.clear();
                rehydrate(src, backend.as_mut(), scan.as_ref(), &mut engine_rebased)?;
                if let Some(p) = report.placement.as_mut() {
                    p.rebased_pointers = engine_rebased.len() as u64;
                }
                report.timing.rehydrate_path = Some(RehydratePath::Engine);
                let ns = t.elapsed().as_nanos() as u64;
                idle();
                ns
            }
        };
        report.timing.rehydrate_ns.push(ns);
        if rep > 0 {
            write_globals(&mut backend, report)?;
        }
        let k = backend.launch(&launch_args, &params)?;
        report.timing.kernel_ns.push(k.as_nanos() as u64);
        if rep == 0 {
            report.runtime_libraries = backend.runtime_libraries();
        }
    }

    if let Some(p) = report.placement.as_mut() {
        p.rebased_args = rebased_args;
    }
    let t = Instant::now();
    // Relocation: back to the recorded addresses before hashing, comparing
    // and saving; in place where the backend can, else on the way down.
    let translate_down = match &rebaser {
        Some(r) => match backend.back_translate(r)? {
            Some(n) => {
                if let Some(p) = report.placement.as_mut() {
                    p.back_translated = n;
                }
                None
            }
            None => Some(*r),
        },
        None => None,
    };
    check_output(src, backend.as_mut(), opts, verify, translate_down, report)?;
    report.timing.verify_ns = t.elapsed().as_nanos() as u64;
    Ok(())
}

enum Comparer {
    None,
    Exact(RangeTally),
    Tolerance(ToleranceComparer),
}

/// One pass over the arena: compare with the output part, hash, save.
fn check_output(
    src: &mut ReplaySource,
    backend: &mut dyn Backend,
    opts: &ReplayOptions,
    verify: bool,
    translate: Option<Rebaser>,
    report: &mut ReplayReport,
) -> Result<(), ReplayError> {
    let rec = &src.recording;
    let size = rec.arena.size;
    let pointers = arg_pointers(&rec.args, rec.arena.base.unwrap_or(0), size);
    let mut comparer = match (verify, opts.tolerance) {
        (false, _) => Comparer::None,
        (true, None) => Comparer::Exact(RangeTally::new(pointers)),
        (true, Some(t)) => Comparer::Tolerance(ToleranceComparer::new(t)),
    };
    let output_info = rec.part(PartRole::Output).cloned();
    let mut expected_reader = None;
    if verify {
        let len = output_info.as_ref().map(|p| p.len).unwrap_or(0);
        if len != size {
            return Err(ReplayError::PartSize {
                kernel: rec.kernel.clone(),
                role: PartRole::Output,
                expected: size,
                actual: len,
            });
        }
    }
    // Where the backend can hash the arena in place (the host runner), do so
    // first: the history needs its blake3 anyway, and when it equals the
    // recorded output's blake3 (from the manifest) the arena is
    // byte-identical to the output, so the output part need not be read at
    // all. Otherwise the streamed comparison below locates the differences.
    // (An arena translated on the way down is hashed here, translated.)
    let arena_hash = match translate {
        Some(_) => None,
        None => backend.arena_hash()?,
    };
    let identical_by_hash =
        verify && arena_hash.is_some() && output_info.as_ref().map(|o| o.blake3) == arena_hash;
    if verify && !identical_by_hash {
        expected_reader = Some(
            src.parts
                .open_part(PartRole::Output)
                .map_err(part_error(rec, PartRole::Output))?,
        );
    }
    let mut save = match &opts.save_output {
        Some(path) => Some((
            std::io::BufWriter::with_capacity(
                PIECE,
                std::fs::File::create(path).map_err(|source| ReplayError::SaveOutput {
                    path: path.clone(),
                    source,
                })?,
            ),
            path,
        )),
        None => None,
    };
    // Without the backend's hash the arena is hashed as it streams by.
    let mut hasher = arena_hash.is_none().then(blake3::Hasher::new);
    let mut expected_buf = if verify { vec![0u8; PIECE] } else { Vec::new() };
    let streaming = expected_reader.is_some() || save.is_some() || hasher.is_some();
    let mut actual_buf = if streaming {
        vec![0u8; PIECE]
    } else {
        Vec::new()
    };
    let mut off = if streaming { 0u64 } else { size };
    while off < size {
        let n = PIECE.min((size - off) as usize);
        let actual = &mut actual_buf[..n];
        backend.download(off, actual)?;
        if let Some(r) = &translate {
            let n = r.back_translate(actual, off);
            if let Some(p) = report.placement.as_mut() {
                p.back_translated += n;
            }
        }
        let actual = &*actual;
        if let Some(h) = hasher.as_mut() {
            h.update(actual);
        }
        if let Some((w, path)) = save.as_mut() {
            w.write_all(actual)
                .map_err(|source| ReplayError::SaveOutput {
                    path: path.to_path_buf(),
                    source,
                })?;
        }
        if let Some(r) = expected_reader.as_mut() {
            r.read_exact(&mut expected_buf[..n])
                .map_err(part_error(rec, PartRole::Output))?;
            match &mut comparer {
                Comparer::Exact(c) => c.feed(actual, &expected_buf[..n]),
                Comparer::Tolerance(c) => c.feed(actual, &expected_buf[..n]),
                Comparer::None => {}
            }
        }
        off += n as u64;
    }
    drop(expected_reader);
    if let Some((mut w, path)) = save {
        w.flush().map_err(|source| ReplayError::SaveOutput {
            path: path.clone(),
            source,
        })?;
        report.saved_output = Some(path.clone());
    }
    let mut identical = false;
    report.verdict = match comparer {
        _ if identical_by_hash => {
            identical = true;
            Verdict::Verified
        }
        Comparer::None => Verdict::Unverified,
        Comparer::Exact(c) => match c.finish() {
            None => {
                identical = true;
                Verdict::Verified
            }
            Some(m) => {
                report.mismatch = Some(m);
                Verdict::Mismatch
            }
        },
        Comparer::Tolerance(c) => {
            let r = c.finish();
            let v = if r.differing == 0 && r.tail_bytes_differing == 0 {
                identical = true;
                Verdict::Verified
            } else if r.passed {
                Verdict::WithinTolerance
            } else {
                Verdict::Mismatch
            };
            report.tolerance = Some(r);
            v
        }
    };
    report.output_hash = Some(match (arena_hash, identical, output_info, hasher) {
        (Some(h), ..) => h,
        // Byte-identical to the recorded output: its hash is in the manifest.
        (None, true, Some(info), _) => info.blake3,
        (None, _, _, Some(h)) => *h.finalize().as_bytes(),
        _ => [0; 32],
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that records what reaches its arena, with or without
    /// staging windows.
    struct Recorder {
        arena: Vec<u8>,
        window: Option<Vec<u8>>,
        commits: usize,
        uploads: usize,
    }

    impl Backend for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn device_description(&self) -> String {
            String::new()
        }
        fn reserve(&mut self, _: u64, _: u64) -> Result<(), BackendError> {
            Ok(())
        }
        fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
            self.uploads += 1;
            self.arena[offset as usize..offset as usize + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn load_image(&mut self, _: &[u8], _: &str) -> Result<(), BackendError> {
            Ok(())
        }
        fn write_global(&mut self, _: &str, _: &[u8]) -> Result<(), BackendError> {
            Ok(())
        }
        fn launch(&mut self, _: &[u64], _: &LaunchParams) -> Result<Duration, BackendError> {
            Ok(Duration::ZERO)
        }
        fn download(&mut self, _: u64, _: &mut [u8]) -> Result<(), BackendError> {
            Ok(())
        }
        fn staging_window(&mut self, max_len: usize) -> Result<Option<&mut [u8]>, BackendError> {
            Ok(self.window.as_mut().map(|w| {
                let n = w.len().min(max_len);
                w.fill(0xee);
                &mut w[..n]
            }))
        }
        fn commit_staging(&mut self, offset: u64, len: usize) -> Result<(), BackendError> {
            self.commits += 1;
            let w = self
                .window
                .as_ref()
                .map(|w| w[..len].to_vec())
                .unwrap_or_default();
            self.arena[offset as usize..offset as usize + len].copy_from_slice(&w);
            Ok(())
        }
    }

    fn fill_from(src: &[u8]) -> impl FnMut(u64, &mut [u8]) -> Result<(), ReplayError> + '_ {
        |off, dst| {
            dst.copy_from_slice(&src[off as usize..off as usize + dst.len()]);
            Ok(())
        }
    }

    #[test]
    fn windows_and_uploads_deliver_every_byte_in_place() {
        let input: Vec<u8> = (0..100_003u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for window in [None, Some(4096), Some(1 << 20)] {
            let mut b = Recorder {
                arena: vec![0; input.len()],
                window: window.map(|n| vec![0; n]),
                commits: 0,
                uploads: 0,
            };
            upload_windows(&mut b, input.len() as u64, 10_000, &mut fill_from(&input)).unwrap();
            assert!(b.arena == input, "window {window:?}");
            match window {
                None => assert_eq!((b.uploads, b.commits), (11, 0)),
                Some(n) => assert_eq!((b.uploads, b.commits), (0, input.len().div_ceil(n))),
            }
        }
    }
}
