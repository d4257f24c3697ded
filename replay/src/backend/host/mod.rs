//! The host backend: replays x86-64 ELF images of LLVM's host offload target
//! on this CPU, in a child process.
//!
//! # Design
//! * **Isolation.** The kernel runs in a runner child (see [`runner`]). A
//!   kernel that segfaults, aborts or spins only takes the runner down: the
//!   parent sees the control socket close (then reports
//!   [`BackendError::Crashed`] with the signal from `waitpid`) or no reply
//!   within `--timeout` (then kills it and reports [`BackendError::TimedOut`]).
//! * **Trust boundary.** The runner is executed, never forked from rrstore
//!   (it holds none of rrstore's memory or environment: [`process`]), and
//!   it is never asked for a result: the parent times the launch request,
//!   stops the runner after the last launch and reads the arena itself
//!   ([`judge`]). The runner reads store files only before the image is
//!   loaded.
//! * **Arena.** The page-rounded arena is mapped at the recorded address
//!   with `MAP_FIXED_NOREPLACE`, by the runner before it loads anything
//!   else. It is anonymous memory advised to use transparent huge pages
//!   (why: [`arena`]), or a slot of the arena cache ([`held`]), or, where
//!   this process may not read the runner's memory with `process_vm_readv`,
//!   a sealed memfd both processes map ([`super::rehydrate::ArenaMemory::Shared`]).
//!   Zeroed slack follows it up to the recording's device reservation, as
//!   under LLVM's replay tool ([`slack`]: never read back). A spare
//!   runner is executed early ([`prestart`]) and starts loading the OpenMP
//!   runtime at once (a small replay's wall time is mostly that load); it
//!   is used only if the image needs what it preloaded and the range is
//!   free in it ([`preload`]). Otherwise a fresh runner maps the range as
//!   its first step; if its own start-up mappings happen to collide (ASLR),
//!   a fresh runner is tried (different random layout) up to
//!   [`RESERVE_ATTEMPTS`] times before the occupant is reported.
//! * **Rehydration and read-back.** When the source can say which files
//!   hold the input (a store's packs, an archive, an LLVM `.memory` file),
//!   the runner reads and decodes them straight into the arena on all cores
//!   before the image is loaded, verifying each chunk's blake3 ([`fill`]):
//!   one copy per byte; for inputs of [`FILL_SMALL`] to [`FILL_LARGE`]
//!   bytes the parent's copy, which overlaps the image load, is faster
//!   ([`fills_from_files`]). Otherwise (later repetitions included, or when
//!   the fill fails: the engine then retries this way and reports
//!   precisely), the engine decodes the input into this backend's staging
//!   window (a huge-page buffer of [`STAGING_WINDOW`] bytes), which is
//!   copied into the runner with `process_vm_writev` on all cores
//!   ([`transfer`]), or into this process' mapping of a shared arena. The
//!   output's blake3 is computed here from the stopped runner's memory, on
//!   all cores as it is read ([`Backend::arena_hash`]), so a verified
//!   replay never holds the output in this process.
//! * **Image.** Written to a memfd in the runner and `dlopen`ed through
//!   `/proc/self/fd/N` (nothing written to disk). Its `.dynsym` is parsed in
//!   the parent first ([`elf`]) to check the kernel symbol and each global's
//!   exported size, which `dlsym` alone cannot give.
//! * **Call.** Every argument is one 64-bit integer, as the host plugin
//!   passes them through libffi; [`call`] has the SysV trampoline.
//! * **Launch configuration.** A host kernel takes its team and thread counts
//!   from the OpenMP runtime, so overrides are passed as `OMP_NUM_TEAMS` /
//!   `OMP_NUM_THREADS` / `OMP_TEAMS_THREAD_LIMIT` in the runner's environment
//!   ([`HostConfig::env`]); otherwise the runner inherits the caller's
//!   environment.

pub mod arena;
pub mod call;
mod client;
pub mod config;
mod describe;
pub mod fill;
pub mod fill_trace;
pub mod held;
mod judge;
pub mod launch_path;
pub mod libraries;
pub mod memory;
mod ops;
pub mod preload;
pub mod process;
pub mod protocol;
pub mod runner;
pub mod slack;
pub mod spare;
pub mod transfer;

pub use rrstore_format::image::elf;

use std::time::Duration;

use super::rehydrate::RehydratePath;
use super::rehydrate::{copy_in, ArenaRequest, FillError, FillOutcome, InputSource, Placement};
use super::{Backend, BackendError, LaunchParams};
use client::{driver, internal, Pending};
use process::RunnerProcess;
use protocol::{ErrKind, Msg, Op};
use transfer::StagingBuf;

pub use config::{ArenaIo, HostConfig, HostSettings};
pub use describe::host_description;
pub use libraries::{missing_library, package_hint};
pub use preload::Preload;
pub use process::Runner;
pub use runner::runner_main;
use spare::take_spare;
pub use spare::{end_spare, prestart, spare_waiting};

/// Attempts at reserving the arena in fresh runners when the range collides
/// with a runner's own start-up mappings.
pub const RESERVE_ATTEMPTS: usize = 3;

/// Size of the staging window the engine decodes the input into: large
/// enough to decode on every core at once, small enough to stay mostly in
/// cache until it is copied into the runner.
pub const STAGING_WINDOW: usize = 8 << 20;

/// Inputs of `FILL_SMALL..FILL_LARGE` bytes are copied in by the parent
/// while the runner loads the image (see [`fills_from_files`]).
pub const FILL_SMALL: u64 = 1 << 20;
/// See [`FILL_SMALL`].
pub const FILL_LARGE: u64 = 16 << 20;

/// Whether the runner fills an input of `len` bytes from its files itself
/// (under [`ArenaIo::Auto`]), else the parent copies it in.
///
/// The runner fills before it loads the image (asked by
/// [`Backend::begin_fill`]); the parent's copy overlaps that load (`dlopen` of the OpenMP runtime and libLLVM: ~10 ms). A small
/// input takes the runner microseconds. A large one takes longer than the
/// load, and the runner's single copy on every core is then what counts
/// (about twice the parent's decode-then-copy throughput). In between, the
/// overlap wins: measured on two cores with a 2 MiB input, the runner
/// filling first cost ~1.5 ms of wall time, and filling on a worker thread
/// while loading was no better (the thread, placed on the loading core
/// while the parent ran on the other, started only when the load ended).
pub fn fills_from_files(len: u64) -> bool {
    !(FILL_SMALL..FILL_LARGE).contains(&len)
}

/// A runner whose arena is at least this large is asked to unmap it
/// before it is killed (issue 24). Its teardown runs at `SCHED_IDLE`
/// ([`process::RunnerProcess::kill`]), so left to it the arena was often
/// still held when the next replay's runner faulted in its own, which then
/// got memory nothing had touched lately; on a virtual machine whose host
/// backs guest memory lazily, the first touch of such memory pays the
/// host's page faults as well. Measured on the 2-CPU VM here: faulting a
/// fresh 64 MiB huge-page arena took 4.3-4.8 ms of CPU when the previous
/// arena had been freed first, 4.3-201 ms when it had not. Unmapped first,
/// its pages are the ones the next arena gets, already backed; the request
/// costs ~0.3 ms for a 64 MiB huge-page arena. Smaller arenas come from
/// the pages the allocator recycles anyway.
pub const RELEASE_ARENA_MIN: u64 = 2 << 20;

/// Name of the hidden subcommand that starts a runner.
pub const RUNNER_SUBCOMMAND: &str = "__host-runner";

/// The reserved arena in the runner.
struct Arena {
    base: u64,
    size: u64,
}

/// The host backend (see the module documentation).
pub struct HostBackend {
    config: HostConfig,
    live: Option<RunnerProcess>,
    arena: Option<Arena>,
    staging: Option<StagingBuf>,
    elf: Option<elf::ElfInfo>,
    /// `DT_NEEDED` of the image announced by [`Backend::expect_image`].
    needed: Vec<String>,
    /// What the runner in use loaded before its arena was mapped.
    preloaded: Vec<String>,
    libraries: Vec<String>,
    /// How the runner confined itself (its load's reply).
    sandbox: Option<crate::sandbox::Mechanisms>,
    /// Requests sent without waiting, whose replies come before the reply
    /// of the next request (see [`HostBackend::settle`]).
    pending: Vec<Pending>,
    /// Set once the runner died; every later call reports it.
    dead: Option<String>,
    /// The runner was stopped for the read-back ([`judge`]): it runs
    /// nothing more, and is killed with the backend.
    frozen: bool,
    /// This process' mapping of a shared arena ([`super::rehydrate::ArenaMemory::Shared`]).
    shared: Option<judge::SharedView>,
    /// Outcome of the last `Fill`, collected by [`HostBackend::settle`].
    filled: Option<Result<Duration, String>>,
    /// A fill from files failed: later repetitions are handed the bytes.
    files_failed: bool,
    /// [`Backend::begin_fill`] asked the runner to fill from files.
    fill_started: bool,
    /// Relocation (issue 19): the fills rebase stored pointers with it, and
    /// how many the last one rebased.
    rebaser: Option<crate::placement::Rebaser>,
    fill_rebased: u64,
    /// The arena's blake3 computed with the back-translation, for the
    /// [`Backend::arena_hash`] that follows it.
    translated_hash: Option<[u8; 32]>,
    /// The arena cache's slot the runner maps, held until the runner is
    /// gone (dropped after [`Drop::drop`] ended it). A cache that cannot
    /// serve (its directory refused, a full tmpfs) means fresh memory;
    /// `rrstore devices` says why ([`held::HeldArenas::usage`]).
    held: Option<held::Held>,
    /// What memory the runner's arena is (its `Reserve` reply).
    arena_memory: Option<super::rehydrate::ArenaMemory>,
    /// The recording's device reservation (`arena.reserved`), which sets
    /// how far the zeroed slack after the arena reaches ([`slack`]).
    recorded_reservation: Option<u64>,
    /// The slack the runner mapped (its `Reserve` reply).
    slack: Option<slack::Slack>,
    /// A launch ran since the slack was last cleared: the next fill asks
    /// the runner to clear it first.
    slack_dirty: bool,
}

impl HostBackend {
    pub fn new(config: HostConfig) -> HostBackend {
        HostBackend {
            config,
            live: None,
            arena: None,
            staging: None,
            elf: None,
            needed: Vec::new(),
            preloaded: Vec::new(),
            libraries: Vec::new(),
            sandbox: None,
            pending: Vec::new(),
            dead: None,
            frozen: false,
            shared: None,
            filled: None,
            files_failed: false,
            fill_started: false,
            rebaser: None,
            fill_rebased: 0,
            translated_hash: None,
            held: None,
            arena_memory: None,
            recorded_reservation: None,
            slack: None,
            slack_dirty: false,
        }
    }

    /// Size the zeroed slack after the arena from the recording's device
    /// reservation (`None`: unknown, see [`slack::footprint`]).
    pub fn with_recorded_reservation(mut self, reserved: Option<u64>) -> Self {
        self.recorded_reservation = reserved;
        self
    }

    /// The zeroed slack mapped after the arena, once reserved.
    pub fn arena_slack(&self) -> Option<&slack::Slack> {
        self.slack.as_ref()
    }

    /// The libraries the runner in use loaded before its arena was mapped
    /// (a spare's [`Preload`]); empty for any other runner. Meaningful once
    /// [`Backend::reserve`] succeeded.
    pub fn runner_preloaded(&self) -> &[String] {
        &self.preloaded
    }

    /// Prepare for `image` before the reservation (what [`Backend::place`]
    /// does with its request's image).
    pub fn expect_image(&mut self, image: &[u8]) {
        // A spare that preloaded anything serves only an image known to
        // need it: not one that fails to parse (`load_image` reports
        // that), nor one with a search path of its own, through which the
        // loader could have found another file of the same soname.
        self.needed = match elf::parse(image) {
            Ok(info) if !info.search_path => info.needed,
            _ => Vec::new(),
        };
    }

    /// Whether [`Backend::fill`] lets the runner read an input of `len`
    /// bytes from its files (under [`ArenaIo::Auto`], see
    /// [`fills_from_files`]).
    pub fn fills_from_files(&self, len: u64) -> bool {
        self.config.arena_io == ArenaIo::Auto && fills_from_files(len)
    }

    fn spawn(&self) -> Result<RunnerProcess, BackendError> {
        client::spawn_runner(&self.config)
    }
}

impl Drop for HostBackend {
    fn drop(&mut self) {
        let large = self
            .arena
            .as_ref()
            .is_some_and(|a| a.size >= RELEASE_ARENA_MIN);
        if self.frozen && large && self.dead.is_none() {
            // The read-back is done and nothing more is read: the stopped
            // runner may run again, so that it unmaps its arena on request
            // (issue 24) instead of rrstore waiting for its whole teardown.
            // An image that ignores the request is killed after the
            // release's timeout.
            if let Some(live) = self.live.as_ref() {
                live.resume();
                self.frozen = false;
            }
        }
        self.release_arena();
        if let Some(live) = self.live.take() {
            live.end();
        }
    }
}
