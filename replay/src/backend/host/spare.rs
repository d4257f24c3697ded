//! The spare runner: one host runner started before the recording is
//! known (`rrstore replay` starts it first thing), kept process-wide for
//! the next [`HostBackend`] with an equal [`HostConfig`].

use super::process::{self, RunnerProcess};
#[allow(unused_imports)] // doc links
use super::{preload, HostBackend};
use super::{runner, HostConfig};

/// A runner started by [`prestart`] before the recording was known.
pub(super) struct Spare {
    config: HostConfig,
    pub(super) live: RunnerProcess,
    /// Forked from this process (else executed).
    pub(super) forked: bool,
}

static SPARE: std::sync::Mutex<Option<Spare>> = std::sync::Mutex::new(None);

/// Start a runner for `config` now, before the recording is opened; the
/// next [`HostBackend`] with an equal config reserves its arena in it. In a
/// single-threaded process it is forked (see [`process`]: cheap, and the
/// process is still small) and starts loading `config.preload` at once, so
/// that load overlaps opening the store and reading the manifest and the
/// image (the checks that keep the arena's guarantees: [`preload`]);
/// otherwise it is executed, loads nothing before its arena is mapped, and
/// its start-up is what overlaps. Failures are silent: `reserve` then
/// starts a runner as usual. An unused spare dies with this process, or is
/// replaced by the next `prestart` with another config (one with the same
/// config keeps it).
pub fn prestart(config: &HostConfig) {
    if SPARE
        .lock()
        .is_ok_and(|g| g.as_ref().is_some_and(|s| &s.config == config))
    {
        return;
    }
    let forked = process::single_threaded();
    let live = if forked {
        RunnerProcess::fork(&config.env, |sock| {
            runner::serve_unreserved(sock, &config.preload)
        })
    } else {
        RunnerProcess::start(&config.runner, &config.env)
    };
    let Ok(live) = live else {
        return;
    };
    let spare = Spare {
        config: config.clone(),
        live,
        forked,
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
