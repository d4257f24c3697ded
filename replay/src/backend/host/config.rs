//! The host backend's settings: what the caller chooses ([`HostSettings`],
//! built from the command line) and what a backend runs with
//! ([`HostConfig`], with the launch overrides applied).

use std::ffi::OsString;

use super::held::HeldArenas;
use super::process::Runner;
use super::{Preload, RUNNER_SUBCOMMAND};
use crate::backend::open::LaunchOverrides;
use crate::backend::BackendError;

impl Runner {
    /// This executable with the hidden `__host-runner` subcommand: what the
    /// `rrstore` binary uses (its `main` dispatches to [`runner_main`]).
    pub fn current_exe() -> Result<Runner, BackendError> {
        let program = std::env::current_exe().map_err(|e| {
            BackendError::Unavailable(format!(
                "the host backend re-executes rrstore but its path is unknown: {e}"
            ))
        })?;
        Ok(Runner {
            program,
            args: vec![RUNNER_SUBCOMMAND.into()],
        })
    }
}

/// How the input gets into the runner's arena, and the arena back out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ArenaIo {
    /// The runner reads the input from its files when the source has them
    /// (a store, an archive, an LLVM recording: one copy, see [`fill`]),
    /// before it loads the image; otherwise the parent writes it with
    /// `process_vm_writev`, or into a shared arena where a sandbox forbids
    /// that (probed once per runner). Read-back: `process_vm_readv` from
    /// the stopped runner, or the shared arena.
    #[default]
    Auto,
    /// The parent always writes the input (decoded into the staging window,
    /// then `process_vm_writev`, or a shared arena where forbidden).
    Copy,
    /// The arena is a sealed memfd both processes map
    /// ([`super::ArenaMemory::Shared`]): the parent writes and reads its own
    /// mapping. What a sandbox that forbids `process_vm_*` gets.
    Shared,
}

/// Host backend settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    pub runner: Runner,
    /// Extra environment for the runner (launch-configuration overrides).
    pub env: Vec<(OsString, OsString)>,
    pub arena_io: ArenaIo,
    /// What a spare runner ([`prestart`]) loads before its arena is known.
    pub preload: Preload,
    /// Where arenas may keep their memory between replays ([`super::held`]).
    pub arena_cache: HeldArenas,
}
/// What the caller chooses for the host backend; [`HostSettings::config`]
/// adds the launch overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostSettings {
    /// How to start the runner (default: this executable, [`Runner::current_exe`]).
    pub runner: Option<Runner>,
    /// Extra environment for the runner.
    pub env: Vec<(OsString, OsString)>,
    /// The recording's launch environment ([`launch_env`]), set by the
    /// engine per recording: applied over this process' `OMP_*` and under
    /// [`env`](Self::env) and the launch overrides.
    pub recorded_env: Vec<(OsString, OsString)>,
    pub arena_io: ArenaIo,
    /// What the spare runner loads before the recording is known
    /// ([`super::preload`]).
    pub preload: Preload,
    /// The arena cache (default: off).
    pub arena_cache: HeldArenas,
}

/// The variables of a recording's launch environment a runner is given:
/// only launch settings ([`rrstore_format::environment::is_launch_setting`]:
/// a stored environment is user input, and validation already refused
/// anything else).
pub fn launch_env(env: &[(String, String)]) -> Vec<(OsString, OsString)> {
    env.iter()
        .filter(|(k, v)| {
            rrstore_format::environment::is_launch_setting(k)
                && rrstore_format::environment::valid_value(v)
        })
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
}

impl HostSettings {
    /// The configuration a backend runs with: the launch-configuration
    /// overrides become `OMP_NUM_TEAMS` / `OMP_NUM_THREADS` /
    /// `OMP_TEAMS_THREAD_LIMIT` in the runner's environment (a host kernel
    /// takes its team and thread counts from the OpenMP runtime).
    pub fn config(&self, launch: &LaunchOverrides) -> Result<HostConfig, BackendError> {
        let runner = match &self.runner {
            Some(r) => r.clone(),
            None => Runner::current_exe()?,
        };
        let mut env = self.recorded_env.clone();
        env.extend(self.env.iter().cloned());
        if let Some(t) = launch.num_teams {
            env.push(("OMP_NUM_TEAMS".into(), t.to_string().into()));
        }
        if let Some(t) = launch.num_threads {
            env.push(("OMP_NUM_THREADS".into(), t.to_string().into()));
            env.push(("OMP_TEAMS_THREAD_LIMIT".into(), t.to_string().into()));
        }
        Ok(HostConfig {
            runner,
            env,
            arena_io: self.arena_io,
            preload: self.preload.clone(),
            arena_cache: self.arena_cache.clone(),
        })
    }
}
