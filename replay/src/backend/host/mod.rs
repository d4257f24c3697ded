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
pub mod elf;
pub mod fill;
pub mod libraries;
pub mod preload;
pub mod process;
pub mod protocol;
pub mod runner;
pub mod transfer;

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use rrstore_format::extents::PartExtents;

use super::{Backend, BackendError, LaunchParams};
use process::RunnerProcess;
use protocol::{ErrKind, Fields, Msg, Op};
use transfer::StagingBuf;

pub use libraries::{missing_library, package_hint};
pub use preload::Preload;
pub use process::Runner;
pub use runner::runner_main;

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
/// The runner fills before it loads the image; the parent's copy overlaps
/// that load (`dlopen` of the OpenMP runtime and libLLVM: ~10 ms). A small
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

/// Largest piece sent in one `Write`/`Read` request of the socket fallback.
const SOCKET_PIECE: usize = 16 << 20;

/// Name of the hidden subcommand that starts a runner.
pub const RUNNER_SUBCOMMAND: &str = "__host-runner";

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
    /// (a store, an archive, an LLVM recording: one copy, see [`fill`]);
    /// otherwise the parent writes it with `process_vm_writev`, or over the
    /// control socket where a sandbox forbids that (probed once per
    /// runner). Read-back: `process_vm_readv`, or the socket.
    #[default]
    Auto,
    /// The parent always writes the input (decoded into the staging window,
    /// then `process_vm_writev`, or the socket where forbidden).
    Copy,
    /// The parent always writes and reads over the control socket (one more
    /// copy per byte).
    Socket,
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
}

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
    /// Requests sent without waiting, whose replies come before the reply
    /// of the next request (see [`HostBackend::settle`]).
    pending: Vec<Pending>,
    /// Set once the runner died; every later call reports it.
    dead: Option<String>,
    /// The runner was forked from this process (else executed).
    forked: bool,
    /// Outcome of the last `Fill`, collected by [`HostBackend::settle`].
    filled: Option<Result<Duration, String>>,
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
            pending: Vec::new(),
            dead: None,
            forked: false,
            filled: None,
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

    fn spawn(&self) -> Result<RunnerProcess, BackendError> {
        spawn_runner(&self.config)
    }

    /// Send a request and wait for its reply (`timeout` for launches),
    /// after collecting the replies of pipelined requests.
    fn request(
        &mut self,
        msg: &Msg,
        timeout: Option<Duration>,
    ) -> Result<Result<Vec<u8>, (ErrKind, String)>, BackendError> {
        self.settle()?;
        self.send(msg)?;
        self.receive(timeout)
    }

    fn live(&mut self) -> Result<&mut RunnerProcess, BackendError> {
        if let Some(why) = &self.dead {
            return Err(BackendError::Driver {
                op: "host runner".into(),
                reason: format!("{why}; nothing more can be run in it"),
            });
        }
        self.live.as_mut().ok_or_else(|| BackendError::Driver {
            op: "host runner".into(),
            reason: "the arena was not reserved yet".into(),
        })
    }

    /// Send a request without waiting for its reply (replies come in order).
    fn send(&mut self, msg: &Msg) -> Result<(), BackendError> {
        let sent = msg.send(&mut self.live()?.sock);
        sent.map_err(|_| self.collect_death())
    }

    /// Wait for the next reply.
    fn receive(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Result<Vec<u8>, (ErrKind, String)>, BackendError> {
        let live = self.live()?;
        let _ = live.sock.set_read_timeout(timeout);
        match protocol::recv(&mut live.sock) {
            Ok(Some(reply)) => {
                let mut f = Fields::new(&reply);
                match f.u8() {
                    Ok(0) => Ok(Ok(reply[1..].to_vec())),
                    Ok(_) => {
                        let kind = ErrKind::from_u8(f.u8().unwrap_or(0));
                        Ok(Err((kind, f.string().unwrap_or_default())))
                    }
                    Err(e) => Err(driver("host runner reply", e)),
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                let t = timeout.unwrap_or_default();
                self.kill("timed out");
                Err(BackendError::TimedOut(t))
            }
            Ok(None) | Err(_) => Err(self.collect_death()),
        }
    }

    /// Collect the replies of the pipelined requests, in order: the image
    /// load (dlopen runs in the runner while the engine rehydrates the
    /// arena), its library list and the globals written since. Every reply
    /// is read; the first failure is returned.
    fn settle(&mut self) -> Result<(), BackendError> {
        let mut first = Ok(());
        for p in std::mem::take(&mut self.pending) {
            let reply = self.receive(None)?;
            let r = match (p, reply) {
                (Pending::Libraries, Ok(reply)) => {
                    let mut f = Fields::new(&reply);
                    let n = f.u64().unwrap_or(0);
                    self.libraries = (0..n).filter_map(|_| f.string().ok()).collect();
                    Ok(())
                }
                (Pending::Libraries, Err(_)) => Ok(()),
                (Pending::Fill, Ok(reply)) => {
                    let mut f = Fields::new(&reply);
                    self.filled = Some(match f.u64() {
                        Ok(ns) => Ok(Duration::from_nanos(ns)),
                        Err(e) => Err(format!("short reply from the runner: {e}")),
                    });
                    self.fill_rebased = f.u64().unwrap_or(0);
                    Ok(())
                }
                (Pending::Fill, Err((_, why))) => {
                    self.filled = Some(Err(why));
                    Ok(())
                }
                (_, Ok(_)) => Ok(()),
                (Pending::Load { kernel, .. }, Err((ErrKind::MissingKernel, _))) => {
                    Err(BackendError::MissingKernel(kernel))
                }
                (Pending::Load { needed, .. }, Err((_, why))) => {
                    let lib = missing_library(&why)
                        .or_else(|| needed.iter().find(|n| why.contains(n.as_str())).cloned());
                    Err(match lib {
                        Some(library) => BackendError::MissingLibrary {
                            hint: package_hint(&library, &needed),
                            library,
                        },
                        None => BackendError::Image(why),
                    })
                }
                (Pending::Global { name }, Err((ErrKind::MissingGlobal, _))) => {
                    Err(BackendError::MissingGlobal { name })
                }
                (Pending::Global { .. }, Err((_, why))) => Err(driver("writing a global", why)),
            };
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    fn kill(&mut self, why: &str) {
        if let Some(live) = self.live.take() {
            live.kill();
            let _ = live.wait();
        }
        self.dead = Some(format!("the host runner was killed ({why})"));
    }

    /// The runner closed the socket: reap it and say how it ended.
    fn collect_death(&mut self) -> BackendError {
        let status = self.live.take().and_then(|l| l.wait().ok());
        let err = match status {
            Some(s) if s.signal().is_some() => BackendError::Crashed {
                signal: s.signal().unwrap_or(0),
            },
            Some(s) => BackendError::RunnerExited {
                status: s.to_string(),
            },
            None => BackendError::Driver {
                op: "host runner".into(),
                reason: "the runner vanished".into(),
            },
        };
        self.dead = Some(err.to_string());
        err
    }

    /// Map the arena range here and fork a runner that inherits it (see
    /// [`process`]); `None` when this process has other threads or the
    /// range is not free here, and a runner is then executed instead (it
    /// maps the range in its own, different address-space layout, or
    /// reports what occupies it there).
    fn fork_reserved(&self, lo: u64, len: u64) -> Option<RunnerProcess> {
        if !process::single_threaded() || arena::map_fixed(lo, len).is_err() {
            return None;
        }
        let forked = RunnerProcess::fork(&self.config.env, |sock| {
            runner::serve_reserved(sock, lo, len)
        });
        // The child has its own copy of the mapping; this one is not used.
        arena::unmap(lo, len);
        forked.ok()
    }

    /// Make `live` the runner and ask it to map `[lo, lo + len)`; the reply
    /// carries what it preloaded.
    fn reserve_in(
        &mut self,
        live: RunnerProcess,
        lo: u64,
        len: u64,
    ) -> Result<Refusable<Vec<String>>, BackendError> {
        self.dead = None;
        self.live = Some(live);
        let mut m = Msg::op(Op::Reserve);
        m.u64(lo).u64(len).u64(self.needed.len() as u64);
        for n in &self.needed {
            m.bytes(n.as_bytes());
        }
        Ok(self.request(&m, None)?.map(|reply| {
            let mut f = Fields::new(&reply);
            let n = f.u64().unwrap_or(0);
            (0..n).filter_map(|_| f.string().ok()).collect()
        }))
    }

    /// Record that the live runner mapped the arena `base, size` (pages
    /// from `lo`), and how to copy into it.
    fn mapped(&mut self, base: u64, size: u64, lo: u64) -> Result<(), BackendError> {
        let vm_io = self
            .live
            .as_ref()
            .is_some_and(|l| self.vm_io_allowed(l.pid, lo));
        self.arena = Some(Arena { base, size, vm_io });
        Ok(())
    }

    /// Whether this process may copy into runner `pid` with
    /// `process_vm_*`: probed by reading the arena's first byte at `lo`.
    fn vm_io_allowed(&self, pid: libc::pid_t, lo: u64) -> bool {
        if self.config.arena_io == ArenaIo::Socket {
            return false;
        }
        let mut byte = [0u8];
        match transfer::read_remote(pid, lo, &mut byte) {
            Ok(()) => true,
            Err(e) => !transfer::is_forbidden(&e),
        }
    }

    fn elf(&self) -> Result<&elf::ElfInfo, BackendError> {
        self.elf
            .as_ref()
            .ok_or_else(|| BackendError::Image("no image loaded yet".into()))
    }

    /// The arena, with `offset..offset + len` checked to lie inside it.
    fn arena_at(&self, offset: u64, len: usize) -> Result<&Arena, BackendError> {
        let a = self.arena.as_ref().ok_or_else(|| BackendError::Driver {
            op: "arena access".into(),
            reason: "the arena was not reserved yet".into(),
        })?;
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > a.size)
        {
            return Err(BackendError::Driver {
                op: "arena access".into(),
                reason: format!(
                    "{len} bytes at offset {offset} are outside the {}-byte arena",
                    a.size
                ),
            });
        }
        Ok(a)
    }

    /// Copy `data` into the arena at `offset`.
    fn write_arena(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        let a = self.arena_at(offset, data.len())?;
        let (addr, vm_io) = (a.base + offset, a.vm_io);
        if let Some(pid) = self.live.as_ref().map(|l| l.pid).filter(|_| vm_io) {
            match transfer::write_remote(pid, addr, data) {
                Ok(()) => return Ok(()),
                Err(e) if transfer::is_forbidden(&e) => self.use_socket(),
                Err(e) => return Err(self.arena_io_error("process_vm_writev", e)),
            }
        }
        for (i, piece) in data.chunks(SOCKET_PIECE).enumerate() {
            let mut m = Msg::op(Op::Write);
            m.u64(addr + (i * SOCKET_PIECE) as u64).bytes(piece);
            if let Err((_, why)) = self.request(&m, None)? {
                return Err(driver("writing the arena", why));
            }
        }
        Ok(())
    }

    /// Copy the arena bytes at `offset` into `dst`.
    fn read_arena(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        let a = self.arena_at(offset, dst.len())?;
        let (addr, vm_io) = (a.base + offset, a.vm_io);
        if let Some(pid) = self.live.as_ref().map(|l| l.pid).filter(|_| vm_io) {
            match transfer::read_remote(pid, addr, dst) {
                Ok(()) => return Ok(()),
                Err(e) if transfer::is_forbidden(&e) => self.use_socket(),
                Err(e) => return Err(self.arena_io_error("process_vm_readv", e)),
            }
        }
        for (i, piece) in dst.chunks_mut(SOCKET_PIECE).enumerate() {
            let mut m = Msg::op(Op::Read);
            m.u64(addr + (i * SOCKET_PIECE) as u64)
                .u64(piece.len() as u64);
            match self.request(&m, None)? {
                Ok(reply) => {
                    let bytes = Fields::new(&reply)
                        .bytes()
                        .map_err(|e| driver("reading the arena", e))?;
                    if bytes.len() != piece.len() {
                        return Err(driver("reading the arena", "short reply from the runner"));
                    }
                    piece.copy_from_slice(bytes);
                }
                Err((_, why)) => return Err(driver("reading the arena", why)),
            }
        }
        Ok(())
    }

    fn use_socket(&mut self) {
        if let Some(a) = self.arena.as_mut() {
            a.vm_io = false;
        }
    }

    /// A failed copy: the runner died (report how) or the copy itself
    /// failed.
    fn arena_io_error(&mut self, op: &str, e: std::io::Error) -> BackendError {
        if e.raw_os_error() == Some(libc::ESRCH) {
            return self.collect_death();
        }
        driver(op, e)
    }
}

/// A runner's answer: the reply, or why it refused the request.
type Refusable<T> = Result<T, (ErrKind, String)>;

/// A request sent without waiting for its reply.
enum Pending {
    /// `LoadImage`: the kernel and the image's DT_NEEDED (for errors).
    Load {
        kernel: String,
        needed: Vec<String>,
    },
    Libraries,
    Global {
        name: String,
    },
    /// `Fill`: its reply carries the fill's duration or why it failed,
    /// kept for [`Backend::finish_fill`].
    Fill,
}

/// Start a runner process (its arena is not mapped yet).
fn spawn_runner(config: &HostConfig) -> Result<RunnerProcess, BackendError> {
    RunnerProcess::start(&config.runner, &config.env).map_err(|e| {
        BackendError::Unavailable(format!(
            "cannot start the host runner {}: {e}",
            config.runner.program.display()
        ))
    })
}

/// A runner started by [`prestart`] before the recording was known.
struct Spare {
    config: HostConfig,
    live: RunnerProcess,
    /// Forked from this process (else executed).
    forked: bool,
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
fn take_spare(config: &HostConfig) -> Option<Spare> {
    let mut g = SPARE.lock().ok()?;
    if g.as_ref().is_some_and(|s| &s.config == config) {
        g.take()
    } else {
        None
    }
}

fn driver(op: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::Driver {
        op: op.into(),
        reason: e.to_string(),
    }
}

impl Drop for HostBackend {
    fn drop(&mut self) {
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

    fn expect_image(&mut self, image: &[u8]) {
        // A spare that preloaded anything serves only an image known to
        // need it: not one that fails to parse (`load_image` reports
        // that), nor one with a search path of its own, through which the
        // loader could have found another file of the same soname.
        self.needed = match elf::parse(image) {
            Ok(info) if !info.search_path => info.needed,
            _ => Vec::new(),
        };
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

    fn fills_from_files(&self, len: u64) -> bool {
        self.config.arena_io == ArenaIo::Auto && fills_from_files(len)
    }

    fn start_fill(&mut self, extents: &PartExtents) -> Result<(), BackendError> {
        let base = self.arena_at(0, 0)?.base;
        let mut m = Msg::op(Op::Fill);
        m.u64(base);
        fill::encode(&mut m, extents);
        fill::encode_rebaser(&mut m, self.rebaser.as_ref());
        self.send(&m)?;
        self.pending.push(Pending::Fill);
        Ok(())
    }

    fn finish_fill(&mut self) -> Result<Result<Duration, String>, BackendError> {
        self.settle()?;
        Ok(self
            .filled
            .take()
            .unwrap_or_else(|| Err("no fill was started".into())))
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
            return Err(driver("commit_staging", "no staging window was handed out"));
        };
        let r = match buf.as_slice().get(..len) {
            Some(data) => self.write_arena(offset, data),
            None => Err(driver(
                "commit_staging",
                format!("{len} bytes exceed the {}-byte window", buf.len()),
            )),
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
                let ns = Fields::new(&reply).u64().map_err(|e| driver("launch", e))?;
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
                Err(_) => Err(driver("hashing the arena", "short reply from the runner")),
            },
            Err((_, why)) => Err(driver("hashing the arena", why)),
        }
    }

    fn runtime_libraries(&self) -> Vec<String> {
        self.libraries.clone()
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
        let bad = |e: &dyn std::fmt::Display| driver("translating the arena back", e);
        match self.request(&m, None)? {
            Ok(reply) => {
                let mut f = Fields::new(&reply);
                let n = f.u64().map_err(|e| bad(&e))?;
                f.u64().map_err(|e| bad(&e))?;
                let hash = reply
                    .get(16..48)
                    .and_then(|h| <[u8; 32]>::try_from(h).ok())
                    .ok_or_else(|| bad(&"short reply from the runner"))?;
                self.translated_hash = Some(hash);
                Ok(Some(n))
            }
            Err((_, why)) => Err(bad(&why)),
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
}
