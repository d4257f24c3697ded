//! What a replay can be asked for ([`ReplayOptions`]), and the checks of
//! the options against the recording made before any backend work.

use crate::placement::Placement;
use std::path::PathBuf;
use std::time::Duration;

use rrstore_format::image::ImageTarget;
use rrstore_format::{PartRole, Recording};

use crate::backend::{BackendConfig, BackendError, BackendKind, LaunchOverrides};
use crate::error::ReplayError;
use crate::verify::tolerance::Tolerance;

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
    /// Each backend's own configuration (how the host runner starts, ...).
    pub backends: BackendConfig,
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
    /// Run this image instead of the recorded one (`replay --image`, the
    /// regression commands); checked against the recording first.
    pub image: Option<crate::regress::image::ImageOverride>,
    /// The device ordinal replayed on (`--device`; CUDA/HIP ordinal, 0 is
    /// the host CPU).
    pub device: u32,
    /// Where the arena goes (`--placement`, `--relocate-to`).
    pub placement: Placement,
    pub relocate_to: Option<u64>,
    /// With a relocated arena, `save_output` gets the bytes as the device
    /// left them (pointers at the relocated address) instead of translated
    /// back to the recorded addresses.
    pub save_relocated: bool,
    /// The device lane's lookahead (fleet, issue 21): this replay takes
    /// the input it decoded ahead, and starts preparing the lane's next
    /// recording when its first launch starts. `None`: no lookahead.
    pub lookahead: Option<crate::fleet::lookahead::Lookahead>,
    /// Rebase the pointers stored in a relocated arena (default); off is a
    /// debugging aid (arguments and globals are still rebased; a kernel
    /// that loads pointers from memory then crashes or mismatches).
    pub pointer_scan: bool,
    /// A debugging aid of relocation: map this range (address, length) in
    /// this process before the arena is reserved
    /// ([`crate::placement::occupy`]).
    pub occupy: Option<(u64, u64)>,
    /// How an IR image is compiled before the replay (`--toolchain`,
    /// `--cflags`, `--arch`, `--from-bitcode`; [`crate::compile`]).
    pub compile: crate::compile::CompileOptions,
    /// Replays more when the output differs from the recorded one
    /// (`--confirm N`; 0: none). The CLI's default is
    /// [`super::DEFAULT_CONFIRM`]; the library's is 0.
    pub confirm: u32,
    /// After a confirmed difference on the host, replay at 1 and 2
    /// threads (`OMP_NUM_THREADS`) where that is not the current setting,
    /// and say which count verifies ([`super::ThreadHint`]).
    pub thread_hint: bool,
    /// Where the confirmation keeps the outputs it compares (default: the
    /// system's temporary directory).
    pub scratch_dir: Option<PathBuf>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            backend: BackendKind::Auto,
            backends: BackendConfig::default(),
            verify: VerifyMode::Auto,
            tolerance: None,
            num_teams: None,
            num_threads: None,
            ignore_limits: false,
            repetitions: 1,
            timeout: None,
            save_output: None,
            image: None,
            device: 0,
            placement: Placement::Auto,
            relocate_to: None,
            save_relocated: false,
            lookahead: None,
            pointer_scan: true,
            occupy: None,
            compile: Default::default(),
            confirm: 0,
            thread_hint: false,
            scratch_dir: None,
        }
    }
}

impl ReplayOptions {
    /// The launch-configuration overrides, for the backends.
    pub fn launch(&self) -> LaunchOverrides {
        LaunchOverrides {
            num_teams: self.num_teams,
            num_threads: self.num_threads,
        }
    }

    /// Start the chosen backend's early work before the recording is
    /// opened: see [`BackendConfig::start_early`].
    pub fn start_backend_early(&self) {
        // A debugging aid of relocation: take the recorded range away
        // before any runner exists (documented in docs/replay.md).
        crate::placement::occupy::occupy(self.occupy);
        self.backends.start_early(self.backend, &self.launch());
    }
}

/// What [`preflight`] settled.
pub(crate) struct Plan {
    pub kind: BackendKind,
    pub verify: bool,
    /// The recorded arena base.
    pub base: u64,
}

/// Check what can be checked before any backend work.
pub(crate) fn preflight(
    rec: &Recording,
    opts: &ReplayOptions,
    image: Option<&crate::regress::image::ImageOverride>,
) -> Result<Plan, ReplayError> {
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
    let image_target = image.map_or(&rec.image_target, |o| &o.target);
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
        "team count",
        opts.num_teams,
        rec.launch.teams_limits,
        "TeamsLimits",
        opts,
    )?;
    check_limit(
        "thread count",
        opts.num_threads,
        rec.launch.threads_limits,
        "ThreadsLimits",
        opts,
    )?;
    Ok(Plan { kind, verify, base })
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
