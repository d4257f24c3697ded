//! What a replay reports ([`ReplayReport`]): the verdict, the hashes, the
//! timing. Its JSON form (`rrstore replay --json`) is a contract
//! (`docs/json/replay.schema.json`): hashes serialize as hex strings, the
//! error as its message.

use crate::placement::PlacementReport;
use std::path::PathBuf;

use serde::{Serialize, Serializer};

pub use crate::backend::RehydratePath;
use crate::error::ReplayError;
use crate::verify::ranges::RangeReport;
use crate::verify::tolerance::ToleranceReport;

/// How a replay ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "verdict")]
pub enum Verdict {
    /// Byte-identical to the recorded output.
    Verified,
    /// Within the `--tolerance` bounds (not byte-identical).
    WithinTolerance,
    Mismatch,
    /// Differs from the recorded output, and the confirmation replays
    /// (`--confirm`) disagree among themselves: the kernel's output
    /// varies between identical replays ([`ReplayReport::confirmation`]).
    Nondeterministic,
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
            Verdict::Nondeterministic => "nondeterministic",
            Verdict::Unverified => "unverified",
            Verdict::Crashed { .. } => "crashed",
            Verdict::TimedOut => "timed-out",
            Verdict::Error => "error",
        }
    }

    /// The verdict of a replay that failed with `e`.
    pub(super) fn of_failure(e: &ReplayError) -> Verdict {
        use crate::backend::BackendError;
        match e {
            ReplayError::Backend(BackendError::Crashed { signal }) => {
                Verdict::Crashed { signal: *signal }
            }
            ReplayError::Backend(BackendError::TimedOut(_)) => Verdict::TimedOut,
            _ => Verdict::Error,
        }
    }
}

/// The confirmation of a differing output: `replays` replays in all (the
/// first included), their outputs compared.
#[derive(Clone, Debug, Serialize)]
pub struct Confirmation {
    pub replays: u32,
    pub distinct_outputs: u32,
    /// Bytes that vary between the replays, mapped to arguments (`None`:
    /// none, or not compared).
    pub varying: Option<RangeReport>,
    /// Bytes that differ from the recorded output in every replay, alike.
    pub stable: Option<RangeReport>,
    pub stable_digest: Option<String>,
    /// Why the replays could not be compared (a confirmation replay that
    /// failed); the verdict then stays `mismatch`.
    pub incomplete: Option<String>,
    /// What the replays showed, kept with the history row for `check`
    /// (`None`: not compared).
    #[serde(skip)]
    pub profile: Option<crate::verify::profile::Profile>,
}

/// Replays of a differing host recording at other thread counts.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadHint {
    /// The runner's `OMP_NUM_THREADS` of the replay (`None`: unset).
    pub current: Option<String>,
    /// Each count tried and the verdict it gave.
    pub tried: Vec<ThreadTry>,
    /// The first count at which the output verified.
    pub verifies_at: Option<u64>,
}

/// One replay of the thread-count hint.
#[derive(Clone, Debug, Serialize)]
pub struct ThreadTry {
    /// `OMP_NUM_THREADS` it ran with.
    pub threads: u64,
    pub verdict: String,
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
    /// What memory the arena is, where the backend chose it (host).
    pub arena_memory: Option<crate::backend::rehydrate::ArenaMemory>,
    /// GPU backends: the last upload of the input into the device arena
    /// (what `RRSTORE_GPU_STATS` prints; it comes from the GPU runner
    /// process through its protocol). Absent for the host backend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_upload: Option<GpuUpload>,
    pub load_image_ns: u64,
    pub globals_ns: u64,
    /// Per repetition, measured around the call in the runner/device.
    pub kernel_ns: Vec<u64>,
    pub verify_ns: u64,
    pub wall_ns: u64,
}

/// One upload round of the input into a GPU arena.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct GpuUpload {
    pub bytes: u64,
    /// From the first piece to the last copy completing.
    pub elapsed_ns: u64,
    /// How much of it the backend itself was busy (the rest: the engine
    /// producing the data, reading and decompressing from the store).
    pub busy_ns: u64,
}

impl From<crate::backend::gpu::staging::UploadStats> for GpuUpload {
    fn from(u: crate::backend::gpu::staging::UploadStats) -> Self {
        GpuUpload {
            bytes: u.bytes,
            elapsed_ns: u.elapsed.as_nanos() as u64,
            busy_ns: u.busy.as_nanos() as u64,
        }
    }
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
    /// The device's UUID when the backend reported one (GPU backends): the
    /// history's `device_uuid`. Not in `replay --json` (the history has it).
    #[serde(skip)]
    pub device_uuid: String,
    pub runtime_libraries: Vec<String>,
    /// How the runner of this replay confined itself, as it reported it
    /// (None when no runner reported); shown by the CLI beside the
    /// sandbox mode, not serialized here.
    #[serde(skip)]
    pub sandbox: Option<crate::sandbox::Mechanisms>,
    /// blake3 of the image run; `None` when the replay stopped before it.
    #[serde(serialize_with = "hex_opt")]
    pub image_blake3: Option<[u8; 32]>,
    /// How the image run was compiled from IR (`None`: a native image).
    pub compiled: Option<crate::compile::Provenance>,
    pub arena_base: Option<u64>,
    pub arena_size: u64,
    pub args: Vec<u64>,
    pub num_teams: u64,
    pub num_threads: u64,
    pub repetitions: u32,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// What failed, when the verdict is crashed, timed-out or error (its
    /// message in JSON; the error itself for the exit code).
    #[serde(serialize_with = "message_opt")]
    pub error: Option<ReplayError>,
    pub mismatch: Option<RangeReport>,
    pub tolerance: Option<ToleranceReport>,
    /// When the output differed and was confirmed (`--confirm N`): what
    /// the replays produced (`distinct_outputs` 1: a deterministic
    /// mismatch), the varying and the stable ranges.
    pub confirmation: Option<Confirmation>,
    /// Host recordings without a stored launch environment: whether the
    /// output verifies at another `OMP_NUM_THREADS`.
    pub thread_hint: Option<ThreadHint>,
    /// Where the output of a differing replay was kept for the
    /// confirmation (the `--save-output` file, or a scratch file the
    /// confirmation removes).
    #[serde(skip)]
    pub differing_output: Option<(PathBuf, bool)>,
    /// blake3 of the arena after the (last) launch.
    #[serde(serialize_with = "hex_opt")]
    pub output_blake3: Option<[u8; 32]>,
    pub saved_output: Option<PathBuf>,
    /// The form `saved_output` was written in when the arena was
    /// relocated: `recorded` (translated back) or `relocated`; `None`
    /// otherwise (the two are the same bytes).
    pub saved_output_form: Option<&'static str>,
    /// Where the arena was placed (`None` when the replay stopped before).
    pub placement: Option<PlacementReport>,
    /// The launch environment stored with the recording that the host
    /// runner was given ([`rrstore_format::environment`]; empty on other
    /// backends and for recordings without one), under what the options
    /// override. Printed by the CLI and used by the history row; not in
    /// `--json`.
    #[serde(skip)]
    pub recorded_environment: Vec<(String, String)>,
    /// Unix seconds.
    pub started_at: i64,
    pub timing: Timing,
    /// What the replay's runners printed (kernel stdout and stderr), for
    /// the command to show apart from its own lines; not in the JSON
    /// report (the CLI adds it as `kernel_output`).
    #[serde(skip)]
    pub runner_output: crate::sandbox::output::RunnerOutput,
}

fn hex_opt<S: Serializer>(h: &Option<[u8; 32]>, s: S) -> Result<S::Ok, S::Error> {
    match h {
        Some(h) => s.serialize_some(&rrstore_format::id::hex(h)),
        None => s.serialize_none(),
    }
}

fn message_opt<S: Serializer>(e: &Option<ReplayError>, s: S) -> Result<S::Ok, S::Error> {
    match e {
        Some(e) => s.serialize_some(&e.to_string()),
        None => s.serialize_none(),
    }
}
