//! The backend interface every device implements, and backend selection.
//!
//! A replay drives a backend through these steps, in order:
//! `reserve` the arena at the recorded address, `load_image` (after the
//! reservation, so nothing the image maps can take the range; a backend may
//! finish loading asynchronously and report load errors from the next call),
//! `upload` the input snapshot (streamed, in pieces, at increasing offsets,
//! decoded straight into [`Backend::staging_window`]s when the backend has
//! them), `write_global` for each recorded
//! global, `launch` (possibly several times, re-uploading the input and the
//! globals in between), `download` the arena, and finally drop the backend,
//! which releases everything in reverse order.

pub mod host;

use std::time::Duration;

use rrstore_format::extents::PartExtents;

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
/// ([`gpu_child`]) sends them to the parent as they are.
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
    #[error("image target {image} does not match the device target {device}; replay it on a backend for {image} (--backend auto picks it)")]
    TargetMismatch { image: String, device: String },
    #[error("the image needs {library}, which is not installed: {hint}")]
    MissingLibrary { library: String, hint: String },
    #[error("{op} failed: {reason}")]
    Driver { op: String, reason: String },
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
}

/// One device a backend can replay on.
pub trait Backend {
    /// `host`, `cuda` or `hip`.
    fn name(&self) -> &'static str;
    /// One-line description of the device (name, target, driver/runtime
    /// versions), stored in the replay history.
    fn device_description(&self) -> String;
    /// The image the replay will load, before [`reserve`](Self::reserve):
    /// a backend may prepare for it (the host backend uses a spare runner
    /// that preloaded the offload runtime only for an image that needs that
    /// runtime). Errors in the image are [`load_image`](Self::load_image)'s
    /// to report. Default: nothing.
    fn expect_image(&mut self, image: &[u8]) {
        let _ = image;
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

    /// The blake3 of the whole arena, computed where the arena lives (the
    /// host runner hashes its memory in place, on all cores), after the
    /// launches. `None` when the backend cannot: the engine then hashes the
    /// bytes it downloads. Default: `None`.
    fn arena_hash(&mut self) -> Result<Option<[u8; 32]>, BackendError> {
        Ok(None)
    }

    /// Whether the backend fills an arena of `len` bytes from the files
    /// that hold the input itself ([`start_fill`](Self::start_fill)) rather
    /// than being handed its bytes. Default: false.
    fn fills_from_files(&self, len: u64) -> bool {
        let _ = len;
        false
    }

    /// Start filling the arena with the input snapshot from the files that
    /// hold it (`extents`, decoded and verified by the backend itself);
    /// only called where [`fills_from_files`](Self::fills_from_files) said
    /// so. The outcome comes from [`finish_fill`](Self::finish_fill).
    fn start_fill(&mut self, extents: &PartExtents) -> Result<(), BackendError> {
        Err(BackendError::Driver {
            op: "start_fill".into(),
            reason: format!(
                "the {} backend does not fill from files ({} bytes)",
                self.name(),
                extents.len()
            ),
        })
    }

    /// Wait for the fill [`start_fill`](Self::start_fill) began: how long
    /// it took, or why it failed (a file gone, moved or corrupt; the engine
    /// then hands the bytes over, which locates the problem). The outer
    /// error is the backend itself failing.
    fn finish_fill(&mut self) -> Result<Result<Duration, String>, BackendError> {
        Ok(Err(format!(
            "the {} backend does not fill from files",
            self.name()
        )))
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
        Err(BackendError::Driver {
            op: "commit_staging".into(),
            reason: format!(
                "the {} backend has no staging windows ({len} bytes at offset {offset})",
                self.name()
            ),
        })
    }

    /// Runtime libraries the loaded image actually uses (paths, versions),
    /// recorded in the replay history. Default: none known.
    fn runtime_libraries(&self) -> Vec<String> {
        Vec::new()
    }

    // ---- Relocation (issue 19, `crate::placement`) ----

    /// Rebase the stored pointers with `rebaser` in the fills that follow
    /// ([`start_fill`](Self::start_fill)); `false` when the backend
    /// cannot, and the engine then hands the bytes over, scanned. Default:
    /// `false`.
    fn scan_fills(&mut self, rebaser: Option<crate::placement::Rebaser>) -> bool {
        let _ = rebaser;
        false
    }

    /// Whether the next [`reserve`](Self::reserve) may place the arena
    /// elsewhere than asked when the device will not give that address (a
    /// GPU driver that ignores the hint): `--placement auto` and
    /// `relocate` allow it, `recorded` does not. Default: ignored (the
    /// backend reserves exactly or fails).
    fn allow_elsewhere(&mut self, allow: bool) {
        let _ = allow;
    }

    /// Where the last successful [`reserve`](Self::reserve) put the
    /// arena's base, when the backend placed it elsewhere than asked
    /// (only after [`allow_elsewhere`](Self::allow_elsewhere)). Default:
    /// `None` (exactly where asked).
    fn placed_elsewhere(&self) -> Option<u64> {
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

pub mod args;
pub mod cuda;
pub mod device_env;
pub mod devices;
pub mod gpu_child;
pub mod hip;
pub mod placeholder;
pub mod reservation;
pub mod staging;
pub mod target;
pub mod wait;
