//! The `RRSTORE_*` environment variables that set library behaviour: read
//! here, once, by the command line, and handed to the libraries as options
//! (the libraries read no `RRSTORE_*` variable of the replaying process;
//! docs/architecture.md lists the runner-side exceptions). The names and
//! their meanings are the users' (README.md, docs/replay.md): only where
//! they are read is decided here.

use std::path::PathBuf;

use rrstore_replay::backend::host::memory::HostMemory;
use rrstore_replay::backend::host::Preload;

/// What the host runner loads before the recording is known: `auto`
/// (default: the newest OpenMP offload runtime), `off`, or a colon-separated
/// list of libraries.
const PRELOAD: &str = "RRSTORE_HOST_PRELOAD";
/// Where the arena cache's slots live: any directory of this user's on
/// tmpfs (default: `rrstore_replay::backend::host::held::default_dir`).
const ARENA_CACHE_DIR: &str = rrstore_replay::backend::host::held::DIR_ENV;
/// `1`: do not rebase the pointers stored in a relocated arena (debugging).
const NO_POINTER_REBASE: &str = "RRSTORE_NO_POINTER_REBASE";
/// `ADDR:LEN`: map this range before the arena is reserved (debugging aid
/// of relocation; the executed host runners read it themselves, from the
/// environment they inherit: `rrstore_replay::placement::occupy`).
const DEBUG_OCCUPY: &str = rrstore_replay::placement::OCCUPY_ENV;
/// Test hook: read sysfs under this directory instead of `/sys` (so a test
/// can give the real binary a VM that reports free pages, or a pool).
const DEBUG_SYSFS: &str = "RRSTORE_DEBUG_SYSFS";

/// `RRSTORE_HOST_PRELOAD` (default `auto`).
pub fn preload() -> Preload {
    std::env::var(PRELOAD)
        .map(|v| Preload::parse(&v))
        .unwrap_or_default()
}

/// `RRSTORE_ARENA_CACHE_DIR`, when set and not empty.
pub fn arena_cache_dir() -> Option<PathBuf> {
    std::env::var_os(ARENA_CACHE_DIR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Whether stored pointers are rebased: unless `RRSTORE_NO_POINTER_REBASE`
/// is set to something other than empty or `0`.
pub fn pointer_scan() -> bool {
    !std::env::var_os(NO_POINTER_REBASE).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The range `RRSTORE_DEBUG_OCCUPY` names, when it is set and well formed.
pub fn occupy() -> Option<(u64, u64)> {
    rrstore_replay::placement::occupy::parse(&std::env::var(DEBUG_OCCUPY).ok()?)
}

/// This machine's memory figures, from `/sys` or `RRSTORE_DEBUG_SYSFS`'s tree.
pub fn host_memory() -> HostMemory {
    match std::env::var_os(DEBUG_SYSFS) {
        Some(root) => HostMemory::probe_at(std::path::Path::new(&root)),
        None => HostMemory::probe(),
    }
}

/// `1`: print one line per GPU upload round and each lane's lookahead
/// counts (docs/gpu.md).
const GPU_STATS: &str = "RRSTORE_GPU_STATS";
/// Seconds a GPU child (or a listing child) may take to initialise its
/// driver (default: `rrstore_replay::settings::DEFAULT_GPU_START_TIMEOUT`).
const GPU_START_TIMEOUT: &str = "RRSTORE_GPU_START_TIMEOUT";
/// Test hook: directories searched for OpenMP offload runtimes instead of
/// the loader's path and `/usr/lib/llvm-*/lib` (passed on to host runners).
const RUNTIME_SEARCH: &str = rrstore_replay::backend::host::libraries::SEARCH_ENV;

/// The replay library's process-wide settings
/// ([`rrstore_replay::settings`]): `RRSTORE_GPU_STATS`,
/// `RRSTORE_GPU_START_TIMEOUT`, `RRSTORE_RUNTIME_SEARCH`.
pub fn process_settings() -> rrstore_replay::settings::ProcessSettings {
    use rrstore_replay::settings::{ProcessSettings, DEFAULT_GPU_START_TIMEOUT};
    ProcessSettings {
        gpu_stats: std::env::var_os(GPU_STATS).is_some(),
        gpu_start_timeout: std::env::var(GPU_START_TIMEOUT)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(
                DEFAULT_GPU_START_TIMEOUT,
                std::time::Duration::from_secs_f64,
            ),
        runtime_search: std::env::var_os(RUNTIME_SEARCH)
            .map(|v| rrstore_replay::backend::host::libraries::split_search(&v)),
    }
}

/// The default store directory when `--store` is not given.
const STORE_DIR: &str = "RRSTORE_DIR";
/// The machine name history rows get (else the host name).
const MACHINE: &str = "RRSTORE_MACHINE";

/// `RRSTORE_DIR`, when set and not empty.
pub fn store_dir() -> Option<PathBuf> {
    std::env::var_os(STORE_DIR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The settings of the stores the CLI opens: `RRSTORE_DIR`,
/// `RRSTORE_MACHINE`.
pub fn store_settings() -> rrstore_store::StoreSettings {
    rrstore_store::StoreSettings {
        dir: store_dir(),
        machine: std::env::var(MACHINE).ok(),
    }
}

/// `1`: trace every request to a remote on stderr (docs/remote.md).
const REMOTE_TRACE: &str = "RRSTORE_REMOTE_TRACE";
/// Test hooks of remotes (docs/remote.md): the pack size in bytes, `2` to
/// keep an empty version 2 remote at version 2, `3` to write "RRX3" index
/// objects, the pull's batch size and the points where a transfer pauses.
const REMOTE_PACK_BYTES: &str = "RRSTORE_REMOTE_PACK_BYTES";
const REMOTE_LAYOUT: &str = "RRSTORE_REMOTE_LAYOUT";
const REMOTE_INDEX_FORMAT: &str = "RRSTORE_REMOTE_INDEX_FORMAT";
const PULL_BATCH_BYTES: &str = "RRSTORE_PULL_BATCH_BYTES";
const PULL_PAUSE_AFTER_BATCHES: &str = "RRSTORE_PULL_PAUSE_AFTER_BATCHES";
const PULL_PAUSE_AFTER_RECORDINGS: &str = "RRSTORE_PULL_PAUSE_AFTER_RECORDINGS";
const PUSH_PAUSE_AFTER_LOCK: &str = "RRSTORE_PUSH_PAUSE_AFTER_LOCK";

/// The options a remote is opened with: tracing and the test hooks.
pub fn remote_options() -> rrstore_store::remote::options::RemoteOptions {
    use rrstore_store::remote::options::{RemoteOptions, TransferHooks};
    let number = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    RemoteOptions {
        trace: std::env::var(REMOTE_TRACE).is_ok_and(|v| !v.is_empty() && v != "0"),
        pack_bytes: number(REMOTE_PACK_BYTES),
        keep_layout_2: std::env::var(REMOTE_LAYOUT).is_ok_and(|v| v == "2"),
        index_rrx3: std::env::var(REMOTE_INDEX_FORMAT).as_deref() == Ok("3"),
        hooks: TransferHooks {
            pull_batch_bytes: number(PULL_BATCH_BYTES),
            pull_pause_after_batches: number(PULL_PAUSE_AFTER_BATCHES),
            pull_pause_after_recordings: number(PULL_PAUSE_AFTER_RECORDINGS),
            push_pause_after_lock: std::env::var_os(PUSH_PAUSE_AFTER_LOCK).is_some(),
        },
    }
}

/// `gpu` (or unset): a device lane prepares its next recording while its
/// kernel runs; `all`: every lane; `0`: none (docs/fleet.md).
const LOOKAHEAD: &str = "RRSTORE_LOOKAHEAD";

/// `RRSTORE_LOOKAHEAD`'s value, as given (`None` when unset).
pub fn lookahead() -> Option<String> {
    std::env::var(LOOKAHEAD).ok()
}

/// Bench instrumentation: `rrstore import` prints where its time went
/// (docs/store.md).
const IMPORT_STAGES: &str = "RRSTORE_IMPORT_STAGES";

/// Whether `RRSTORE_IMPORT_STAGES` is set.
pub fn import_stages() -> bool {
    std::env::var_os(IMPORT_STAGES).is_some()
}
