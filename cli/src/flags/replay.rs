//! The replay settings, one flag group for every command that replays
//! (replay, check, bisect, diff): how the output is compared
//! ([`CompareFlags`]: `--tolerance`, `--dtype`, `--rtol`, `--atol`,
//! `--max-ulp`) and where and how the replay runs ([`RunFlags`]:
//! `--timeout`, `--sandbox`, `--device`, `--placement`, `--relocate-to`,
//! `--confirm`, and how IR images are compiled: [`super::compile`]).
//! [`replay_options`] turns them, the configuration file's defaults
//! ([`Configured`]) and the `RRSTORE_*` settings of the environment
//! ([`super::env`]) into
//! one [`ReplayOptions`]; each command then sets what only it has.

use rrstore_replay::backend::host::held::HeldArenas;
use rrstore_replay::backend::host::HostSettings;
use rrstore_replay::verify::tolerance::{DType, Tolerance};
use rrstore_replay::{BackendConfig, ReplayOptions, VerifyMode};

use crate::commands::confine::{ConfineArgs, SandboxArg, Timeout};
use crate::commands::fleet::DeviceArgs;
use crate::commands::placement::PlacementArgs;
use crate::Globals;

/// What the configuration file sets for replays (read by `config`).
#[derive(Clone, Debug, Default)]
pub struct Configured {
    /// `timeout`: the default `--timeout`, seconds.
    pub timeout: Option<f64>,
    /// `sandbox`: the default `--sandbox`.
    pub sandbox: Option<SandboxArg>,
    /// `arena_cache`, in bytes (0: off).
    pub arena_cache: u64,
    /// `toolchain`: the default `--toolchain` for IR images.
    pub toolchain: Option<String>,
}

/// How a replay's output is compared with the recorded one (replay, check
/// and bisect; diff has its own element statistics).
#[derive(clap::Args, Clone, Debug)]
pub struct CompareFlags {
    /// Compare as floating-point elements within --rtol/--atol (and
    /// --max-ulp) instead of byte for byte; needs --dtype.
    #[arg(long, requires = "dtype")]
    pub tolerance: bool,
    /// Element type for --tolerance.
    #[arg(long, value_enum)]
    pub dtype: Option<DTypeArg>,
    /// Relative tolerance (numpy isclose: |a-e| <= atol + rtol*|e|).
    #[arg(long, default_value_t = 1e-5)]
    pub rtol: f64,
    /// Absolute tolerance.
    #[arg(long, default_value_t = 1e-8)]
    pub atol: f64,
    /// Also require at most this many units in the last place.
    #[arg(long)]
    pub max_ulp: Option<u64>,
}

/// `--dtype`: the element type of a floating-point comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DTypeArg {
    F32,
    F64,
}

impl DTypeArg {
    pub fn dtype(self) -> DType {
        match self {
            DTypeArg::F32 => DType::F32,
            DTypeArg::F64 => DType::F64,
        }
    }
}

impl CompareFlags {
    /// The tolerance comparison, when `--tolerance` is given.
    pub fn tolerance(&self) -> Option<Tolerance> {
        self.tolerance.then(|| Tolerance {
            dtype: self.dtype.map_or(DType::F32, DTypeArg::dtype),
            rtol: self.rtol,
            atol: self.atol,
            max_ulp: self.max_ulp,
        })
    }
}

/// Where and how a replay runs: its time limit and sandbox, its device and
/// the arena's placement.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RunFlags {
    #[command(flatten)]
    pub confine: ConfineArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub placement: PlacementArgs,
    #[command(flatten)]
    pub compile: super::compile::CompileFlags,
    /// When the output differs from the recorded one, replay N more times
    /// and compare: outputs that vary between the replays make the verdict
    /// `nondeterministic` (default 2; 0: no confirmation, no thread-count
    /// hint).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub confirm: Option<u32>,
}

/// All the replay settings of replay, check and bisect.
#[derive(clap::Args, Clone, Debug)]
pub struct ReplayFlags {
    #[command(flatten)]
    pub compare: CompareFlags,
    #[command(flatten)]
    pub run: RunFlags,
}

impl ReplayFlags {
    /// The replay options these flags, the configuration and the
    /// environment settle ([`replay_options`]).
    pub fn options(&self, globals: &Globals) -> anyhow::Result<ReplayOptions> {
        replay_options(&self.run, Some(&self.compare), globals)
    }
}

impl RunFlags {
    /// The replay options of a command that does not compare (diff).
    pub fn options(&self, globals: &Globals) -> anyhow::Result<ReplayOptions> {
        replay_options(self, None, globals)
    }
}

/// The one place replay settings are assembled: the flags, the
/// configuration file's defaults for those not given (`timeout`,
/// `sandbox`, `arena_cache`) and the environment's `RRSTORE_HOST_PRELOAD`,
/// `RRSTORE_ARENA_CACHE_DIR`, `RRSTORE_NO_POINTER_REBASE` and
/// `RRSTORE_DEBUG_OCCUPY`.
/// Verification is on with a tolerance, else automatic (a command with
/// `--verify`/`--no-verify` sets its own).
pub fn replay_options(
    run: &RunFlags,
    compare: Option<&CompareFlags>,
    globals: &Globals,
) -> anyhow::Result<ReplayOptions> {
    let configured = &globals.replay;
    let mut confine = run.confine.clone();
    if confine.timeout.is_none() {
        confine.timeout = configured.timeout.map(Timeout::Secs);
    }
    if confine.sandbox.is_none() {
        confine.sandbox = configured.sandbox;
    }
    let confinement = confine.apply()?;
    let tolerance = compare.and_then(CompareFlags::tolerance);
    let mut opts = ReplayOptions {
        verify: if tolerance.is_some() {
            VerifyMode::On
        } else {
            VerifyMode::Auto
        },
        tolerance,
        timeout: confinement.timeout,
        backends: BackendConfig {
            host: HostSettings {
                preload: super::env::preload(),
                arena_cache: arena_cache_setting(configured.arena_cache),
                ..HostSettings::default()
            },
            sandbox: confinement.sandbox,
        },
        device: run.device.ordinal()?,
        pointer_scan: super::env::pointer_scan(),
        occupy: super::env::occupy(),
        compile: rrstore_replay::compile::CompileOptions {
            // The compiler runs under the kernel's time limit.
            timeout: confinement.timeout,
            ..run.compile.options(
                configured.toolchain.as_deref(),
                globals.store.as_deref(),
                globals.store_settings.dir.as_deref(),
                confinement.sandbox == rrstore_replay::sandbox::Mode::Off,
            )?
        },
        confirm: run.confirm.unwrap_or(rrstore_replay::DEFAULT_CONFIRM),
        ..ReplayOptions::default()
    };
    run.placement.apply(&mut opts)?;
    Ok(opts)
}

/// The arena cache of at most `limit` bytes (the configuration's
/// `arena_cache`), in `RRSTORE_ARENA_CACHE_DIR`, else its default directory.
pub fn arena_cache_setting(limit: u64) -> HeldArenas {
    HeldArenas {
        limit,
        dir: super::env::arena_cache_dir(),
    }
}
