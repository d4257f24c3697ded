//! The host backend's client side of its runner: requests and their
//! pipelined replies, how a runner's death is reported, mapping the arena in
//! a forked or executed runner, and copying bytes in and out of it.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use super::libraries::{missing_library, package_hint};
use super::process::{self, RunnerProcess};
use super::protocol::Op;
use super::protocol::{self, ErrKind, Fields, Msg};
use super::{arena, elf, runner, transfer, Arena, ArenaIo, HostBackend, HostConfig, SOCKET_PIECE};
use crate::backend::rehydrate::ArenaMemory;
use crate::backend::BackendError;

/// How long an idle runner gets to unmap its arena before it is killed
/// anyway (it answers in well under a millisecond).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

impl HostBackend {
    /// Send a request and wait for its reply (`timeout` for launches),
    /// after collecting the replies of pipelined requests.
    pub(super) fn request(
        &mut self,
        msg: &Msg,
        timeout: Option<Duration>,
    ) -> Result<Result<Vec<u8>, (ErrKind, String)>, BackendError> {
        self.settle()?;
        self.send(msg)?;
        self.receive(timeout)
    }

    pub(super) fn live(&mut self) -> Result<&mut RunnerProcess, BackendError> {
        if let Some(why) = &self.dead {
            return Err(BackendError::RunnerGone { why: why.clone() });
        }
        self.live
            .as_mut()
            .ok_or_else(|| internal("the runner was used before the arena was reserved"))
    }

    /// Send a request without waiting for its reply (replies come in order).
    pub(super) fn send(&mut self, msg: &Msg) -> Result<(), BackendError> {
        let sent = msg.send(&mut self.live()?.sock);
        sent.map_err(|_| self.collect_death())
    }

    /// Wait for the next reply.
    pub(super) fn receive(
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
                    Err(e) => Err(malformed("a request", e)),
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
    pub(super) fn settle(&mut self) -> Result<(), BackendError> {
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
                // The load's reply says how the runner confined itself.
                (Pending::Load { .. }, Ok(reply)) => {
                    let mode = crate::sandbox::env::mode_in(&self.config.env);
                    let reported = Fields::new(&reply).u64().unwrap_or(0);
                    self.sandbox = Some(crate::sandbox::narrowed(mode, reported));
                    Ok(())
                }
                (Pending::Fill, Ok(reply)) => {
                    let mut f = Fields::new(&reply);
                    self.filled = Some(match f.u64() {
                        Ok(ns) => Ok(Duration::from_nanos(ns)),
                        Err(e) => Err(format!("short reply from the runner: {e}")),
                    });
                    // Relocation: how many stored pointers the fill rebased.
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
                (Pending::Global { name }, Err((_, why))) => {
                    Err(driver(&format!("writing global `{name}`"), why))
                }
            };
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    pub(super) fn kill(&mut self, why: &str) {
        if let Some(live) = self.live.take() {
            live.kill();
            let _ = live.wait();
        }
        self.dead = Some(format!("the host runner was killed ({why})"));
    }

    /// Ask an idle runner with a large arena to unmap it before it is
    /// killed (see [`super::RELEASE_ARENA_MIN`]); best effort, and only
    /// when no reply is outstanding (a pipelined image load could hang in
    /// the image's constructors: that runner is just killed).
    pub(super) fn release_arena(&mut self) {
        let large = self
            .arena
            .as_ref()
            .is_some_and(|a| a.size >= super::RELEASE_ARENA_MIN);
        if large && self.dead.is_none() && self.live.is_some() && self.pending.is_empty() {
            let _ = self.request(&Msg::op(Op::Release), Some(RELEASE_TIMEOUT));
        }
    }

    /// The runner closed the socket: reap it and say how it ended.
    pub(super) fn collect_death(&mut self) -> BackendError {
        let status = self.live.take().and_then(|l| l.wait().ok());
        let err = match status {
            Some(s) if s.signal().is_some() => BackendError::Crashed {
                signal: s.signal().unwrap_or(0),
            },
            Some(s) => BackendError::RunnerExited {
                status: s.to_string(),
            },
            None => BackendError::RunnerGone {
                why: "the host runner vanished".into(),
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
    pub(super) fn fork_reserved(&mut self, lo: u64, len: u64) -> Option<RunnerProcess> {
        if !process::single_threaded() {
            return None;
        }
        let held = self.held.as_ref();
        let mapped = match held {
            Some(h) => arena::map_held(lo, len, h.file()),
            None => arena::map_fixed_transparent(lo, len),
        };
        if mapped.is_err() {
            return None;
        }
        let forked = RunnerProcess::fork(&self.config.env, |sock| {
            runner::serve_reserved(sock, lo, len, held.is_some())
        });
        self.arena_memory = Some(match held {
            Some(_) => ArenaMemory::Held,
            None => ArenaMemory::Transparent,
        });
        // The child has its own copy of the mapping; this one is not used.
        arena::unmap(lo, len);
        forked.ok()
    }

    /// Make `live` the runner and ask it to map `[lo, lo + len)`; the reply
    /// carries what it preloaded, and what memory the arena is (kept in
    /// `arena_memory`).
    pub(super) fn reserve_in(
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
        let held = self.held.as_ref().map(|h| h.path().as_os_str().as_bytes());
        m.bytes(held.unwrap_or_default());
        let reply = self.request(&m, None)?.map(|reply| {
            let mut f = Fields::new(&reply);
            let n = f.u64().unwrap_or(0);
            let preloaded: Vec<String> = (0..n).filter_map(|_| f.string().ok()).collect();
            let memory = f.u64().ok().and_then(|b| u8::try_from(b).ok());
            (preloaded, memory.and_then(ArenaMemory::from_u8))
        });
        Ok(reply.map(|(preloaded, memory)| {
            self.arena_memory = memory;
            preloaded
        }))
    }

    /// Record that the live runner mapped the arena `base, size` (pages
    /// from `lo`), and how to copy into it.
    pub(super) fn mapped(&mut self, base: u64, size: u64, lo: u64) -> Result<(), BackendError> {
        let vm_io = self
            .live
            .as_ref()
            .is_some_and(|l| self.vm_io_allowed(l.pid, lo));
        self.arena = Some(Arena { base, size, vm_io });
        Ok(())
    }

    /// Whether this process may copy into runner `pid` with
    /// `process_vm_*`: probed by reading the arena's first byte at `lo`.
    pub(super) fn vm_io_allowed(&self, pid: libc::pid_t, lo: u64) -> bool {
        if self.config.arena_io == ArenaIo::Socket {
            return false;
        }
        let mut byte = [0u8];
        match transfer::read_remote(pid, lo, &mut byte) {
            Ok(()) => true,
            Err(e) => !transfer::is_forbidden(&e),
        }
    }

    pub(super) fn elf(&self) -> Result<&elf::ElfInfo, BackendError> {
        self.elf
            .as_ref()
            .ok_or_else(|| BackendError::Image("no image loaded yet".into()))
    }

    /// The arena, with `offset..offset + len` checked to lie inside it.
    pub(super) fn arena_at(&self, offset: u64, len: usize) -> Result<&Arena, BackendError> {
        let a = self
            .arena
            .as_ref()
            .ok_or_else(|| internal("the arena was used before it was reserved"))?;
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > a.size)
        {
            return Err(internal(format!(
                "{len} bytes at offset {offset} are outside the {}-byte arena",
                a.size
            )));
        }
        Ok(a)
    }

    /// Copy `data` into the arena at `offset`.
    pub(super) fn write_arena(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        let a = self.arena_at(offset, data.len())?;
        let (addr, vm_io) = (a.base + offset, a.vm_io);
        if let Some(pid) = self.live.as_ref().map(|l| l.pid).filter(|_| vm_io) {
            match transfer::write_remote(pid, addr, data) {
                Ok(()) => return Ok(()),
                Err(e) if transfer::is_forbidden(&e) => self.use_socket(),
                Err(e) => {
                    return Err(self.arena_io_error("process_vm_writev", offset, data.len(), e))
                }
            }
        }
        for (i, piece) in data.chunks(SOCKET_PIECE).enumerate() {
            let at = (i * SOCKET_PIECE) as u64;
            let mut m = Msg::op(Op::Write);
            m.u64(addr + at).bytes(piece);
            if let Err((_, reason)) = self.request(&m, None)? {
                return Err(socket_copy("writing", offset + at, piece.len(), reason));
            }
        }
        Ok(())
    }

    /// Copy the arena bytes at `offset` into `dst`.
    pub(super) fn read_arena(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        let a = self.arena_at(offset, dst.len())?;
        let (addr, vm_io) = (a.base + offset, a.vm_io);
        if let Some(pid) = self.live.as_ref().map(|l| l.pid).filter(|_| vm_io) {
            match transfer::read_remote(pid, addr, dst) {
                Ok(()) => return Ok(()),
                Err(e) if transfer::is_forbidden(&e) => self.use_socket(),
                Err(e) => {
                    return Err(self.arena_io_error("process_vm_readv", offset, dst.len(), e))
                }
            }
        }
        for (i, piece) in dst.chunks_mut(SOCKET_PIECE).enumerate() {
            let at = (i * SOCKET_PIECE) as u64;
            let mut m = Msg::op(Op::Read);
            m.u64(addr + at).u64(piece.len() as u64);
            match self.request(&m, None)? {
                Ok(reply) => {
                    let bytes = Fields::new(&reply)
                        .bytes()
                        .map_err(|e| malformed("reading the arena", e))?;
                    if bytes.len() != piece.len() {
                        return Err(malformed("reading the arena", "short reply"));
                    }
                    piece.copy_from_slice(bytes);
                }
                Err((_, reason)) => {
                    return Err(socket_copy("reading", offset + at, piece.len(), reason))
                }
            }
        }
        Ok(())
    }

    pub(super) fn use_socket(&mut self) {
        if let Some(a) = self.arena.as_mut() {
            a.vm_io = false;
        }
    }

    /// A failed copy: the runner died (report how) or the copy itself
    /// failed.
    pub(super) fn arena_io_error(
        &mut self,
        op: &str,
        offset: u64,
        len: usize,
        e: std::io::Error,
    ) -> BackendError {
        if e.raw_os_error() == Some(libc::ESRCH) {
            return self.collect_death();
        }
        BackendError::ArenaCopy {
            op: op.into(),
            offset,
            len: len as u64,
            reason: e.to_string(),
        }
    }
}

/// A runner's answer: the reply, or why it refused the request.
pub(super) type Refusable<T> = Result<T, (ErrKind, String)>;

/// A request sent without waiting for its reply.
pub(super) enum Pending {
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
pub(super) fn spawn_runner(config: &HostConfig) -> Result<RunnerProcess, BackendError> {
    RunnerProcess::start(&config.runner, &config.env).map_err(|e| {
        BackendError::Unavailable(format!(
            "cannot start the host runner {}: {e}",
            config.runner.program.display()
        ))
    })
}

pub(super) fn driver(op: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::Driver {
        op: op.into(),
        reason: e.to_string(),
    }
}

/// A call out of order or outside the arena (see [`BackendError::Internal`]).
pub(super) fn internal(what: impl Into<String>) -> BackendError {
    BackendError::Internal {
        backend: "host".into(),
        what: what.into(),
    }
}

/// A reply of the runner's that does not parse.
pub(super) fn malformed(op: &str, e: impl std::fmt::Display) -> BackendError {
    BackendError::RunnerReply {
        op: op.into(),
        reason: e.to_string(),
    }
}

/// The runner refused a copy over the control socket.
fn socket_copy(dir: &str, offset: u64, len: usize, reason: String) -> BackendError {
    BackendError::ArenaCopy {
        op: format!("{dir} over the runner's control socket"),
        offset,
        len: len as u64,
        reason,
    }
}
