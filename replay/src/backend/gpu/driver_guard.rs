//! No fork after a GPU driver initialisation, and driver queries that
//! leave the forking process untouched.
//!
//! Neither the CUDA driver nor the HIP runtime survives a fork: a child
//! forked after `cuInit`/`hipInit` inherits the driver's state without its
//! threads and file descriptors' meaning, and its calls fail or hang, while
//! a replay that fell back to the parent would share one context with every
//! later replay (one faulting kernel poisons it for all). So:
//!
//! * the driver entry points note their initialisation here
//!   ([`note_driver_init`]) before they initialise anything, and every fork
//!   of a GPU child checks [`check_fork`] first: once a driver was
//!   initialised in this process, forking a GPU child is refused with a
//!   sentence (and `open_gpu` runs the backend in this process, the only
//!   place where that driver works);
//! * listing devices (`rrstore devices`, `--device`, `--devices`) runs the
//!   driver queries in a short-lived child ([`in_child`]), forked while
//!   this process is still single-threaded and driver-free, which sends
//!   back the result and exits; the listing is bounded in time like a GPU
//!   child's start ([`start_timeout`]).

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::backend::BackendError;

/// 0: no driver initialised here; else the index in [`DRIVERS`] + 1.
static INITIALISED: AtomicU8 = AtomicU8::new(0);
const DRIVERS: [&str; 3] = ["cuda", "hip", "fake"];

/// How long a driver initialisation in a child may take (the process'
/// settings: [`crate::settings::ProcessSettings::gpu_start_timeout`]).
pub fn start_timeout() -> Duration {
    crate::settings::get().gpu_start_timeout
}

/// Note that `driver` (`cuda`, `hip`; tests: `fake`) is being initialised
/// in this process: no GPU child may be forked from it afterwards.
pub fn note_driver_init(driver: &str) {
    let i = DRIVERS.iter().position(|d| *d == driver).unwrap_or(2);
    let _ = INITIALISED.compare_exchange(0, i as u8 + 1, Ordering::SeqCst, Ordering::SeqCst);
}

/// The driver initialised in this process, if any.
pub fn initialised() -> Option<&'static str> {
    match INITIALISED.load(Ordering::SeqCst) {
        0 => None,
        i => DRIVERS.get(usize::from(i) - 1).copied(),
    }
}

/// Ok when a GPU child (`what`) may be forked: no driver was initialised in
/// this process.
pub fn check_fork(what: &str) -> Result<(), BackendError> {
    match initialised() {
        None => Ok(()),
        Some(d) => Err(BackendError::Unavailable(format!(
            "cannot fork {what}: the {d} driver was initialised in this process, and a GPU \
             driver does not survive a fork (the child's calls would fail or hang); this is a bug \
             in the caller (please report it): drivers are to be initialised only in children"
        ))),
    }
}

/// Run `query` (driver calls) in a short-lived forked child and return its
/// result; in this process when no child can be forked (other threads run
/// here, or a driver was initialised here already: then the query cannot
/// make matters worse). The child is given [`start_timeout`] to answer;
/// one that does not is killed and the query fails with
/// [`BackendError::StartTimedOut`].
pub fn in_child<T: Serialize + DeserializeOwned>(
    backend: &str,
    query: impl FnOnce() -> Result<T, BackendError>,
) -> Result<T, BackendError> {
    if initialised().is_some() || !crate::backend::host::process::single_threaded() {
        return query();
    }
    let mut fds = [0; 2];
    // SAFETY: writes two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return query();
    }
    // SAFETY: both descriptors were just made and are owned here only.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: this process runs one thread (checked above), so the child
    // is a complete copy that may run any code; it leaves through _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return query();
    }
    if pid == 0 {
        drop(read);
        // SAFETY: plain system calls; the child ends with _exit and never
        // returns into the caller.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        let json = serde_json::to_vec(&query()).unwrap_or_default();
        let mut at = 0;
        while at < json.len() {
            // SAFETY: writes from a live buffer to our pipe end.
            let n = unsafe {
                libc::write(
                    write.as_raw_fd(),
                    json[at..].as_ptr() as *const libc::c_void,
                    json.len() - at,
                )
            };
            if n <= 0 {
                break;
            }
            at += n as usize;
        }
        // SAFETY: ends the child without the parent's exit handlers.
        unsafe { libc::_exit(0) };
    }
    drop(write);
    let limit = start_timeout();
    let answer = read_within(read, limit);
    let ended = |pid| {
        let mut status = 0;
        // SAFETY: reaps our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
    };
    match answer {
        Some(bytes) => {
            ended(pid);
            serde_json::from_slice::<Result<T, BackendError>>(&bytes).unwrap_or_else(|e| {
                Err(BackendError::RunnerReply {
                    op: format!("the {backend} device listing"),
                    reason: e.to_string(),
                })
            })
        }
        None => {
            // SAFETY: our own child, not reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            ended(pid);
            Err(BackendError::StartTimedOut {
                backend: backend.to_string(),
                waited: limit,
            })
        }
    }
}

/// Everything until end of file on `fd`, or `None` when it takes longer
/// than `limit`.
fn read_within(fd: OwnedFd, limit: Duration) -> Option<Vec<u8>> {
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    let mut file = std::fs::File::from(fd);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut p = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r == 0 {
            return None;
        }
        if r < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return None;
        }
        let mut buf = [0u8; 65536];
        match file.read(&mut buf) {
            Ok(0) => return Some(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Some(out),
        }
    }
}
