//! The spare runner: one host runner started before the recording is
//! known (`rrstore replay` starts it first thing), kept process-wide for
//! the next [`HostBackend`] with an equal [`HostConfig`], or one that only
//! adds the recording's launch environment ([`take_spare`]).

use std::ffi::OsString;

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

/// The spare runner, if one was started for `config`, or for `config`
/// without the recording's launch environment: then also the settings the
/// runner is to set before the image loads (the `Reserve` request carries
/// them). `rrstore replay` starts the spare before the recording, so before
/// its stored environment (`HostSettings::recorded_env`), is known; the
/// recorded variables come first in a backend's environment, under the
/// spare's own (the user's `env`, the launch overrides, the sandbox mode),
/// so only those the spare's do not set are passed.
pub(super) fn take_spare(config: &HostConfig) -> Option<(Spare, Vec<(OsString, OsString)>)> {
    let mut g = SPARE.lock().ok()?;
    let extra = fits(g.as_ref()?, config)?;
    Some((g.take()?, extra))
}

/// Whether `spare` serves `config`: `Some` of the settings to add (none
/// when the configurations are equal).
fn fits(spare: &Spare, config: &HostConfig) -> Option<Vec<(OsString, OsString)>> {
    let own = &spare.config.env;
    let same_but_env = HostConfig {
        env: own.clone(),
        ..config.clone()
    } == spare.config;
    if !same_but_env || !config.env.ends_with(own) {
        return None;
    }
    let added = &config.env[..config.env.len() - own.len()];
    let launch = |k: &OsString| {
        k.to_str()
            .is_some_and(rrstore_format::environment::is_launch_setting)
    };
    if !added.iter().all(|(k, _)| launch(k)) {
        return None;
    }
    Some(
        added
            .iter()
            .filter(|(k, _)| !own.iter().any(|(o, _)| o == k))
            .cloned()
            .collect(),
    )
}

/// Whether a spare runner is waiting to be used (one [`prestart`] started
/// that no backend took yet).
pub fn spare_waiting() -> bool {
    SPARE.lock().is_ok_and(|g| g.is_some())
}
