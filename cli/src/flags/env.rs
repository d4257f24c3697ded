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
