//! What runners print, kept apart from what rrstore prints.
//!
//! A runner's stdout and stderr are one memfd ([`Capture`]) that the parent
//! reads when the runner has ended and appends to the buffer of ended
//! runners' output of the thread that ended it; at the end of each replay
//! the engine moves what is there into the replay's report ([`RunnerOutput`],
//! `ReplayReport::runner_output`; a regression command's runs carry it on),
//! and the command shows it as the kernel's output, prefixed, before its
//! own verdict. The runner never writes to rrstore's terminal, so nothing
//! it prints can pass for rrstore's lines.
//!
//! The buffer is per thread because a replay's runners are started and
//! ended on the thread that runs the replay, and parallel lanes
//! (`check --jobs N`, `regress::lanes`) run their replays on threads of
//! their own: a process-wide buffer gave one lane's replay the lines of
//! another lane's runner that happened to end first.

use std::cell::RefCell;
use std::fs::File;
use std::io::Seek;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::FileExt;

/// At most this much of all runners' output is kept (the rest is counted).
pub const KEPT_MAX: usize = 1 << 20;
/// A runner's output file may grow to this size; a write past it fails
/// (`RLIMIT_FSIZE`, set by the confinement) and `SIGXFSZ` ends the runner.
pub const FILE_MAX: u64 = 64 << 20;

struct Kept {
    bytes: Vec<u8>,
    dropped: u64,
}

thread_local! {
    /// What the runners this thread ended printed, not taken yet.
    static KEPT: RefCell<Kept> = const {
        RefCell::new(Kept {
            bytes: Vec::new(),
            dropped: 0,
        })
    };
}

/// A runner's standard output and error.
#[derive(Debug)]
pub struct Capture(File);

impl Capture {
    pub fn new() -> std::io::Result<Capture> {
        // SAFETY: a NUL-terminated name and valid flags.
        let fd =
            unsafe { libc::memfd_create(c"rrstore-runner-output".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        Ok(Capture(unsafe { File::from_raw_fd(fd) }))
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    pub fn file(&self) -> std::io::Result<File> {
        self.0.try_clone()
    }

    /// Append what the runner wrote to this thread's buffer.
    pub fn collect(&self) {
        let len = self.0.metadata().map(|m| m.len()).unwrap_or(0);
        if len == 0 {
            return;
        }
        // Nothing to keep it in once the thread is being torn down.
        let _ = KEPT.try_with(|kept| self.collect_into(&mut kept.borrow_mut(), len));
    }

    fn collect_into(&self, kept: &mut Kept, len: u64) {
        let room = KEPT_MAX.saturating_sub(kept.bytes.len()) as u64;
        let n = len.min(room) as usize;
        let mut buf = vec![0; n];
        let read = self.0.read_at(&mut buf, 0).unwrap_or(0);
        buf.truncate(read);
        kept.bytes.extend_from_slice(&buf);
        kept.dropped += len - read as u64;
        // Once read, cleared: a runner's output is shown once.
        let _ = self.0.set_len(0);
        let _ = (&self.0).seek(std::io::SeekFrom::Start(0));
    }
}

/// What runners printed: the bytes kept, and how many were left out (over
/// [`KEPT_MAX`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunnerOutput {
    pub bytes: Vec<u8>,
    pub dropped: u64,
}

impl RunnerOutput {
    /// Everything the runners this thread ended printed since its last
    /// call: the engine takes it at the end of each replay, on the
    /// replay's thread, so replays running in other threads at once
    /// (`check --jobs`) keep their own lines.
    pub fn take() -> RunnerOutput {
        KEPT.try_with(|k| {
            let mut k = k.borrow_mut();
            RunnerOutput {
                bytes: std::mem::take(&mut k.bytes),
                dropped: std::mem::take(&mut k.dropped),
            }
        })
        .unwrap_or_default()
    }

    /// Whether nothing was printed.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.dropped == 0
    }

    /// Add `other` after this output (at most [`KEPT_MAX`] bytes kept).
    pub fn append(&mut self, other: &RunnerOutput) {
        let room = KEPT_MAX.saturating_sub(self.bytes.len());
        let n = other.bytes.len().min(room);
        self.bytes.extend_from_slice(&other.bytes[..n]);
        self.dropped += other.dropped + (other.bytes.len() - n) as u64;
    }
}

/// `out` as lines each starting with `prefix`, for a terminal: control
/// characters other than tab become `?` (a recording cannot move the
/// cursor over rrstore's lines either).
pub fn prefixed(out: &[u8], prefix: &str) -> String {
    let text = String::from_utf8_lossy(out);
    let mut s = String::new();
    for line in text.lines() {
        s.push_str(prefix);
        s.extend(
            line.chars()
                .map(|c| if c.is_control() && c != '\t' { '?' } else { c }),
        );
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two lanes: lane A's runner ends (its capture is collected) while
    /// lane B's replay is about to take its output; B must get none of A's
    /// lines, and A all of them. A process-wide buffer gave them to B.
    #[test]
    fn a_replay_takes_only_what_its_own_thread_collected() {
        use std::io::Write;
        use std::sync::mpsc;
        let (collected, wait_collected) = mpsc::channel();
        let (taken, wait_taken) = mpsc::channel();
        let a = std::thread::spawn(move || {
            let c = Capture::new().unwrap();
            c.file().unwrap().write_all(b"lane A's kernel\n").unwrap();
            c.collect();
            collected.send(()).unwrap();
            wait_taken.recv().unwrap();
            RunnerOutput::take()
        });
        let b = std::thread::spawn(move || {
            wait_collected.recv().unwrap();
            let c = Capture::new().unwrap();
            c.file().unwrap().write_all(b"lane B's kernel\n").unwrap();
            c.collect();
            let mine = RunnerOutput::take();
            taken.send(()).unwrap();
            mine
        });
        let b = b.join().unwrap();
        let a = a.join().unwrap();
        assert_eq!(String::from_utf8_lossy(&b.bytes), "lane B's kernel\n");
        assert_eq!(String::from_utf8_lossy(&a.bytes), "lane A's kernel\n");
    }

    #[test]
    fn prefixes_lines_and_defuses_control_characters() {
        let s = prefixed(b"VERIFIED\n\x1b[1A\rOK\n", "  kernel| ");
        assert_eq!(s, "  kernel| VERIFIED\n  kernel| ?[1A?OK\n");
    }
}
