//! The spare runner: one host runner started before the recording is
//! known (`rrstore replay` starts it first thing), kept process-wide for
//! the next [`HostBackend`] with an equal [`HostConfig`].

use super::process::RunnerProcess;
use super::HostConfig;
#[allow(unused_imports)] // doc links
use super::{preload, HostBackend};

/// A runner started by [`prestart`] before the recording was known.
pub(super) struct Spare {
    config: HostConfig,
    pub(super) live: RunnerProcess,
}

static SPARE: std::sync::Mutex<Option<Spare>> = std::sync::Mutex::new(None);

/// Start a runner for `config` now, before the recording is opened; the
/// next [`HostBackend`] with an equal config reserves its arena in it. It
/// is executed (never forked: `process` says why) with `config.preload`'s
/// libraries named (`--preload`), which it starts loading at once, so that
/// its start-up and that load overlap opening the store and reading the
/// manifest and the image (the checks that keep the arena's guarantees:
/// [`preload`]). Failures are silent: `reserve` then starts a runner as
/// usual. An unused spare dies with this process, or is replaced by the
/// next `prestart` with another config (one with the same config keeps
/// it).
pub fn prestart(config: &HostConfig) {
    if SPARE
        .lock()
        .is_ok_and(|g| g.as_ref().is_some_and(|s| &s.config == config))
    {
        return;
    }
    let mut runner = config.runner.clone();
    for lib in config.preload.libraries() {
        runner.args.push("--preload".into());
        runner.args.push(lib.into());
    }
    let Ok(live) = RunnerProcess::start(&runner, &config.env) else {
        return;
    };
    let spare = Spare {
        config: config.clone(),
        live,
    };
    let old = match SPARE.lock() {
        Ok(mut g) => g.replace(spare),
        Err(_) => Some(spare),
    };
    if let Some(old) = old {
        old.live.end();
    }
}
/// End the spare runner, if any: the replay runs on another backend.
pub fn end_spare() {
    let spare = SPARE.lock().ok().and_then(|mut g| g.take());
    if let Some(spare) = spare {
        spare.live.end();
    }
}

/// The spare runner, if one was started for `config`.
pub(super) fn take_spare(config: &HostConfig) -> Option<Spare> {
    let mut g = SPARE.lock().ok()?;
    if g.as_ref().is_some_and(|s| &s.config == config) {
        g.take()
    } else {
        None
    }
}
