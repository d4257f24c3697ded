//! The backend interface every device implements, and backend selection.
//!
//! A replay opens a backend through [`open::BackendConfig`] (each backend's
//! own configuration) and drives it through these steps, in order:
//! [`place`](Backend::place) the arena (today: `reserve` it at the recorded
//! address), `load_image` (after the placement, so nothing the image maps
//! can take the range; a backend may finish loading asynchronously and
//! report load errors from the next call), `write_global` for each recorded
//! global, [`fill`](Backend::fill) the arena with the input snapshot (the
//! rehydration contract: [`rehydrate`]), `launch` (possibly several times,
//! filling the arena and writing the globals again in between), read the
//! arena back ([`arena_hash`](Backend::arena_hash), `download`), and finally
//! drop the backend, which releases everything in reverse order.

pub mod host;
pub mod kind;
pub mod open;
pub mod rehydrate;

pub use kind::BackendKind;
pub use open::{BackendConfig, LaunchOverrides, OpenRequest};
pub use rehydrate::{
    ArenaRequest, FillError, FillOutcome, InputError, InputSource, Placement, RehydratePath,
};

use std::time::Duration;

/// Launch configuration handed to a backend (recorded values, or the user's
/// overrides).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchParams {
    pub num_teams: u64,
    pub num_threads: u64,
    pub shared_memory: u64,
    pub loop_trip_count: u64,
    /// Kill the launch after this long (`--timeout`) and report
    /// [`BackendError::TimedOut`]; `None` waits forever. Backends that cannot
    /// interrupt a kernel may ignore it.
    pub timeout: Option<Duration>,
}

/// Errors a backend reports. Each says what happened and what to do.
/// Serializable: a GPU backend running in a child process
/// ([`gpu::child`]) sends them to the parent as they are.
#[derive(Debug, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum BackendError {
    #[error("{0}")]
    Unavailable(String),
    #[error("cannot reserve the arena at {base:#x}..{end:#x}: {reason}", end = .base + .size)]
    Reserve {
        base: u64,
        size: u64,
        reason: String,
    },
    #[error("cannot load the image: {0}")]
    Image(String),
    #[error("kernel symbol `{0}` is not exported by the image; the recording's image and descriptor do not belong together")]
    MissingKernel(String),
    #[error("global `{name}` is not exported by the image")]
    MissingGlobal { name: String },
    #[error("global `{name}` has {actual} bytes in the image but {recorded} bytes were recorded")]
    GlobalSize {
        name: String,
        recorded: u64,
        actual: u64,
    },
    /// The CLI hints how to pick the right backend.
    #[error("image target {image} does not match the device target {device}; replay it on a backend for {image}")]
    TargetMismatch { image: String, device: String },
    #[error("the image needs {library}, which is not installed: {hint}")]
    MissingLibrary { library: String, hint: String },
    /// A device or runtime call failed for a reason of its own (the
    /// driver's or the runner's message).
    #[error("{op} failed: {reason}")]
    Driver { op: String, reason: String },
    /// The launch configuration cannot run on this device (a zero or
    /// oversized dimension, more shared memory than a block may have).
    #[error("the kernel cannot be launched as configured: {0}")]
    LaunchConfig(String),
    /// The backend was driven out of order or outside its arena: a bug in
    /// rrstore, not in the recording.
    #[error("internal error in the {backend} backend: {what} (a bug: please report it)")]
    Internal { backend: String, what: String },
    /// The host runner died earlier in this replay (how is in `why`, which
    /// was reported then); nothing more can be run in it.
    #[error("{why}; nothing more can be run in it")]
    RunnerGone { why: String },
    /// A runner's reply (host runner, GPU child) could not be read: it is not the runner of
    /// this rrstore build.
    #[error("the replay runner's reply to {op} is malformed ({reason}); the runner program is not the one of this rrstore build: reinstall rrstore")]
    RunnerReply { op: String, reason: String },
    /// Copying bytes into or out of the arena failed (`op` names the way).
    #[error("{op} of {len} bytes at arena offset {offset} failed: {reason}")]
    ArenaCopy {
        op: String,
        offset: u64,
        len: u64,
        reason: String,
    },
    #[error("the kernel crashed (signal {signal})")]
    Crashed { signal: i32 },
    /// The host runner process ended without a signal before the kernel
    /// returned (the kernel or a library it loaded called `exit`/`_exit`):
    /// for the user the kernel did not complete, like a crash.
    #[error("the kernel ended the replay process ({status}) before it returned: it or a library it loaded called exit; the kernel cannot be replayed as recorded")]
    RunnerExited { status: String },
    /// A GPU kernel failed on the device (memory fault, trap, device-side
    /// assert): the driver's error, as a sentence.
    #[error("the kernel faulted on the device: {0}; the recording's input or image does not match what the kernel expects, or the kernel is faulty")]
    DeviceFault(String),
    #[error("the kernel did not finish within {0:?} and was killed")]
    TimedOut(Duration),
    /// A GPU runner process (or a device listing's child) did not finish
    /// initialising its driver in time ([`gpu::driver_guard::start_timeout`]).
    #[error("the {backend} driver did not finish initialising within {waited:?} in the runner process, which was killed: the driver or the GPU is in a bad state (check nvidia-smi or rocm-smi and the kernel log), or it needs longer (set RRSTORE_GPU_START_TIMEOUT to more seconds)")]
    StartTimedOut { backend: String, waited: Duration },
}

/// One device a backend can replay on: the device calls (and the
/// rehydration contract's staging). What it reports ([`Reporting`]) and how
/// it relocates ([`Relocation`]) are small traits of their own, with
/// defaults.
pub trait Backend: Reporting + Relocation {
    /// `host`, `cuda` or `hip`.
    fn name(&self) -> &'static str;
    /// One-line description of the device (name, target, driver/runtime
    /// versions), stored in the replay history.
    fn device_description(&self) -> String;
    /// Place the arena (the placement step, see [`rehydrate`]): where it
    /// goes, beside the image `request` names. Default: [`reserve`](Self::reserve)
    /// it at the recorded base.
    fn place(&mut self, request: &ArenaRequest<'_>) -> Result<Placement, BackendError> {
        self.reserve(request.base, request.size)?;
        Ok(Placement { base: request.base })
    }
    /// Reserve `size` bytes of device virtual memory at exactly `base`.
    fn reserve(&mut self, base: u64, size: u64) -> Result<(), BackendError>;
    /// Copy `data` into the arena at `offset` bytes from its base.
    fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError>;
    /// Load the image and look up `kernel` in it.
    fn load_image(&mut self, image: &[u8], kernel: &str) -> Result<(), BackendError>;
    /// Overwrite the global `name` with `data` (size checked).
    fn write_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError>;
    /// Launch the kernel with each argument passed as a 64-bit value, wait for
    /// it, and return the kernel time.
    fn launch(&mut self, args: &[u64], params: &LaunchParams) -> Result<Duration, BackendError>;
    /// Copy `dst.len()` bytes from the arena at `offset` into `dst`.
    fn download(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError>;

    // The rehydration contract (see [`rehydrate`]): `fill` chooses how the
    // input travels; the staging-window pair and `upload` are what the
    // default uses; `arena_hash` is the read-back's shortcut.

    /// Told of the input before each [`fill`](Self::fill), as early as it
    /// is known: for the first launch right after the placement and before
    /// `load_image`, for later ones just before the fill. A backend that
    /// fills the arena itself may start here, so that its fill overlaps
    /// the image load (the host runner serves requests in order: its fill
    /// then runs beside the spare's preload, before the image is loaded).
    /// Errors are the backend's own; a fill that cannot start is `fill`'s
    /// to handle. Default: nothing.
    fn begin_fill(&mut self, input: &dyn InputSource) -> Result<(), BackendError> {
        let _ = input;
        Ok(())
    }

    /// Write the input snapshot into the arena, the whole of it, every
    /// call (once per launch). Default: [`rehydrate::copy_in`], through
    /// staging windows when the backend has them, else `upload`. A backend
    /// with a faster way overrides it and falls back to `copy_in`.
    fn fill(&mut self, input: &mut dyn InputSource) -> Result<FillOutcome, FillError> {
        rehydrate::copy_in(self, input)
    }

    /// The blake3 of the whole arena, computed where the arena lives (the
    /// host runner hashes its memory in place, on all cores), after the
    /// launches. `None` when the backend cannot: the engine then hashes the
    /// bytes it downloads. Default: `None`.
    fn arena_hash(&mut self) -> Result<Option<[u8; 32]>, BackendError> {
        Ok(None)
    }

    /// Host memory (a pinned DMA staging buffer, the host backend's buffer
    /// copied into the runner) the engine may decode the
    /// next piece of the input straight into, instead of handing bytes to
    /// `upload`: at most `max_len` bytes, possibly fewer. The engine fills a
    /// prefix and hands it over with [`commit_staging`](Self::commit_staging)
    /// before asking for the next window; backends keep several buffers so
    /// filling window k+1 overlaps the copy of window k. Pieces come at
    /// increasing offsets, like `upload`'s. Default: `None` (use `upload`).
    fn staging_window(&mut self, max_len: usize) -> Result<Option<&mut [u8]>, BackendError> {
        let _ = max_len;
        Ok(None)
    }

    /// Send the first `len` bytes of the window the last
    /// [`staging_window`](Self::staging_window) returned to the arena at
    /// `offset`. The piece that reaches the end of the arena completes the
    /// input (the backend waits for its copies, as `upload` does).
    fn commit_staging(&mut self, offset: u64, len: usize) -> Result<(), BackendError> {
        Err(BackendError::Internal {
            backend: self.name().into(),
            what: format!("it has no staging windows ({len} bytes at offset {offset})"),
        })
    }

    /// The address of the global `name` in the loaded image (the host
    /// runner's copy; a GPU module's global), where a kernel argument or
    /// stored pointer that held the recording process's copy of it is
    /// rebased to ([`crate::placement::globals`]). After
    /// [`load_image`](Self::load_image). Default: `None` (the backend
    /// cannot say: such values are passed as recorded).
    fn global_address(&mut self, name: &str) -> Result<Option<u64>, BackendError> {
        let _ = name;
        Ok(None)
    }

    /// After the last launch, before the arena is read back: each word
    /// `(offset, now, recorded)` that still holds `now` gets `recorded`
    /// back (the global addresses a replay wrote over the input:
    /// [`crate::placement::globals`]); returns how many. Default:
    /// [`download`](Self::download) and [`upload`](Self::upload) each.
    fn restore_words(&mut self, words: &[(u64, u64, u64)]) -> Result<u64, BackendError> {
        let mut n = 0;
        for &(at, now, recorded) in words {
            let mut b = [0u8; 8];
            self.download(at, &mut b)?;
            if u64::from_le_bytes(b) == now {
                self.upload(at, &recorded.to_le_bytes())?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// What a backend reports about itself and its last steps, beyond the
/// device calls: every method has a documented default (nothing to
/// report), which a backend overrides for what it knows.
pub trait Reporting {
    /// The device's UUID (`GPU-...` for CUDA and HIP), read where the
    /// driver is initialized (the GPU child), for the history's
    /// `device_uuid`. Default: `None` (the history then derives it:
    /// [`crate::fleet::devices::uuid_of`]).
    fn device_uuid(&self) -> Option<String> {
        None
    }

    /// Runtime libraries the loaded image actually uses (paths, versions),
    /// recorded in the replay history; asked after the first launch.
    /// Default: none known.
    fn runtime_libraries(&self) -> Vec<String> {
        Vec::new()
    }

    /// The last upload round of the input into a GPU arena (bytes, time,
    /// how long the backend itself was busy), for the report's
    /// `timing.gpu_upload` and `RRSTORE_GPU_STATS`. Default: `None`.
    fn upload_stats(&self) -> Option<gpu::staging::UploadStats> {
        None
    }

    /// How the process that runs the image confined itself, as it reported
    /// it ([`crate::sandbox::narrowed`]); None before it reported, and for
    /// backends that run no such process. Default: None.
    fn sandbox_applied(&self) -> Option<crate::sandbox::Mechanisms> {
        None
    }
}

/// Relocation (issue 19, [`crate::placement`]): a backend that can place
/// the arena elsewhere than recorded, rebase the stored pointers in its
/// fills or translate the arena back in place says so here; every method
/// has a documented default (it cannot: the engine does the work on the
/// bytes it hands over or downloads).
pub trait Relocation {
    /// Rebase the stored pointers with `rebaser` in the fills that follow
    /// ([`fill`](Backend::fill)); `false` when the backend
    /// cannot, and the engine then hands the bytes over, scanned. Default:
    /// `false`.
    fn scan_fills(&mut self, rebaser: Option<crate::placement::Rebaser>) -> bool {
        let _ = rebaser;
        false
    }

    /// Whether the next [`reserve`](Backend::reserve) may place the arena
    /// elsewhere than asked when the device will not give that address (a
    /// GPU driver that ignores the hint): `--placement auto` and
    /// `relocate` allow it, `recorded` does not. Default: ignored (the
    /// backend reserves exactly or fails).
    fn allow_elsewhere(&mut self, allow: bool) {
        let _ = allow;
    }

    /// Where the last successful [`reserve`](Backend::reserve) put the
    /// arena's base, when the backend placed it elsewhere than asked
    /// (only after [`allow_elsewhere`](Self::allow_elsewhere)). Default:
    /// `None` (exactly where asked).
    fn placed_elsewhere(&self) -> Option<u64> {
        None
    }

    /// What memory the reserved arena is, for backends whose arena is host
    /// memory of their choosing. Default: `None`.
    fn arena_memory(&self) -> Option<rehydrate::ArenaMemory> {
        None
    }

    /// Bytes from the arena's base that the replay's memory reaches when
    /// the backend maps zeroed slack after an arena of `size` bytes (the
    /// host backend: [`host::slack::footprint`]), for placement to find
    /// room for and to rebase into. Default: `None` (no slack: the arena
    /// alone).
    fn slack_footprint(&self, size: u64) -> Option<u64> {
        let _ = size;
        None
    }

    /// The zeroed slack mapped after the reserved arena (the host
    /// backend's, [`host::slack`]). Default: `None` (no slack).
    fn arena_slack(&self) -> Option<host::slack::Slack> {
        None
    }

    /// How many stored pointers the last fill rebased. Default: 0.
    fn fill_rebased(&self) -> u64 {
        0
    }

    /// Translate the arena back to the recorded addresses in place, after
    /// the last launch: how many words, or `None` when the backend cannot
    /// (the engine then translates the bytes it downloads, and hashes them
    /// itself). Default: `None`.
    fn back_translate(
        &mut self,
        rebaser: &crate::placement::Rebaser,
    ) -> Result<Option<u64>, BackendError> {
        let _ = rebaser;
        Ok(None)
    }
}

pub mod devices;
pub mod fixed_range;
pub mod gpu;
