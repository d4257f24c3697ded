//! The runner's environment and scratch directory.
//!
//! A runner keeps only the variables the OpenMP runtime and the GPU
//! drivers read (by prefix, [`KEEP_PREFIXES`]), never one whose name says
//! it holds a secret, and gets `TMPDIR` pointing at a scratch directory of
//! its own, the one place it may write ([`make_scratch`]: made by the
//! runner as it confines itself, removed by the parent with the runner).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::Mode;

/// Tells an executed runner (`rrstore __host-runner`) the sandbox mode.
pub const MODE_ENV: &str = "RRSTORE_SANDBOX";
/// The runner's scratch directory (also its `TMPDIR`).
pub const SCRATCH_ENV: &str = "RRSTORE_SCRATCH";

/// The `RRSTORE_*` variables a runner is passed by its parent and reads
/// itself: the internal protocol between `rrstore` and its own runner
/// processes (docs/architecture.md), the only `RRSTORE_*` variables the
/// library crates read. The user's settings reach the library as options
/// (`cli/src/flags/env.rs`); these are set (or passed on) by the parent.
pub const FROM_PARENT: &[&str] = &[
    MODE_ENV,
    SCRATCH_ENV,
    crate::placement::occupy::OCCUPY_ENV,
    crate::backend::host::fill_trace::TRACE_ENV,
    crate::backend::host::libraries::SEARCH_ENV,
];

/// Variables a runner keeps, by name prefix (or whole name).
const KEEP_PREFIXES: &[&str] = &[
    "OMP_",
    "KMP_",
    "LIBOMP",
    "LIBOMPTARGET_",
    "LD_LIBRARY_PATH",
    "LANG",
    "LC_",
    "TZ",
    "CUDA_",
    "NVIDIA_",
    "HIP_",
    "HSA_",
    "ROCR_",
    "AMD_",
    "GPU_",
    // Debugging aid of relocation: the runner takes the range away first.
    crate::placement::occupy::OCCUPY_ENV,
    // Debugging aid of rehydration: the runner traces its fills.
    crate::backend::host::fill_trace::TRACE_ENV,
    MODE_ENV,
];

/// Words that mark a variable as a secret even under a kept prefix.
const SECRET_WORDS: &[&str] = &["SECRET", "TOKEN", "PASSWORD", "CREDENTIAL", "KEY", "AUTH"];

/// Whether a runner keeps variable `name`.
pub fn keeps(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    let upper = name.to_ascii_uppercase();
    KEEP_PREFIXES.iter().any(|p| name.starts_with(p))
        && !SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// The environment of a runner started now: this process' kept variables
/// ([`keeps`]), then `extra` (the replay's own settings), then the mode
/// and where to make its scratch directory. Under [`Mode::Off`], this
/// process' whole environment and `extra`.
pub fn runner_env(
    mode: Mode,
    extra: &[(OsString, OsString)],
    scratch_base: Option<&Path>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| k != MODE_ENV && (mode == Mode::Off || keeps(k)))
        .collect();
    // The runtime search this process was given (a test hook) goes on.
    env.extend(crate::backend::host::libraries::search_setting());
    env.extend(extra.iter().filter(|(k, _)| k != MODE_ENV).cloned());
    env.push(mode_setting(mode));
    if let Some(dir) = scratch_base {
        env.push((SCRATCH_ENV.into(), dir.into()));
    }
    env
}

/// Replace this process' environment with `env`. Only for a forked child
/// that runs one thread (nothing else reads the environment meanwhile).
pub fn replace_here(env: &[(OsString, OsString)]) {
    let names: Vec<OsString> = std::env::vars_os().map(|(k, _)| k).collect();
    for k in names {
        std::env::remove_var(k);
    }
    for (k, v) in env {
        std::env::set_var(k, v);
    }
}

/// The entry of a runner's extra environment that asks for `mode`: how a
/// backend's configuration hands the replay's sandbox mode to the runner
/// it starts ([`super::RunnerStart`]) and on to the runner itself.
pub fn mode_setting(mode: Mode) -> (OsString, OsString) {
    (MODE_ENV.into(), mode.as_str().into())
}

/// The mode `extra` asks for (its last [`mode_setting`] entry), else
/// [`Mode::Auto`].
pub fn mode_in(extra: &[(OsString, OsString)]) -> Mode {
    extra
        .iter()
        .rev()
        .find(|(k, _)| k == MODE_ENV)
        .and_then(|(_, v)| Mode::parse(v.to_str()?))
        .unwrap_or_default()
}

/// The mode a runner (executed or forked) was started under (from its
/// environment).
pub fn mode_here() -> Mode {
    std::env::var(MODE_ENV)
        .ok()
        .and_then(|v| Mode::parse(&v))
        .unwrap_or_default()
}

/// Where runners make their scratch directories: this process' temporary
/// directory.
pub fn scratch_base() -> PathBuf {
    std::env::temp_dir()
}

/// The scratch directory of runner `pid` under `base`. Made by the runner
/// when it confines itself (an unused spare runner makes none), removed by
/// the parent when the runner is killed or has ended.
pub fn scratch_for(base: &Path, pid: libc::pid_t) -> PathBuf {
    base.join(format!("rrstore-runner-{pid}"))
}

/// Make this runner's scratch directory (mode 0700; an existing one, made
/// by somebody else, is refused). `None` when there is no base or it
/// cannot be made.
pub fn make_scratch() -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = PathBuf::from(std::env::var_os(SCRATCH_ENV)?);
    // SAFETY: getpid has no preconditions.
    let dir = scratch_for(&base, unsafe { libc::getpid() });
    std::fs::DirBuilder::new().mode(0o700).create(&dir).ok()?;
    Some(dir)
}

/// Remove a runner's scratch directory (not following a link there).
pub fn remove_scratch(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_runtime_settings_and_drops_secrets() {
        for k in [
            "OMP_NUM_THREADS",
            "LIBOMPTARGET_INFO",
            "CUDA_VISIBLE_DEVICES",
            "LC_ALL",
        ] {
            assert!(keeps(OsStr::new(k)), "{k}");
        }
        for k in [
            "AWS_SECRET_ACCESS_KEY",
            "HOME",
            "PATH",
            "SSH_AUTH_SOCK",
            "CUDA_API_TOKEN",
            "OMP_PASSWORD",
        ] {
            assert!(!keeps(OsStr::new(k)), "{k}");
        }
    }
}
