//! The process-wide settings of this library: what the caller (the CLI,
//! `cli/src/flags/env.rs`) installs once at start, before any replay or
//! device listing runs. They are knobs of the process, not of one replay,
//! because the code that honours them runs where no replay's options
//! reach: the device listing's short-lived child, the GPU runner process,
//! the upload statistics of a staging ring. The library reads no
//! `RRSTORE_*` variable for them: a caller that installs nothing gets the
//! defaults.
//!
//! A host runner is a process of its own: the variables its parent passes
//! it are the internal protocol listed in [`crate::sandbox::env`]
//! ([`crate::sandbox::env::FROM_PARENT`]); the runtime search directories
//! it is passed are installed here by the runner itself
//! ([`crate::backend::host::runner_main`]).

use std::path::PathBuf;
use std::sync::RwLock;
use std::time::Duration;

/// How long a GPU driver initialisation in a child may take by default: a
/// CUDA or ROCm initialisation takes seconds even on a large node;
/// minutes means it hangs.
pub const DEFAULT_GPU_START_TIMEOUT: Duration = Duration::from_secs(120);

/// This process' settings ([`install`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessSettings {
    /// Print one line per GPU upload round and each lane's lookahead
    /// counts on stderr (`RRSTORE_GPU_STATS`).
    pub gpu_stats: bool,
    /// How long a GPU child (or a listing child) may take to initialise
    /// its driver (`RRSTORE_GPU_START_TIMEOUT`).
    pub gpu_start_timeout: Duration,
    /// Test hook: the directories searched for OpenMP offload runtimes
    /// instead of the loader's path and `/usr/lib/llvm-*/lib`
    /// (`RRSTORE_RUNTIME_SEARCH`; passed on to host runners).
    pub runtime_search: Option<Vec<PathBuf>>,
}

impl ProcessSettings {
    /// The defaults: no statistics, [`DEFAULT_GPU_START_TIMEOUT`], the
    /// usual runtime search.
    pub const DEFAULT: ProcessSettings = ProcessSettings {
        gpu_stats: false,
        gpu_start_timeout: DEFAULT_GPU_START_TIMEOUT,
        runtime_search: None,
    };
}

impl Default for ProcessSettings {
    fn default() -> Self {
        Self::DEFAULT
    }
}

static SETTINGS: RwLock<ProcessSettings> = RwLock::new(ProcessSettings::DEFAULT);

/// Install `s` as this process' settings (the CLI does, once, at start;
/// tests may again).
pub fn install(s: ProcessSettings) {
    match SETTINGS.write() {
        Ok(mut g) => *g = s,
        Err(poisoned) => *poisoned.into_inner() = s,
    }
}

/// Change this process' settings in place (a GPU runner turns its own
/// statistics off: its parent prints them).
pub fn update(f: impl FnOnce(&mut ProcessSettings)) {
    match SETTINGS.write() {
        Ok(mut g) => f(&mut g),
        Err(poisoned) => f(&mut poisoned.into_inner()),
    }
}

/// This process' settings.
pub fn get() -> ProcessSettings {
    match SETTINGS.read() {
        Ok(g) => g.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// Whether GPU statistics are printed ([`ProcessSettings::gpu_stats`]).
pub fn gpu_stats() -> bool {
    match SETTINGS.read() {
        Ok(g) => g.gpu_stats,
        Err(poisoned) => poisoned.into_inner().gpu_stats,
    }
}
