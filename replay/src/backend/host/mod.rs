//! The host backend: replays x86-64 ELF images of LLVM's host offload target
//! on this CPU, in a child process.
//!
//! # Design
//! * **Isolation.** The kernel runs in a runner child (see [`runner`]). A
//!   kernel that segfaults, aborts or spins only takes the runner down: the
//!   parent sees the control socket close (then reports
//!   [`BackendError::Crashed`] with the signal from `waitpid`) or no reply
//!   within `--timeout` (then kills it and reports [`BackendError::TimedOut`]).
//! * **Arena.** The page-rounded arena is mapped at the recorded address
//!   with `MAP_FIXED_NOREPLACE`. It is anonymous memory advised to use
//!   transparent huge pages (why: [`arena`]). A single-threaded parent (the
//!   `rrstore` binary) forks a spare runner early ([`prestart`]), which
//!   starts loading the OpenMP runtime at once (a small replay's wall time
//!   is mostly that load) and maps the arena when told the address; it is
//!   used only if the image needs what it preloaded and the range is free
//!   in it ([`preload`]). Otherwise the arena is mapped before the image or
//!   the runtime is loaded, so nothing they map can take the range: the
//!   parent maps it and forks a runner that inherits it, or, when the range
//!   is taken in the parent (or the parent has other threads), the runner
//!   is executed (`rrstore __host-runner`, [`Runner::current_exe`]) and
//!   maps the range as its first step; if its own start-up mappings happen
//!   to collide (ASLR), a fresh runner is tried (different random layout) up
//!   to [`RESERVE_ATTEMPTS`] times before the occupant is reported. Both
//!   ways: [`process`].
//! * **Rehydration and read-back.** When the source can say which files
//!   hold the input (a store's packs, an archive, an LLVM `.memory` file),
//!   the runner reads and decodes them straight into the arena on all cores,
//!   verifying each chunk's blake3 ([`fill`]): one copy per byte; for
//!   inputs of [`FILL_SMALL`] to [`FILL_LARGE`] bytes the parent's copy,
//!   which overlaps the image load, is faster ([`fills_from_files`]).
//!   Otherwise, or when the fill fails (the engine then retries this way
//!   and reports precisely), the engine decodes the input into this backend's staging
//!   window (a huge-page buffer of [`STAGING_WINDOW`] bytes), which is
//!   copied into the runner with `process_vm_writev` on all cores
//!   ([`transfer`]); downloads use `process_vm_readv`. Where a sandbox
//!   forbids those calls, the bytes travel over the control socket instead
//!   ([`ArenaIo`]). The output's blake3 is computed by the runner in place
//!   ([`Backend::arena_hash`]), so a verified replay never copies the output
//!   back at all.
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
pub mod fill;
pub mod fill_trace;
pub mod libraries;
pub mod memory;
pub mod preload;
pub mod process;
pub mod protocol;
pub mod runner;
pub mod spare;
pub mod transfer;

pub use rrstore_format::image::elf;

use std::time::Duration;

use super::rehydrate::RehydratePath;
use super::rehydrate::{copy_in, ArenaRequest, FillError, FillOutcome, InputSource, Placement};
use super::{Backend, BackendError, LaunchParams};
use client::{driver, internal, malformed, Pending};
use process::RunnerProcess;
use protocol::{ErrKind, Fields, Msg, Op};
use transfer::StagingBuf;

pub use config::{ArenaIo, HostConfig, HostSettings};
pub use libraries::{missing_library, package_hint};
pub use preload::Preload;
pub use process::Runner;
pub use runner::runner_main;
use spare::take_spare;
pub use spare::{end_spare, prestart};

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

/// Largest piece sent in one `Write`/`Read` request of the socket fallback.
const SOCKET_PIECE: usize = 16 << 20;

/// Name of the hidden subcommand that starts a runner.
pub const RUNNER_SUBCOMMAND: &str = "__host-runner";

/// The reserved arena in the runner.
struct Arena {
    base: u64,
    size: u64,
    /// Copy with `process_vm_writev`/`readv` (else over the control socket).
    vm_io: bool,
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
    /// The runner was forked from this process (else executed).
    forked: bool,
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
            forked: false,
            filled: None,
            files_failed: false,
            fill_started: false,
            rebaser: None,
            fill_rebased: 0,
            translated_hash: None,
        }
    }

    /// Whether the runner was forked from this process (a spare from
    /// [`prestart`], or at the reservation with the arena already mapped;
    /// see [`process`]) rather than executed; meaningful once
    /// [`Backend::reserve`] succeeded.
    pub fn runner_forked(&self) -> bool {
        self.forked
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
        self.release_arena();
        if let Some(live) = self.live.take() {
            live.end();
        }
    }
}

/// `"host x86_64: <CPU model> (<n> CPUs), Linux <release>"`.
pub fn host_description() -> String {
    // The first CPU's entry only: the kernel generates /proc/cpuinfo as it
    // is read, and the whole file of a many-core node is hundreds of KiB.
    let cpu = std::fs::File::open("/proc/cpuinfo")
        .ok()
        .and_then(|f| {
            std::io::BufRead::lines(std::io::BufReader::new(f))
                .map_while(Result::ok)
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':').map(|(_, v)| v.trim().to_string()))
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!(
        "host {}: {cpu} ({n} CPUs), Linux {kernel}",
        std::env::consts::ARCH
    )
}

impl Backend for HostBackend {
    fn name(&self) -> &'static str {
        "host"
    }

    fn device_description(&self) -> String {
        host_description()
    }

    fn place(&mut self, req: &ArenaRequest<'_>) -> Result<Placement, BackendError> {
        self.expect_image(req.image);
        self.reserve(req.base, req.size)?;
        Ok(Placement { base: req.base })
    }

    fn reserve(&mut self, base: u64, size: u64) -> Result<(), BackendError> {
        let reserve_err = |reason: String| BackendError::Reserve { base, size, reason };
        let Some((lo, hi)) = arena::page_range(base, size) else {
            return Err(reserve_err(
                "the range wraps around the address space".into(),
            ));
        };
        let len = hi - lo;
        // 1. The spare, unless it preloaded a runtime the image does not
        // need or something it loaded sits in the range (then it is killed
        // and a runner that maps the arena first takes over).
        if let Some(spare) = take_spare(&self.config) {
            match self.reserve_in(spare.live, lo, len) {
                Ok(Ok(preloaded)) => {
                    self.forked = spare.forked;
                    self.preloaded = preloaded;
                    return self.mapped(base, size, lo);
                }
                Ok(Err((ErrKind::Occupied | ErrKind::Incompatible, _))) => {
                    // Not waited for: it may be in the middle of its load.
                    if let Some(spare) = self.live.take() {
                        spare.end();
                    }
                }
                Ok(Err((_, why))) => {
                    self.kill("arena reservation failed");
                    return Err(reserve_err(why));
                }
                // The spare is gone (killed with the thread that started
                // it, say): start a fresh runner.
                Err(_) => {}
            }
        }
        // 2. Mapped here and inherited by a forked runner.
        self.preloaded = Vec::new();
        if let Some(live) = self.fork_reserved(lo, len) {
            self.dead = None;
            self.live = Some(live);
            self.forked = true;
            return self.mapped(base, size, lo);
        }
        // 3. Executed runners, each in a fresh address-space layout.
        self.forked = false;
        let mut last = String::new();
        for _ in 0..RESERVE_ATTEMPTS {
            let live = self.spawn()?;
            match self.reserve_in(live, lo, len)? {
                Ok(_) => return self.mapped(base, size, lo),
                Err((ErrKind::Occupied, why)) => {
                    last = why;
                    self.kill("arena range occupied");
                }
                Err((_, why)) => {
                    self.kill("arena reservation failed");
                    return Err(reserve_err(why));
                }
            }
        }
        Err(reserve_err(format!(
            "{last} (in {RESERVE_ATTEMPTS} fresh runner processes)"
        )))
    }

    fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        self.write_arena(offset, data)
    }

    fn begin_fill(&mut self, input: &dyn InputSource) -> Result<(), BackendError> {
        // The runner reads the input's files itself where that is faster
        // (see [`fills_from_files`]), asked before the image load so that
        // it fills while its preload finishes.
        if self.fill_started || self.files_failed || !self.fills_from_files(input.len()) {
            return Ok(());
        }
        if let Some(plan) = input.extents() {
            self.start_fill(plan)?;
            self.fill_started = true;
        }
        Ok(())
    }

    fn fill(&mut self, input: &mut dyn InputSource) -> Result<FillOutcome, FillError> {
        if std::mem::take(&mut self.fill_started) {
            match self.finish_fill()? {
                Ok(took) => {
                    return Ok(FillOutcome {
                        path: RehydratePath::Files,
                        took: Some(took),
                    })
                }
                // A pack moved by gc, a corrupt chunk: the bytes are handed
                // over instead, which retries and reports precisely, and so
                // are later repetitions'.
                Err(_) => self.files_failed = true,
            }
        }
        copy_in(self, input)
    }

    fn staging_window(&mut self, max_len: usize) -> Result<Option<&mut [u8]>, BackendError> {
        if self.staging.is_none() {
            let size = self.arena.as_ref().map_or(0, |a| a.size);
            let len = STAGING_WINDOW.min(usize::try_from(size).unwrap_or(STAGING_WINDOW));
            self.staging = Some(
                StagingBuf::new(len.max(1))
                    .map_err(|e| driver("allocating the staging window", e))?,
            );
        }
        Ok(self.staging.as_mut().map(|b| {
            let n = b.len().min(max_len);
            &mut b.as_mut_slice()[..n]
        }))
    }

    fn commit_staging(&mut self, offset: u64, len: usize) -> Result<(), BackendError> {
        let Some(buf) = self.staging.take() else {
            return Err(internal(
                "a staging window was committed before one was handed out",
            ));
        };
        let r = match buf.as_slice().get(..len) {
            Some(data) => self.write_arena(offset, data),
            None => Err(internal(format!(
                "{len} bytes committed from the {}-byte staging window",
                buf.len()
            ))),
        };
        self.staging = Some(buf);
        r
    }

    fn load_image(&mut self, image: &[u8], kernel: &str) -> Result<(), BackendError> {
        let info = elf::parse(image).map_err(BackendError::Image)?;
        match info.symbol(kernel) {
            Some(s) if s.kind == elf::SymKind::Func => {}
            _ => return Err(BackendError::MissingKernel(kernel.to_string())),
        }
        let needed = info.needed.clone();
        self.elf = Some(info);
        // Pipelined: the runner dlopens while the engine goes on (rehydrating
        // the arena); the replies are collected by the next request.
        let mut m = Msg::op(Op::LoadImage);
        m.bytes(kernel.as_bytes()).bytes(image);
        self.send(&m)?;
        self.send(&Msg::op(Op::Libraries))?;
        self.pending.push(Pending::Load {
            kernel: kernel.to_string(),
            needed,
        });
        self.pending.push(Pending::Libraries);
        Ok(())
    }

    fn write_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError> {
        let sym = self
            .elf()?
            .symbol(name)
            .cloned()
            .ok_or_else(|| BackendError::MissingGlobal { name: name.into() })?;
        if sym.size != data.len() as u64 {
            return Err(BackendError::GlobalSize {
                name: name.into(),
                recorded: data.len() as u64,
                actual: sym.size,
            });
        }
        // Pipelined like the load: the runner writes it after the dlopen,
        // and a failure is reported by the next request (the launch) before
        // the kernel runs.
        let mut m = Msg::op(Op::WriteGlobal);
        m.bytes(name.as_bytes()).bytes(data);
        self.send(&m)?;
        self.pending.push(Pending::Global { name: name.into() });
        Ok(())
    }

    fn launch(&mut self, args: &[u64], params: &LaunchParams) -> Result<Duration, BackendError> {
        let mut m = Msg::op(Op::Launch);
        m.u64(args.len() as u64);
        for a in args {
            m.u64(*a);
        }
        match self.request(&m, params.timeout)? {
            Ok(reply) => {
                let ns = Fields::new(&reply)
                    .u64()
                    .map_err(|e| malformed("the launch", e))?;
                Ok(Duration::from_nanos(ns))
            }
            Err((_, why)) => Err(driver("launch", why)),
        }
    }

    fn download(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        self.read_arena(offset, dst)
    }

    fn arena_hash(&mut self) -> Result<Option<[u8; 32]>, BackendError> {
        if let Some(h) = self.translated_hash.take() {
            return Ok(Some(h));
        }
        let a = self.arena_at(0, 0)?;
        let mut m = Msg::op(Op::Hash);
        m.u64(a.base).u64(a.size);
        match self.request(&m, None)? {
            Ok(reply) => match <[u8; 32]>::try_from(reply.as_slice()) {
                Ok(h) => Ok(Some(h)),
                Err(_) => Err(malformed("hashing the arena", "short reply")),
            },
            Err((_, why)) => Err(driver("hashing the arena", why)),
        }
    }

    fn runtime_libraries(&self) -> Vec<String> {
        self.libraries.clone()
    }

    fn sandbox_applied(&self) -> Option<crate::sandbox::Mechanisms> {
        self.sandbox
    }

    // Relocation (issue 19): the runner scans each chunk it decodes and
    // translates the output back in place.
    fn scan_fills(&mut self, rebaser: Option<crate::placement::Rebaser>) -> bool {
        self.rebaser = rebaser;
        true
    }

    fn fill_rebased(&self) -> u64 {
        self.fill_rebased
    }

    fn back_translate(
        &mut self,
        r: &crate::placement::Rebaser,
    ) -> Result<Option<u64>, BackendError> {
        let mut m = Msg::op(Op::Translate);
        m.u64(r.new_base).u64(r.size).u64(r.old_base);
        let op = "translating the arena back";
        match self.request(&m, None)? {
            Ok(reply) => {
                let mut f = Fields::new(&reply);
                let n = f.u64().map_err(|e| malformed(op, e))?;
                f.u64().map_err(|e| malformed(op, e))?;
                let hash = reply
                    .get(16..48)
                    .and_then(|h| <[u8; 32]>::try_from(h).ok())
                    .ok_or_else(|| malformed(op, "short reply"))?;
                self.translated_hash = Some(hash);
                Ok(Some(n))
            }
            Err((_, why)) => Err(driver(op, why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_the_host() {
        assert!(host_description().starts_with("host x86_64: "));
    }

    /// A backend driven out of order says it is rrstore's bug (exit code
    /// 70), not a driver failure; nothing is started for that.
    #[test]
    fn calls_before_the_reservation_are_internal_errors() {
        let mut b = HostBackend::new(HostConfig {
            runner: Runner {
                program: "/nonexistent/runner".into(),
                args: vec![],
            },
            env: Vec::new(),
            arena_io: ArenaIo::Auto,
            preload: Preload::default(),
        });
        let internal = |e: BackendError| match e {
            BackendError::Internal { backend, what } => {
                assert_eq!(backend, "host");
                what
            }
            other => panic!("{other:?}"),
        };
        assert!(internal(b.upload(0, b"x").unwrap_err()).contains("before it was reserved"));
        let mut dst = [0u8; 4];
        assert!(internal(b.download(0, &mut dst).unwrap_err()).contains("before it was reserved"));
        assert!(internal(b.commit_staging(0, 1).unwrap_err()).contains("staging window"));
        assert!(internal(
            b.launch(
                &[],
                &LaunchParams {
                    num_teams: 1,
                    num_threads: 1,
                    shared_memory: 0,
                    loop_trip_count: 0,
                    timeout: None,
                }
            )
            .unwrap_err()
        )
        .contains("before the arena was reserved"));
    }
}
