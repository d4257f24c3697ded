//! Starting, killing and reaping runner processes.
//!
//! A runner is this binary re-executed (`rrstore __host-runner`) or a
//! separate runner binary. The child keeps only the control socket, sends
//! its stdout to stderr (stdout belongs to rrstore), and dies with the
//! parent thread (`PR_SET_PDEATHSIG`).
//!
//! Forking without `exec` (the code already mapped and relocated) was
//! measured as an alternative: no difference in a small replay's wall time
//! (the runner's start overlaps opening the store, see `prestart`), so the
//! runner keeps a fresh process image and its own random address-space
//! layout, which the reservation retries rely on.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};

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
}

impl RunnerProcess {
    /// Start a runner with `env` added to its environment.
    pub fn start(runner: &Runner, env: &[(OsString, OsString)]) -> std::io::Result<RunnerProcess> {
        let (parent, child_end) = UnixStream::pair()?;
        let control = child_end.as_raw_fd();
        let mut cmd = Command::new(&runner.program);
        cmd.args(&runner.args)
            .arg("--control")
            .arg(control.to_string())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit());
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe calls (fcntl, dup2, prctl) on descriptors it
        // was handed.
        unsafe {
            cmd.pre_exec(move || {
                // Keep exactly this descriptor across exec (it is close-on-exec
                // in the parent, so no other child inherits it).
                if libc::fcntl(control, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Kernel output goes to stderr: stdout belongs to rrstore.
                libc::dup2(2, 1);
                // Die with the parent.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        drop(child_end);
        Ok(RunnerProcess {
            pid: child.id() as libc::pid_t,
            sock: parent,
        })
    }

    pub fn kill(&self) {
        // SAFETY: signalling our own, not yet reaped child.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
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
                return Ok(ExitStatus::from_raw(status));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Kill a runner that has nothing more to do and reap it on a background
    /// thread: its exit (unmapping libLLVM, the OpenMP runtime and the
    /// arena) then overlaps writing the history row and this process' exit
    /// instead of being waited for. Reaped here if no thread can be started.
    pub fn end(self) {
        self.kill();
        let pid = self.pid;
        let reaper = std::thread::Builder::new()
            .name("rrstore-reap-runner".into())
            .spawn(move || {
                let mut status = 0;
                // SAFETY: waits for our own child, which nothing else reaps
                // (`self` was consumed).
                unsafe { libc::waitpid(pid, &mut status, 0) };
            });
        if reaper.is_err() {
            let _ = self.wait();
        }
    }
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
}
