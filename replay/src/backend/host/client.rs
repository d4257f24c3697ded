//! The host backend's client side of its runner: requests and their
//! pipelined replies, how a runner's death is reported, mapping the arena in
//! a runner, and copying bytes in and out of it (the read-back that the
//! verdict rests on is [`super::judge`]'s).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use super::judge::SharedView;
use super::libraries::{missing_library, package_hint};
use super::process::RunnerProcess;
use super::protocol::Op;
use super::protocol::{self, ErrKind, Fields, Msg};
use super::slack::Slack;
use super::{arena, elf, transfer, Arena, ArenaIo, HostBackend, HostConfig};
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
        if self.frozen {
            // It would wait for a reply forever.
            return Err(internal(
                "a request to the runner after it was stopped for the read-back",
            ));
        }
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
        if self.frozen {
            // Stopped for the read-back and not resumed (`Drop` resumes a
            // large one first): it would never answer.
            return;
        }
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

    /// Make `live` the runner and ask it to map `[lo, lo + len)` and
    /// `slack` zeroed bytes after it; the reply carries what it preloaded,
    /// what memory the arena is (kept in `arena_memory`) and the slack it
    /// mapped (kept in `slack`).
    pub(super) fn reserve_in(
        &mut self,
        live: RunnerProcess,
        lo: u64,
        len: u64,
        slack: u64,
        env: &[(std::ffi::OsString, std::ffi::OsString)],
    ) -> Result<Refusable<Vec<String>>, BackendError> {
        self.dead = None;
        self.frozen = false;
        self.shared = None;
        // Shared memory where this process may not read the runner's
        // memory (probed before anything is mapped) or when asked to: the
        // verdict's bytes must be readable here without the runner's help.
        let shared = self.config.arena_io == ArenaIo::Shared || !vm_io_allowed(live.pid);
        if shared {
            let view = live
                .arena_fd()
                .ok_or_else(|| internal("the runner was started without an arena memfd"))
                .and_then(|fd| {
                    arena::seal_shared(fd, len)
                        .and_then(|()| SharedView::map(fd, lo, len))
                        .map_err(|e| driver("sharing the arena's memory with the runner", e))
                });
            match view {
                Ok(v) => self.shared = Some(v),
                Err(e) => {
                    live.end();
                    return Err(e);
                }
            }
        }
        self.live = Some(live);
        let mut m = Msg::op(Op::Reserve);
        m.u64(lo).u64(len).u64(self.needed.len() as u64);
        for n in &self.needed {
            m.bytes(n.as_bytes());
        }
        let held = self.held.as_ref().filter(|_| !shared);
        let held = held.map(|h| h.path().as_os_str().as_bytes());
        m.bytes(held.unwrap_or_default());
        m.u64(u64::from(shared));
        m.u64(slack);
        m.u64(env.len() as u64);
        for (k, v) in env {
            m.bytes(k.as_bytes()).bytes(v.as_bytes());
        }
        let reply = self.request(&m, None)?.map(|reply| {
            let mut f = Fields::new(&reply);
            let n = f.u64().unwrap_or(0);
            let preloaded: Vec<String> = (0..n).filter_map(|_| f.string().ok()).collect();
            let memory = f.u64().ok().and_then(|b| u8::try_from(b).ok());
            // The runner's own account, for the report only: nothing is
            // read from the slack.
            let mapped = f.u64().unwrap_or(0).min(slack);
            let short = f.string().ok().filter(|s| !s.is_empty());
            let slack = Slack {
                wanted: slack,
                mapped,
                short,
            };
            (preloaded, memory.and_then(ArenaMemory::from_u8), slack)
        });
        Ok(reply.map(|(preloaded, memory, slack)| {
            self.arena_memory = memory;
            self.slack = Some(slack);
            self.slack_dirty = false;
            preloaded
        }))
    }

    /// Record that the live runner mapped the arena `base, size`.
    pub(super) fn mapped(&mut self, base: u64, size: u64) -> Result<(), BackendError> {
        self.arena = Some(Arena { base, size });
        Ok(())
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

    /// Copy `data` into the arena at `offset`: into this process' mapping
    /// of a shared arena, else with `process_vm_writev`.
    pub(super) fn write_arena(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        if self.frozen {
            return Err(internal(
                "the arena was written after the runner was stopped",
            ));
        }
        let addr = self.arena_at(offset, data.len())?.base + offset;
        if let Some(view) = &self.shared {
            return view
                .write(addr, data)
                .ok_or_else(|| internal("the arena lies outside its shared mapping"));
        }
        let pid = self.live()?.pid;
        transfer::write_remote(pid, addr, data)
            .map_err(|e| self.arena_io_error("process_vm_writev", offset, data.len(), e))
    }

    /// Copy the arena bytes at `offset` into `dst`, from the stopped runner
    /// ([`HostBackend::freeze`]): what is read back is never the runner's
    /// answer.
    pub(super) fn read_arena(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        self.arena_at(offset, dst.len())?;
        self.freeze()?;
        let addr = self.arena_at(offset, dst.len())?.base + offset;
        if let Some(view) = &self.shared {
            return view
                .read(addr, dst)
                .ok_or_else(|| internal("the arena lies outside its shared mapping"));
        }
        let pid = self.live()?.pid;
        transfer::read_remote(pid, addr, dst)
            .map_err(|e| self.arena_io_error("process_vm_readv", offset, dst.len(), e))
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

/// Whether this process may copy into and out of runner `pid` with
/// `process_vm_*`: probed before the runner maps anything, by reading its
/// address 0, which the kernel refuses with EFAULT where the call is
/// allowed (the permission check comes first) and EPERM where it is not.
fn vm_io_allowed(pid: libc::pid_t) -> bool {
    let mut byte = [0u8];
    match transfer::read_remote(pid, 0, &mut byte) {
        Ok(()) => true,
        Err(e) => !transfer::is_forbidden(&e),
    }
}
