//! Held arena memory (the arena cache): files on tmpfs that keep a host
//! arena's pages between replays, for virtual machines whose host takes
//! back guest memory once it is free.
//!
//! Why: on such a machine (virtio free page reporting, see [`super::memory`])
//! the memory a runner frees when it exits is handed back to the host
//! within seconds, and the next replay's fresh arena pays a host page
//! fault per 4 KiB on its first touch: a 64 MiB fill at 0.3-0.7 GB/s
//! instead of 5 (issue 24, BENCHMARKS.md). A tmpfs file's pages are never
//! free, so never reported: a runner that maps the file (`MAP_SHARED`) at
//! the arena's address finds its pages there and only builds its page
//! tables (`MADV_POPULATE_READ`, see `arena::populate`). A huge page pool does the same better
//! (2 MiB pages) but needs root; this needs nothing, and holds at most the
//! configured limit, visibly (`rrstore devices`), until the files are
//! removed (the limit set to 0 removes them at the next replay).
//!
//! Invariants, relied on by [`HeldArenas::acquire`] and the runner:
//! * A slot (a file `arena-N` in the directory) serves one backend at a
//!   time: its [`Held`] holds an exclusive `flock` on it until dropped,
//!   which the backend does only after its runner is gone. Only slots
//!   nobody holds are handed out, grown or removed.
//! * Slots are listed, created, grown and removed only under an exclusive
//!   `flock` of the directory, so concurrent acquisitions keep the sum of
//!   the slots' sizes within the limit.
//! * The directory is this user's own: owned by the effective uid, mode
//!   0700, not a symbolic link, on tmpfs or ramfs (never a disk).
//! * A slot handed out has all its pages allocated (`fallocate`): a full
//!   tmpfs fails here, never with a SIGBUS in the runner.
//! * Bytes the last replay left never reach the next one: a fill writes
//!   every byte of the recorded arena, and the runner zeroes the first and
//!   last page before it (the rest of those pages is the page rounding).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The variable `rrstore` sets [`HeldArenas::dir`] from (named in the
/// errors that ask for another directory; this crate does not read it).
pub const DIR_ENV: &str = "RRSTORE_ARENA_CACHE_DIR";

const SLOT_PREFIX: &str = "arena-";
const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// The arena cache's setting: at most `limit` bytes held (0: none, and the
/// slots left from before are removed), in `dir` (default [`default_dir`];
/// `rrstore` sets it from `RRSTORE_ARENA_CACHE_DIR`: any directory of this
/// user's on tmpfs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeldArenas {
    pub limit: u64,
    pub dir: Option<PathBuf>,
}

/// Why the arena cache could not be used (a replay then maps fresh memory).
#[derive(Debug, thiserror::Error)]
pub enum HeldError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "{} is not a directory of this user's alone (owner uid {uid}, mode {mode:o}, a symbolic link: {link}): remove it, or name another with {DIR_ENV}",
        path.display()
    )]
    NotPrivate {
        path: PathBuf,
        uid: u32,
        mode: u32,
        link: bool,
    },
    #[error(
        "{} is not on tmpfs: held arena memory must not be a disk's; name a tmpfs directory with {DIR_ENV}",
        path.display()
    )]
    NotMemory { path: PathBuf },
    #[error(
        "no place for held arena memory: neither $XDG_RUNTIME_DIR nor /dev/shm is on tmpfs; name a tmpfs directory with {DIR_ENV}"
    )]
    NoDir,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> HeldError + '_ {
    move |source| HeldError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A slot held for one backend: the file its runner maps, locked until
/// this is dropped.
#[derive(Debug)]
pub struct Held {
    file: File,
    path: PathBuf,
}

impl Held {
    /// The slot's file, which the runner opens and maps.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open, locked file (the fork path maps it in the parent).
    pub fn file(&self) -> &File {
        &self.file
    }
}

/// What the cache holds now (`rrstore devices`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub dir: PathBuf,
    pub slots: u64,
    /// Bytes of memory the slots hold (allocated, not just their length).
    pub bytes: u64,
    /// Slots some replay holds right now.
    pub in_use: u64,
}

/// `$XDG_RUNTIME_DIR/rrstore-arenas` where that directory is on tmpfs
/// (per-user, removed at logout), else `/dev/shm/rrstore-arenas-UID`
/// (a configured [`HeldArenas::dir`] overrides both).
pub fn default_dir() -> Option<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty());
    if let Some(r) = runtime.map(PathBuf::from) {
        if in_memory(&r).unwrap_or(false) {
            return Some(r.join("rrstore-arenas"));
        }
    }
    let shm = Path::new("/dev/shm");
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    in_memory(shm)
        .unwrap_or(false)
        .then(|| shm.join(format!("rrstore-arenas-{uid}")))
}

/// Whether `path` is on tmpfs or ramfs.
fn in_memory(path: &Path) -> io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: an all-zero statfs is a valid value for the call to fill.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` is writable for the call.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let t = st.f_type as i64;
    Ok(t == TMPFS_MAGIC || t == RAMFS_MAGIC)
}

/// The directory, checked and locked (shared or exclusive) for as long as
/// this lives.
struct Dir {
    path: PathBuf,
    _lock: File,
}

impl Dir {
    /// Open (`create`: making it, mode 0700) and lock the directory; `None`
    /// when it is not there and not to be made.
    fn open(path: &Path, create: bool, exclusive: bool) -> Result<Option<Dir>, HeldError> {
        if create {
            match fs::DirBuilder::new().mode(0o700).create(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(path)(e)),
            }
        }
        let meta = match fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(path)(e)),
        };
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let link = meta.file_type().is_symlink();
        if link || !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
            return Err(HeldError::NotPrivate {
                path: path.to_path_buf(),
                uid: meta.uid(),
                mode: meta.mode() & 0o7777,
                link,
            });
        }
        if !in_memory(path).map_err(io_err(path))? {
            return Err(HeldError::NotMemory {
                path: path.to_path_buf(),
            });
        }
        let lock = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(io_err(path))?;
        let how = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        flock(&lock, how).map_err(io_err(path))?;
        Ok(Some(Dir {
            path: path.to_path_buf(),
            _lock: lock,
        }))
    }

    /// Every slot, each locked (`file` set) if nobody held it.
    fn slots(&self) -> Result<Vec<Slot>, HeldError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.path).map_err(io_err(&self.path))? {
            let entry = entry.map_err(io_err(&self.path))?;
            let name = entry.file_name();
            let Some(n) = name
                .to_str()
                .and_then(|s| s.strip_prefix(SLOT_PREFIX))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let path = entry.path();
            let file = match open_slot(&path, false) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&path)(e)),
            };
            let meta = file.metadata().map_err(io_err(&path))?;
            let free = flock(&file, libc::LOCK_EX | libc::LOCK_NB).is_ok();
            out.push(Slot {
                n,
                path,
                size: meta.len(),
                allocated: meta.blocks() * 512,
                file: free.then_some(file),
            });
        }
        out.sort_by_key(|s| s.n);
        Ok(out)
    }
}

struct Slot {
    n: u32,
    path: PathBuf,
    size: u64,
    allocated: u64,
    /// Open and locked by us: nobody held it.
    file: Option<File>,
}

fn open_slot(path: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn flock(f: &File, how: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor `f` owns; no memory is involved.
    if unsafe { libc::flock(f.as_raw_fd(), how) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Give `file` at least `len` bytes, every page allocated: a tmpfs without
/// room fails here (ENOSPC) rather than in the runner's first touch.
fn allocate(file: &File, len: u64) -> io::Result<()> {
    let n = libc::off_t::try_from(len).map_err(io::Error::other)?;
    // SAFETY: fallocate on a descriptor `file` owns; mode 0 only allocates
    // and extends.
    match unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, n) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

impl HeldArenas {
    /// The directory the slots are in (configured, else [`default_dir`]).
    pub fn dir(&self) -> Option<PathBuf> {
        self.dir.clone().or_else(default_dir)
    }

    /// A slot of at least `len` bytes, or `None` when the cache is off or
    /// `len` does not fit the limit beside the slots other replays hold
    /// (then fresh memory serves, as without a cache). Slots nobody holds
    /// are removed as needed to make room, and all of them once the limit
    /// is 0.
    pub fn acquire(&self, len: u64) -> Result<Option<Held>, HeldError> {
        let Some(path) = self.dir() else {
            return if self.limit == 0 {
                Ok(None)
            } else {
                Err(HeldError::NoDir)
            };
        };
        let Some(dir) = Dir::open(&path, self.limit > 0, true)? else {
            return Ok(None);
        };
        let slots = dir.slots()?;
        let held: u64 = slots
            .iter()
            .filter(|s| s.file.is_none())
            .map(|s| s.size)
            .sum();
        let (mut free, busy): (Vec<Slot>, Vec<Slot>) =
            slots.into_iter().partition(|s| s.file.is_some());
        let fits = len > 0 && held.saturating_add(len) <= self.limit;
        // The slot to use: the smallest free one that is large enough,
        // else the largest free one (grown), else a new one.
        free.sort_by_key(|s| std::cmp::Reverse(s.size));
        let pick = if !fits {
            None
        } else if let Some(i) = free.iter().rposition(|s| s.size >= len) {
            Some(free.remove(i))
        } else if !free.is_empty() {
            Some(free.remove(0))
        } else {
            None
        };
        // A slot left larger than the limit now allows is cut back to `len`.
        let size = match &pick {
            Some(s) if held.saturating_add(s.size) > self.limit => len,
            Some(s) => s.size.max(len),
            None => len,
        };
        // Make room: remove free slots, the largest first, until the rest
        // and this one fit (all of them when nothing is to be held).
        let mut kept: u64 = free.iter().map(|s| s.size).sum();
        let want = if fits { held + size } else { held };
        for s in &free {
            if want.saturating_add(kept) <= self.limit {
                break;
            }
            match fs::remove_file(&s.path) {
                Ok(()) => kept -= s.size,
                Err(e) if e.kind() == io::ErrorKind::NotFound => kept -= s.size,
                Err(e) => return Err(io_err(&s.path)(e)),
            }
        }
        if !fits {
            return Ok(None);
        }
        let (file, path, old) = match pick {
            Some(Slot {
                file: Some(file),
                path,
                size,
                allocated,
                ..
            }) => (file, path, Some((size, allocated))),
            _ => {
                let taken: Vec<u32> = busy.iter().chain(free.iter()).map(|s| s.n).collect();
                let n = (0u32..).find(|n| !taken.contains(n)).unwrap_or(u32::MAX);
                let path = dir.path.join(format!("{SLOT_PREFIX}{n}"));
                let file = open_slot(&path, true).map_err(io_err(&path))?;
                flock(&file, libc::LOCK_EX | libc::LOCK_NB).map_err(io_err(&path))?;
                (file, path, None)
            }
        };
        if old.is_some_and(|(was, _)| was > size) {
            file.set_len(size).map_err(io_err(&path))?;
        }
        if old.is_none_or(|(was, allocated)| was < size || allocated < size) {
            if let Err(e) = allocate(&file, size) {
                // Back to what it was (a new slot: gone), and fresh memory.
                match old {
                    Some((was, _)) => {
                        let _ = file.set_len(was);
                    }
                    None => {
                        let _ = fs::remove_file(&path);
                    }
                }
                return Err(io_err(&path)(e));
            }
        }
        Ok(Some(Held { file, path }))
    }

    /// What the cache holds now; `None` when its directory is not there.
    pub fn usage(&self) -> Result<Option<Usage>, HeldError> {
        let Some(path) = self.dir() else {
            return Ok(None);
        };
        let Some(dir) = Dir::open(&path, false, false)? else {
            return Ok(None);
        };
        let mut u = Usage {
            dir: path,
            ..Usage::default()
        };
        for s in dir.slots()? {
            u.slots += 1;
            u.bytes += s.allocated;
            u.in_use += u64::from(s.file.is_none());
        }
        Ok(Some(u))
    }
}

#[cfg(test)]
mod tests;
