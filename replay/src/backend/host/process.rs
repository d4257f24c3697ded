//! Starting, stopping, killing and reaping runner processes.
//!
//! A host runner is always **executed** ([`RunnerProcess::start`]): this
//! binary re-executed (`rrstore __host-runner`) or a separate runner
//! binary, which maps the arena itself. Never forked from rrstore: a
//! forked child is a copy of rrstore's memory (the store's manifests with
//! the recorded output hashes, configuration, the original environment on
//! its stack, where `/proc/self/environ` shows it) and foreign code runs in
//! the runner (docs/security.md, "The trust boundary"). Its start-up
//! (about 1.5 ms: `exec`, the dynamic loader, relocations) overlaps opening
//! the store when it is started early (`prestart`), and its fresh
//! address-space layout is what the reservation retries rely on when the
//! range collides with a mapping. [`RunnerProcess::fork`] remains for the
//! GPU child, which runs no foreign host code.
//!
//! Either way the child keeps only the control socket, its arena memfd
//! (see [`RunnerProcess::arena_fd`]) and the standard streams, dies with
//! the parent thread (`PR_SET_PDEATHSIG`), leads a process group of its own
//! (killed with it), and starts with the environment and scratch directory
//! of [`crate::sandbox::env`]; its stdout and stderr go to a [`Capture`]
//! the parent reads when it ends (stdout belongs to rrstore). It confines
//! itself before it runs foreign code ([`crate::sandbox::Prepared`]).
//! When the parent has what it needs from the kernel it stops the runner
//! ([`RunnerProcess::stop`]) before it reads the arena: nothing of the
//! image runs while the verdict's bytes are read.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};

use crate::sandbox::{self, output::Capture, RunnerStart};

/// How to start a runner process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runner {
    pub program: PathBuf,
    /// Arguments before `--control FD`.
    pub args: Vec<OsString>,
}

/// A started runner: its pid and the parent's end of the control socket.
pub struct RunnerProcess {
    pub pid: libc::pid_t,
    pub sock: UnixStream,
    /// Its stdout and stderr, collected when it is killed or waited for.
    output: Capture,
    /// Its scratch directory (made by the runner), removed with it.
    scratch: Option<PathBuf>,
    /// The parent's descriptor of the memfd the runner was handed as
    /// `--arena-fd` (executed runners only): the arena when it must be
    /// memory both sides map (`ArenaMemory::Shared`).
    arena_fd: Option<OwnedFd>,
}

/// How a stopped runner was found ([`RunnerProcess::stop`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Stopped (SIGSTOP): none of its threads runs until it is killed.
    Stopped,
    /// It had already ended (not reaped yet: [`RunnerProcess::wait`] says
    /// how).
    Ended,
}

impl RunnerProcess {
    /// Start a runner with `env` added to its environment.
    pub fn start(runner: &Runner, env: &[(OsString, OsString)]) -> std::io::Result<RunnerProcess> {
        reap_ended();
        let RunnerStart {
            output,
            scratch_base,
            env,
        } = RunnerStart::new(env)?;
        let (parent, child_end) = UnixStream::pair()?;
        let control = child_end.as_raw_fd();
        let arena_fd = super::arena::create_sealable_memfd("rrstore-arena")?;
        let arena = arena_fd.as_raw_fd();
        let mut cmd = Command::new(&runner.program);
        cmd.args(&runner.args)
            .arg("--control")
            .arg(control.to_string())
            .arg("--arena-fd")
            .arg(arena.to_string())
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(output.file()?)
            .stderr(output.file()?)
            .process_group(0);
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe calls (fcntl, prctl) on descriptors it was
        // handed.
        unsafe {
            cmd.pre_exec(move || {
                // Keep exactly these descriptors across exec (they are
                // close-on-exec in the parent, so no other child inherits
                // them).
                for fd in [control, arena] {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                // Die with the parent.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        drop(child_end);
        let pid = child.id() as libc::pid_t;
        Ok(RunnerProcess {
            pid,
            sock: parent,
            output,
            scratch: scratch_base.map(|b| sandbox::env::scratch_for(&b, pid)),
            arena_fd: Some(arena_fd),
        })
    }

    /// Fork a runner from this process, which must be single-threaded
    /// (see [`single_threaded`]), and run `serve` on the child's end of the
    /// control socket in the child, which exits with its return value and
    /// never returns here. `env` is added to the child's environment before
    /// `serve` runs (before anything reads it: nothing is loaded yet).
    pub fn fork(
        env: &[(OsString, OsString)],
        serve: impl FnOnce(UnixStream) -> i32,
    ) -> std::io::Result<RunnerProcess> {
        reap_ended();
        let RunnerStart {
            output,
            scratch_base,
            env,
        } = RunnerStart::new(env)?;
        let out = output.fd();
        let (parent_end, child_end) = UnixStream::pair()?;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the caller checked that this process runs one thread, so
        // the child is a complete copy that may run any code (no lock can
        // be held by a thread that does not exist in it).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid == 0 {
            drop(parent_end);
            let control = child_end.as_raw_fd();
            // SAFETY: plain system calls on descriptors of this process;
            // the descriptors closed here belong to objects of the parent's
            // that the child never uses again (it leaves through `_exit`,
            // which runs no destructor).
            unsafe {
                // Die with the parent, and at once if it is already gone.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    libc::_exit(0);
                }
                // Kernel output goes to the capture: stdout belongs to
                // rrstore. A group of its own: killed with it.
                libc::dup2(out, 1);
                libc::dup2(out, 2);
                libc::setpgid(0, 0);
                // Keep only the standard streams and the control socket
                // (the store's files stay with the parent).
                let max = libc::c_uint::MAX;
                let fd = control as libc::c_uint;
                if fd > 3 {
                    libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, fd - 1, 0);
                }
                libc::syscall(libc::SYS_close_range, fd + 1, max, 0);
            }
            sandbox::env::replace_here(&env);
            let code = serve(child_end);
            // SAFETY: ends the child without running the parent's exit
            // handlers or flushing buffers copied from the parent.
            unsafe { libc::_exit(code) }
        }
        // Linux queues a forked child on its parent's CPU, where it waits
        // until the parent blocks or is preempted (about 1 ms into a replay
        // here, at the first request to the runner) unless an idle CPU
        // pulls it first. The runner's first job, loading the OpenMP
        // runtime, is a small replay's critical path and the parent's next
        // steps (arguments, index, manifest) are not: yield so the child
        // starts now. Where the child already runs elsewhere this returns
        // at once.
        std::thread::yield_now();
        drop(child_end);
        Ok(RunnerProcess {
            pid,
            sock: parent_end,
            output,
            scratch: scratch_base.map(|b| sandbox::env::scratch_for(&b, pid)),
            arena_fd: None,
        })
    }

    /// The memfd handed to an executed runner as `--arena-fd` (empty and
    /// sealable until the parent sizes and seals it:
    /// [`super::arena::seal_shared`]).
    pub fn arena_fd(&self) -> Option<&OwnedFd> {
        self.arena_fd.as_ref()
    }

    /// Stop the runner (SIGSTOP, to it and its group) and wait until every
    /// thread of it has stopped, or until it is found ended. A stopped
    /// runner runs nothing more of the image: what the parent then reads
    /// of its arena is what the kernel left, and stays so. It is not
    /// reaped here (`waitid` with `WNOWAIT`), so [`kill`](Self::kill),
    /// [`wait`](Self::wait) and [`end`](Self::end) work as before.
    pub fn stop(&self) -> std::io::Result<Stopped> {
        // SAFETY: signalling our own, not yet reaped child and its group.
        unsafe {
            libc::kill(self.pid, libc::SIGSTOP);
            libc::kill(-self.pid, libc::SIGSTOP);
        }
        loop {
            // SAFETY: a zeroed siginfo_t is a valid out-parameter.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waits on our own child; WNOWAIT leaves its state to
            // be collected again by `wait`.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    self.pid as libc::id_t,
                    &mut info,
                    libc::WSTOPPED | libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 {
                return Ok(match info.si_code {
                    libc::CLD_STOPPED | libc::CLD_TRAPPED => Stopped::Stopped,
                    _ => Stopped::Ended,
                });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Kill the runner (SIGKILL). A runner resident in at most
    /// [`IDLE_TEARDOWN_MAX_RESIDENT`] bytes has its threads moved to
    /// `SCHED_IDLE` first: a killed runner's teardown (unmapping the OpenMP
    /// runtime and the arena: ~1 ms of CPU after a small replay) otherwise
    /// preempts this process while it records and prints the result, and
    /// the next replay while it loads the runtime. It then runs on CPUs
    /// that are idle; [`reap_ended`] still waits for it before the next
    /// runner. A larger runner tears down at its own priority, so that its
    /// memory is returned promptly on a machine whose every core is busy.
    pub fn kill(&self) {
        idle_teardown(self.pid, IDLE_TEARDOWN_MAX_RESIDENT);
        // SAFETY: signalling our own, not yet reaped child, and the group
        // it leads (what it started, where it could start anything).
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::kill(-self.pid, libc::SIGKILL);
        }
        self.output.collect();
        self.scratch
            .iter()
            .for_each(|d| sandbox::env::remove_scratch(d));
    }

    /// Let a stopped runner run again (SIGCONT, to it and its group): once
    /// rrstore has read what it needs, so that an idle runner can still
    /// unmap its arena on request before it is killed
    /// (`HostBackend::release_arena`).
    pub fn resume(&self) {
        // SAFETY: signalling our own, not yet reaped child and its group.
        unsafe {
            libc::kill(self.pid, libc::SIGCONT);
            libc::kill(-self.pid, libc::SIGCONT);
        }
    }

    /// Wait for the runner to end and return how it ended.
    pub fn wait(self) -> std::io::Result<ExitStatus> {
        drop(self.sock);
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child, reaped only here or by
            // `end` (both consume `self`).
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r == self.pid {
                self.output.collect();
                self.scratch
                    .iter()
                    .for_each(|d| sandbox::env::remove_scratch(d));
                return Ok(ExitStatus::from_raw(status));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Kill a runner that has nothing more to do without waiting for it:
    /// its exit (unmapping libLLVM, the OpenMP runtime and the arena)
    /// overlaps writing the history row and this process' exit. It is
    /// reaped when the next runner starts ([`reap_ended`]), or by init once
    /// this process exits; no thread is started for it, so the process
    /// stays single-threaded and its next runner can be forked.
    pub fn end(self) {
        self.kill();
        match ENDED.lock() {
            Ok(mut ended) => ended.push(self.pid),
            Err(_) => {
                let _ = self.wait();
            }
        }
    }
}

/// See [`RunnerProcess::kill`].
pub const IDLE_TEARDOWN_MAX_RESIDENT: u64 = 1 << 30;

/// Lower process `pid` to `SCHED_IDLE` ([`idle_threads`]) if it is resident
/// in at most `max_resident` bytes; returns whether it did.
fn idle_teardown(pid: libc::pid_t, max_resident: u64) -> bool {
    let small = resident_bytes(pid).is_some_and(|r| r <= max_resident);
    if small {
        idle_threads(pid);
    }
    small
}

/// Resident memory of process `pid` (`/proc/PID/statm`), if readable.
fn resident_bytes(pid: libc::pid_t) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// Move every thread of process `pid` to the `SCHED_IDLE` policy (best
/// effort: threads that start meanwhile, or a missing `/proc`, are left).
fn idle_threads(pid: libc::pid_t) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    let param = libc::sched_param { sched_priority: 0 };
    for tid in tasks
        .flatten()
        .filter_map(|t| t.file_name().to_str()?.parse().ok())
    {
        // SAFETY: a thread of our own child; `param` is a valid struct for
        // the call. Lowering a policy needs no privilege.
        unsafe { libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param) };
    }
}

/// Runners killed by [`RunnerProcess::end`] and not reaped yet.
static ENDED: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

/// Reap the runners [`RunnerProcess::end`] killed, so that a process
/// replaying many recordings does not collect zombies. They were killed
/// with SIGKILL, so this waits at most for their teardown.
pub fn reap_ended() {
    let pids = match ENDED.lock() {
        Ok(mut ended) => std::mem::take(&mut *ended),
        Err(_) => return,
    };
    for pid in pids {
        let mut status = 0;
        // SAFETY: waits for our own child, which nothing else reaps (its
        // `RunnerProcess` was consumed by `end`).
        unsafe { libc::waitpid(pid, &mut status, 0) };
    }
}

/// Whether this process runs exactly one thread (`/proc/self/stat`), so
/// that a child forked from it may run any code. False when unknown.
pub fn single_threaded() -> bool {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return false;
    };
    // The fields after the command name, which may itself hold spaces and
    // parentheses; `num_threads` is the 20th field, the 18th after it.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(17))
        == Some("1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_report_signals_and_exit_codes() {
        let r = Runner {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "exit 3".into()],
        };
        // `sh -c 'exit 3' --control N`: the extra arguments are ignored.
        let p = RunnerProcess::start(&r, &[]).unwrap();
        assert_eq!(p.wait().unwrap().code(), Some(3));
        let r = Runner {
            args: vec!["-c".into(), "sleep 30".into()],
            ..r
        };
        let p = RunnerProcess::start(&r, &[]).unwrap();
        p.kill();
        assert_eq!(p.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    /// What [`child`] asks of the test binary it executes: hold two
    /// threads, or 64 MiB of touched memory, then sleep until killed.
    const CHILD_ENV: &str = "RRSTORE_TEST_PROCESS_CHILD";

    /// Not a test of its own: the body of the child that [`child`]
    /// executes (this test binary, this test alone, on libtest's only
    /// thread). A child *forked* from the test harness could deadlock
    /// before it got there: another test thread may hold std's environment
    /// lock at the fork, and [`RunnerProcess::fork`] rewrites the
    /// environment (it requires a single-threaded parent, which libtest is
    /// not). Executing a fresh process has no such state to inherit.
    #[test]
    #[ignore = "run by the tests below as their child process"]
    fn process_child() {
        match std::env::var(CHILD_ENV).as_deref() {
            Ok("threads") => {
                let _t =
                    std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(60)));
                std::thread::sleep(std::time::Duration::from_secs(60));
            }
            Ok("memory") => {
                let held = vec![1u8; 64 << 20];
                std::thread::sleep(std::time::Duration::from_secs(60));
                drop(std::hint::black_box(held));
            }
            _ => {}
        }
    }

    /// This test binary executed as [`process_child`] doing `what`.
    fn child(what: &str) -> std::process::Child {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "backend::host::process::tests::process_child",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(CHILD_ENV, what)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Wait up to 20 s for `ready` of the child's state.
    fn wait_for(ready: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !ready() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn idle_threads_lowers_every_thread_of_a_child() {
        // A child with several threads, like a runner after a launch.
        let mut c = child("threads");
        let pid = c.id() as libc::pid_t;
        let tids = || -> Vec<libc::pid_t> {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .map(|d| {
                    d.filter_map(|t| t.ok()?.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        wait_for(|| tids().len() >= 2);
        let tids = tids();
        assert!(
            tids.len() >= 2,
            "the child should run two threads: {tids:?}"
        );
        // SAFETY: querying threads of our own child.
        let policy = |tid| unsafe { libc::sched_getscheduler(tid) };
        assert!(tids.iter().all(|&t| policy(t) == libc::SCHED_OTHER));
        idle_threads(pid);
        assert!(tids.iter().all(|&t| policy(t) == libc::SCHED_IDLE));
        c.kill().unwrap();
        assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn only_a_small_runner_tears_down_at_idle_priority() {
        // A child resident in at least 64 MiB (touched), then idle.
        let mut c = child("memory");
        let pid = c.id() as libc::pid_t;
        wait_for(|| resident_bytes(pid).unwrap_or(0) >= 64 << 20);
        // SAFETY: querying our own child.
        let policy = || unsafe { libc::sched_getscheduler(pid) };
        assert!(
            !idle_teardown(pid, 32 << 20),
            "64 MiB is over a 32 MiB limit"
        );
        assert_eq!(policy(), libc::SCHED_OTHER);
        assert!(idle_teardown(pid, 1 << 30), "64 MiB is under a 1 GiB limit");
        assert_eq!(policy(), libc::SCHED_IDLE);
        c.kill().unwrap();
        assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGKILL));
    }
}
