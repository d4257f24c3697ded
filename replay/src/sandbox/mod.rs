//! The confined runner: what a replayed image may do on this machine.
//!
//! A recording's image is code somebody else built. The process that runs
//! it (the host runner, and the child that drives CUDA/HIP) confines itself
//! before that code runs (see `docs/security.md` for the threat model):
//! * [`fs`]: Landlock: read-only access to the runtime libraries, the
//!   pack files it fills the arena from and a few device files; writes only
//!   to a private scratch directory; no TCP, no signals outside itself;
//! * [`syscalls`]: seccomp: no new sockets, processes or programs, no
//!   `ptrace`, no signals to other processes, no limits, priorities or
//!   CPUs set for them, no device nodes, none of the calls only a
//!   capability allows; denied calls fail with EPERM (`clone3` with
//!   ENOSYS, so glibc falls back to `clone`, whose flags the filter can
//!   check) so the runtime degrades instead of dying;
//! * [`caps`]: no capabilities, and none to be had again by an `execve`
//!   (bounding set empty, securebits locked), however rrstore was run;
//! * `no_new_privs`, core dumps off, its own process group killed with it,
//!   and a scrubbed environment ([`env`]).
//!
//! What a kernel lacks is skipped under [`Mode::Auto`] and reported
//! ([`Mechanisms`] in the replay report and `rrstore devices`);
//! [`Mode::Strict`] refuses to replay without all of it ([`require`]).
//! The runner's standard streams go to a buffer the parent shows after the
//! runner ended ([`output`]), so a recording cannot print rrstore's lines.

pub mod caps;
pub mod env;
pub mod fs;
pub mod output;
pub mod syscalls;

use std::ffi::OsString;

/// How much confinement a replay asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Everything this kernel supports (the default).
    #[default]
    Auto,
    /// All of it, or no replay.
    Strict,
    /// None (debugging): the image runs with the user's rights.
    Off,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Strict => "strict",
            Mode::Off => "off",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "auto" => Some(Mode::Auto),
            "strict" => Some(Mode::Strict),
            "off" => Some(Mode::Off),
            _ => None,
        }
    }
}

/// The confinement mechanisms, as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mechanisms(pub u64);

impl Mechanisms {
    pub const LANDLOCK: u64 = 1;
    pub const SECCOMP: u64 = 2;
    pub const NO_NEW_PRIVS: u64 = 4;
    pub const ENV: u64 = 8;
    pub const NO_CORE: u64 = 16;
    pub const PROCESS_GROUP: u64 = 32;
    /// No capability held or to be regained ([`caps`]).
    pub const NO_CAPS: u64 = 64;
    /// Everything [`Mode::Strict`] requires.
    pub const ALL: u64 = 127;

    const NAMES: [(u64, &'static str); 7] = [
        (Self::LANDLOCK, "landlock"),
        (Self::SECCOMP, "seccomp"),
        (Self::NO_NEW_PRIVS, "no_new_privs"),
        (Self::ENV, "env"),
        (Self::NO_CORE, "no_core"),
        (Self::PROCESS_GROUP, "process_group"),
        (Self::NO_CAPS, "no_capabilities"),
    ];

    pub fn has(self, m: u64) -> bool {
        self.0 & m == m
    }

    /// The names of the mechanisms in the set, in a fixed order.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(m, _)| self.0 & m != 0)
            .map(|&(_, n)| n)
            .collect()
    }

    /// The names of those of `ALL` missing from the set.
    pub fn missing(self) -> Vec<&'static str> {
        Mechanisms(Self::ALL & !self.0).names()
    }
}

/// What this kernel offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The Landlock ABI version, 0 when there is none (not built in, or
    /// not enabled at boot).
    pub landlock_abi: i64,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
}

impl Probe {
    /// Ask the kernel (two system calls that change nothing).
    pub fn current() -> Probe {
        Probe {
            landlock_abi: fs::abi(),
            seccomp: syscalls::available(),
        }
    }

    /// What a runner of this process applies under `mode`.
    pub fn mechanisms(self, mode: Mode) -> Mechanisms {
        if mode == Mode::Off {
            return Mechanisms(0);
        }
        let mut m = Mechanisms::NO_NEW_PRIVS
            | Mechanisms::NO_CAPS
            | Mechanisms::ENV
            | Mechanisms::NO_CORE
            | Mechanisms::PROCESS_GROUP;
        if self.landlock_abi >= fs::MIN_ABI {
            m |= Mechanisms::LANDLOCK;
        }
        if self.seccomp {
            m |= Mechanisms::SECCOMP;
        }
        Mechanisms(m)
    }

    /// One line for `rrstore devices`.
    pub fn describe(self) -> String {
        let landlock = match self.landlock_abi {
            0 => "Landlock unavailable (kernel without it, or not enabled at boot)".to_string(),
            v if v < fs::MIN_ABI => {
                format!("Landlock ABI {v} (too old: {} needed)", fs::MIN_ABI)
            }
            v => format!("Landlock ABI {v}"),
        };
        let seccomp = if self.seccomp {
            "seccomp filters"
        } else {
            "no seccomp filters"
        };
        // Dropping capabilities needs nothing of the kernel.
        format!("{landlock}, {seccomp}, capabilities dropped")
    }
}

/// Why a replay cannot run as confined as it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("full confinement is not available on this machine: {missing} missing ({probe})")]
    Incomplete { missing: String, probe: String },
}

/// Check that runners started now can be confined as `mode` asks: under
/// [`Mode::Strict`], by every mechanism.
pub fn require(mode: Mode) -> Result<(), SandboxError> {
    if mode != Mode::Strict {
        return Ok(());
    }
    let probe = Probe::current();
    let m = probe.mechanisms(mode);
    if m.has(Mechanisms::ALL) {
        return Ok(());
    }
    Err(SandboxError::Incomplete {
        missing: m.missing().join(", "),
        probe: probe.describe(),
    })
}

/// What a runner started under `mode` applied, from its report: the
/// mechanisms it said it applied, intersected with those this process
/// expected of it (a runner's reply is written after the image's
/// constructors ran, so it may only narrow the set). Each backend keeps
/// the result for its replay's report ([`crate::backend::Reporting::sandbox_applied`]).
pub fn narrowed(mode: Mode, reported: u64) -> Mechanisms {
    Mechanisms(reported & Probe::current().mechanisms(mode).0)
}

/// What a runner about to start gets: its output capture, its scratch
/// directory (none under [`Mode::Off`]) and its environment, under the
/// mode its replay's configuration asks for.
pub struct RunnerStart {
    pub output: output::Capture,
    /// Where the runner makes its scratch directory ([`env::scratch_for`]).
    pub scratch_base: Option<std::path::PathBuf>,
    pub env: Vec<(OsString, OsString)>,
}

impl RunnerStart {
    /// For a runner whose replay sets `extra` in its environment; the
    /// sandbox mode is `extra`'s ([`env::mode_setting`], put there by the
    /// backend configuration), [`Mode::Auto`] when it names none. Nothing
    /// process-wide: two replays of one process may run under two modes.
    pub fn new(extra: &[(OsString, OsString)]) -> std::io::Result<RunnerStart> {
        let mode = env::mode_in(extra);
        let scratch_base = (mode != Mode::Off).then(env::scratch_base);
        let env = env::runner_env(mode, extra, scratch_base.as_deref());
        Ok(RunnerStart {
            output: output::Capture::new()?,
            scratch_base,
            env,
        })
    }
}

/// What a runner about to run foreign code is allowed, beyond the defaults.
#[derive(Default)]
pub struct Allow<'a> {
    /// Files it may read (the pack files it fills the arena from).
    pub read_files: &'a [std::path::PathBuf],
    /// GPU device nodes, driver files and `/sys`.
    pub gpu: bool,
}

/// The confinement of a runner, made ready before it is needed: the
/// scratch directory, the Landlock ruleset's fixed rules and the compiled
/// seccomp filters take most of its cost (making a directory alone can
/// take half a millisecond on a busy disk), which a host runner pays while
/// its preload thread loads the offload runtime (on `Reserve`), not when it
/// loads the image. Applied by [`Prepared::apply`].
pub struct Prepared {
    mode: Mode,
    scratch: Option<std::path::PathBuf>,
    ruleset: Result<Option<landlock::RulesetCreated>, String>,
    filters: Result<syscalls::Filters, String>,
    gpu: bool,
}

impl Prepared {
    /// Prepare, under the mode this runner was started with
    /// ([`env::mode_here`]: its environment, set by [`RunnerStart`]);
    /// nothing under [`Mode::Off`]. Safe on any thread: it reads the
    /// environment but does not change it.
    pub fn new(gpu: bool) -> Option<Prepared> {
        let mode = env::mode_here();
        if mode == Mode::Off {
            return None;
        }
        let scratch = env::make_scratch();
        Some(Prepared {
            mode,
            ruleset: fs::prepare(gpu, scratch.as_deref()).map_err(|e| e.to_string()),
            filters: syscalls::prepare().map_err(|e| e.to_string()),
            scratch,
            gpu,
        })
    }

    /// Confine this process as its mode asks, allowing
    /// also `read_files`, and return what was applied. Call it with one
    /// thread running (it sets `TMPDIR`; capabilities belong to a thread,
    /// and Landlock before ABI 8 restricts only the calling thread and
    /// those it starts; seccomp covers every thread). Under
    /// [`Mode::Strict`] a mechanism that fails is an error; under
    /// [`Mode::Auto`] it is left out of the result.
    ///
    /// The order matters: `no_new_privs` first (Landlock and seccomp
    /// need it or `CAP_SYS_ADMIN`, which is about to go); the limits
    /// while `CAP_SYS_RESOURCE` may still be needed to set them; then the
    /// capabilities, so that neither Landlock nor seccomp is installed by
    /// a privileged thread (nothing after needs a capability); seccomp
    /// last, as its filter allows nothing the steps before need.
    pub fn apply(self, read_files: &[std::path::PathBuf]) -> Result<Mechanisms, String> {
        let mode = self.mode;
        // Set when the runner started (`env::runner_env`, its own group).
        let mut m = Mechanisms::ENV | Mechanisms::PROCESS_GROUP;
        let mut failed = Vec::new();
        // SAFETY: plain prctl/setrlimit calls on this process.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 {
                m |= Mechanisms::NO_NEW_PRIVS;
            } else {
                failed.push(format!("no_new_privs: {}", std::io::Error::last_os_error()));
            }
            let zero = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::setrlimit(libc::RLIMIT_CORE, &zero) == 0 {
                m |= Mechanisms::NO_CORE;
            } else {
                failed.push(format!("core limit: {}", std::io::Error::last_os_error()));
            }
            // Bounds the output capture (and scratch files) this process fills.
            let fsize = libc::rlimit {
                rlim_cur: output::FILE_MAX,
                rlim_max: output::FILE_MAX,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &fsize);
        }
        match &self.scratch {
            Some(dir) => std::env::set_var("TMPDIR", dir),
            None => failed.push("no scratch directory could be made".into()),
        }
        match caps::drop_all() {
            Ok(()) => m |= Mechanisms::NO_CAPS,
            Err(e) => failed.push(format!("capabilities: {e}")),
        }
        let gpu = self.gpu;
        match self
            .ruleset
            .and_then(|r| fs::enforce(r, gpu, read_files).map_err(|e| e.to_string()))
        {
            Ok(true) => m |= Mechanisms::LANDLOCK,
            Ok(false) => failed.push("landlock: not supported by this kernel".into()),
            Err(e) => failed.push(format!("landlock: {e}")),
        }
        match self
            .filters
            .and_then(|f| syscalls::enforce(&f).map_err(|e| e.to_string()))
        {
            Ok(()) => m |= Mechanisms::SECCOMP,
            Err(e) => failed.push(format!("seccomp: {e}")),
        }
        if mode == Mode::Strict && !failed.is_empty() {
            return Err(format!(
                "the runner could not confine itself: {}",
                failed.join("; ")
            ));
        }
        Ok(Mechanisms(m))
    }
}

/// Prepare and apply at once (see [`Prepared`]).
pub fn confine(allow: &Allow) -> Result<Mechanisms, String> {
    match Prepared::new(allow.gpu) {
        Some(p) => p.apply(allow.read_files),
        None => Ok(Mechanisms(0)),
    }
}

/// Confine the child that drives a GPU (CUDA/HIP) before it loads the
/// driver: the host runner's policy plus read access to the driver's
/// files and the device nodes. A failure under [`Mode::Strict`] ends the
/// child (its parent reports it as a dead runner, with this message on
/// the child's stderr). The mode is the child's environment's
/// ([`env::mode_here`]). Returns what it applied, which the child reports
/// to its parent ([`narrowed`]) for the replay's report.
pub fn confine_gpu_child() -> Mechanisms {
    match confine(&Allow {
        gpu: true,
        ..Allow::default()
    }) {
        Ok(applied) => applied,
        Err(why) => {
            eprintln!("rrstore GPU runner: {why}");
            // SAFETY: ends this forked child without running the parent's
            // exit handlers.
            unsafe { libc::_exit(3) }
        }
    }
}
