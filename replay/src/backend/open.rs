//! Opening a backend: each backend's configuration, built once by the
//! caller (the CLI's flags become it in `cli/src/commands/replay.rs`), and
//! the openers [`KINDS`] names for each [`BackendKind`]. The
//! engine calls [`BackendConfig::open`] and names no backend itself.

use std::time::Duration;

use super::host::config::{HostConfig, HostSettings};
use super::host::{spare, HostBackend};
use super::kind::KINDS;
use super::{gpu, Backend, BackendError, BackendKind};

/// Every backend's configuration. A new backend (or a setting such as a
/// device chosen per replay) adds its own field here.
#[derive(Clone, Debug, Default)]
pub struct BackendConfig {
    pub host: HostSettings,
    /// How the process that runs the recording's code confines itself
    /// (host runner and GPU child alike): this replay's, not the
    /// process's, so lanes of one process may differ
    /// ([`crate::sandbox`]; `--sandbox`).
    pub sandbox: crate::sandbox::Mode,
}

/// The user's launch-configuration overrides, which some backends apply
/// when they start (the host runner's `OMP_*` environment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchOverrides {
    pub num_teams: Option<u64>,
    pub num_threads: Option<u64>,
}

/// What the engine knows when it opens a backend.
#[derive(Clone, Copy, Debug)]
pub struct OpenRequest {
    /// The recorded arena: base, size.
    pub arena: (u64, u64),
    /// The size of the recorded device reservation, when known.
    pub recorded_reservation: Option<u64>,
    pub launch: LaunchOverrides,
    pub timeout: Option<Duration>,
    /// The device ordinal to replay on (the host backend has one: 0).
    pub device: u32,
}

impl BackendConfig {
    /// Open the backend `kind` through its row of [`KINDS`] (`Auto` is the
    /// host backend here: the engine resolves it from the image target
    /// first).
    pub fn open(
        &self,
        kind: BackendKind,
        req: &OpenRequest,
    ) -> Result<Box<dyn Backend>, BackendError> {
        // `KINDS` is host first.
        let spec = kind.spec().unwrap_or(&KINDS[0]);
        (spec.open)(self, req)
    }

    /// Start now, before the recording is opened, what a replay on `kind`
    /// with `launch` can use later: with the host backend (or `Auto`), its
    /// spare runner ([`spare::prestart`]), forked while the calling process
    /// is still small so that loading the OpenMP runtime overlaps opening
    /// the store and reading the recording (a small replay's wall time is
    /// mostly that load). Harmless when the replay ends up on another
    /// backend ([`open`](Self::open) ends the spare then). Call it from the
    /// thread that will run the replay: the runner dies with the thread
    /// that started it. Failures are silent: the replay then starts its
    /// backend as usual.
    pub fn start_early(&self, kind: BackendKind, launch: &LaunchOverrides) {
        if matches!(kind, BackendKind::Auto | BackendKind::Host) {
            if let Ok(config) = self.host_config(launch) {
                spare::prestart(&config);
            }
        }
    }

    /// The host backend's configuration for `launch`, with the sandbox
    /// mode in the runner's environment ([`crate::sandbox::env::mode_setting`]):
    /// a spare runner started under another mode does not fit it.
    fn host_config(&self, launch: &LaunchOverrides) -> Result<HostConfig, BackendError> {
        let mut config = self.host.config(launch)?;
        config
            .env
            .push(crate::sandbox::env::mode_setting(self.sandbox));
        Ok(config)
    }
}

/// Open the host backend ([`KINDS`]' `open` for `host`).
pub(super) fn host_backend(
    config: &BackendConfig,
    req: &OpenRequest,
) -> Result<Box<dyn Backend>, BackendError> {
    crate::fleet::devices::host_only(req.device)?;
    Ok(Box::new(
        HostBackend::new(config.host_config(&req.launch)?)
            .with_recorded_reservation(req.recorded_reservation),
    ))
}

/// Open the GPU backend `kind` ([`KINDS`]' `open` for `cuda` and `hip`).
/// GPU backends hold the arena range before their runtime initializes;
/// they run in the GPU runner process as their row says
/// ([`gpu::child::open_gpu`]).
pub(super) fn gpu_backend(
    config: &BackendConfig,
    kind: BackendKind,
    req: &OpenRequest,
) -> Result<Box<dyn Backend>, BackendError> {
    // A spare host runner (it may hold the OpenMP runtime it preloaded)
    // is of no use to this replay.
    spare::end_spare();
    gpu::child::open_gpu(
        kind,
        config.sandbox,
        req.device,
        Some(req.arena),
        req.recorded_reservation,
        req.timeout,
    )
}
