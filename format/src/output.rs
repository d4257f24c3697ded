//! [`Staging`]: writing a set of user-visible output files (a recording's
//! `.json` and parts, or one `.rra`) so that either all of them appear or
//! none does, and nothing outside them is touched.
//!
//! * Each file is written to a temporary file created with `O_EXCL` in its
//!   target directory (`.rrstore-tmp-<host>.<pid>.<n>`), fsynced, and
//!   renamed into place only when every file of the set is complete.
//! * A process killed meanwhile leaves its temporary files: before writing
//!   into a directory, the temporary files there of this host's processes
//!   that are gone are removed ([`Staging::stale_removed`] lists them). Those
//!   of other hosts (a shared file system), and older names without a host,
//!   are left alone: whether their writer still runs cannot be told.
//! * A destination that exists is refused unless `force`; a destination that
//!   is a symbolic link is refused unless `force`, and even then the link
//!   itself is replaced, never followed (rename replaces the directory entry).
//!   Without `force` the rename is `RENAME_NOREPLACE`, so a file appearing
//!   between the check and the rename is not clobbered either.
//! * Free space is checked before anything is written ([`Staging::reserve`]).
//! * On any failure, or when the [`Staging`] is dropped uncommitted, the
//!   temporary files and the directories it created are removed.
//!
//! A directory on the way (the `-o` directory, or above it) may be a
//! symbolic link to a directory: the user chose that path, so it is followed;
//! only the files' own names are never followed. A link to anything else
//! where a directory is needed is refused.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{FormatError, Result};

/// Prefix of the temporary files (hidden, and recognizable to clean up by
/// hand after a crash).
pub const TMP_PREFIX: &str = ".rrstore-tmp-";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// This host's name as temporary file names spell it (anything but ASCII
/// letters, digits and `-` replaced by `_`, so it holds no `.`). Also used
/// by the store's remote temporary files, so both name a host alike.
pub fn host_name() -> String {
    let name = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let clean: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "host".into()
    } else {
        clean
    }
}

/// Whether `name` is a temporary file of a process of host `me` that is
/// gone (not this process: its own files are its own business).
fn stale(name: &str, me: &str) -> bool {
    let Some(rest) = name.strip_prefix(TMP_PREFIX) else {
        return false;
    };
    let mut it = rest.split('.');
    let (Some(host), Some(pid), Some(n), None) = (it.next(), it.next(), it.next(), it.next())
    else {
        return false;
    };
    let (Ok(pid), true) = (pid.parse::<u32>(), n.bytes().all(|b| b.is_ascii_digit())) else {
        return false;
    };
    host == me && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Remove the stale temporary files directly in `dir` (best effort: one
/// that cannot be removed stays); returns those removed.
fn remove_stale(dir: &Path) -> Vec<PathBuf> {
    let me = host_name();
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| e.file_name().to_str().is_some_and(|n| stale(n, &me)))
        .map(|e| e.path())
        .filter(|p| fs::remove_file(p).is_ok())
        .collect();
    removed.sort();
    removed
}

struct Staged {
    tmp: PathBuf,
    dest: PathBuf,
}

/// A set of output files written together; see the module docs.
pub struct Staging {
    force: bool,
    files: Vec<Staged>,
    created_dirs: Vec<PathBuf>,
    /// Bytes promised per file system (by device number) and one directory
    /// on it, for the free-space check.
    needed: HashMap<u64, (PathBuf, u64)>,
    /// Directories already swept of stale temporary files, and what the
    /// sweeps removed.
    swept: Vec<PathBuf>,
    stale_removed: Vec<PathBuf>,
}

/// The directory `path` is in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

fn write_err(path: &Path, source: io::Error) -> FormatError {
    FormatError::Write {
        path: path.to_path_buf(),
        source,
    }
}

impl Staging {
    /// `force`: replace existing files (and symbolic links, not their targets).
    pub fn new(force: bool) -> Staging {
        Staging {
            force,
            files: Vec::new(),
            created_dirs: Vec::new(),
            needed: HashMap::new(),
            swept: Vec::new(),
            stale_removed: Vec::new(),
        }
    }

    /// Stale temporary files of killed processes removed from the
    /// directories written to (see the module docs).
    pub fn stale_removed(&self) -> &[PathBuf] {
        &self.stale_removed
    }

    /// Remove the stale temporary files in `dir`, once per directory.
    fn sweep(&mut self, dir: &Path) {
        if !self.swept.iter().any(|d| d == dir) {
            self.swept.push(dir.to_path_buf());
            self.stale_removed.extend(remove_stale(dir));
        }
    }

    /// Make sure `dir` exists as a directory, creating it and missing
    /// parents (removed again if the staging fails).
    pub fn dir(&mut self, dir: &Path) -> Result<()> {
        let mut missing = Vec::new();
        let mut cur = Some(dir);
        while let Some(d) = cur.filter(|d| !d.as_os_str().is_empty()) {
            match fs::symlink_metadata(d) {
                Ok(m) if m.is_dir() => break,
                // A link to a directory is followed (see the module docs).
                Ok(m) if m.file_type().is_symlink() && d.is_dir() => break,
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(FormatError::Symlink {
                        path: d.to_path_buf(),
                    })
                }
                Ok(_) => {
                    return Err(FormatError::Invalid {
                        path: d.to_path_buf(),
                        message: "exists and is not a directory; expected a directory to write the recording's files into".into(),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(d.to_path_buf()),
                Err(e) => return Err(write_err(d, e)),
            }
            cur = d.parent();
        }
        for d in missing.into_iter().rev() {
            match fs::create_dir(&d) {
                Ok(()) => self.created_dirs.push(d),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => return Err(write_err(&d, e)),
            }
        }
        // Before the free-space check: what killed runs left takes space.
        self.sweep(dir);
        Ok(())
    }

    /// Whether `dest` may be written: refused when it is a symbolic link or
    /// exists, unless `force`; a directory is always refused.
    pub fn check(&self, dest: &Path) -> Result<()> {
        match fs::symlink_metadata(dest) {
            Ok(m) if m.is_dir() => Err(FormatError::Invalid {
                path: dest.to_path_buf(),
                message: "is a directory; expected a file name to write".into(),
            }),
            Ok(_) if self.force => Ok(()),
            Ok(m) if m.file_type().is_symlink() => Err(FormatError::Symlink {
                path: dest.to_path_buf(),
            }),
            Ok(_) => Err(FormatError::Exists {
                path: dest.to_path_buf(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(write_err(dest, e)),
        }
    }

    /// Promise `bytes` more to be written into `dir`; fails with
    /// [`FormatError::NoSpace`] when its file system has less available in
    /// total for everything promised on it.
    pub fn reserve(&mut self, dir: &Path, bytes: u64) -> Result<()> {
        let dev = fs::metadata(dir).map_err(|e| write_err(dir, e))?.dev();
        let entry = self
            .needed
            .entry(dev)
            .or_insert_with(|| (dir.to_path_buf(), 0));
        entry.1 = entry.1.saturating_add(bytes);
        let vfs = rustix::fs::statvfs(dir).map_err(|e| write_err(dir, e.into()))?;
        let available = vfs.f_bavail.saturating_mul(vfs.f_frsize);
        if entry.1 > available {
            return Err(FormatError::NoSpace {
                path: dir.to_path_buf(),
                needed: entry.1,
                available,
            });
        }
        Ok(())
    }

    /// A new temporary file that [`Staging::commit`] renames to `dest`.
    pub fn create(&mut self, dest: &Path) -> Result<File> {
        self.check(dest)?;
        if dest.file_name().is_none() {
            return Err(FormatError::Invalid {
                path: dest.to_path_buf(),
                message: "names no file".into(),
            });
        }
        let dir = parent_dir(dest);
        self.sweep(dir);
        let host = host_name();
        // Not derived from the file name, which may already be near NAME_MAX.
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(format!("{TMP_PREFIX}{host}.{}.{n}", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(f) => {
                    self.files.push(Staged {
                        tmp,
                        dest: dest.to_path_buf(),
                    });
                    return Ok(f);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(write_err(&tmp, e)),
            }
        }
    }

    /// Make every file durable and rename each into place; returns the
    /// destinations in the order they were created.
    pub fn commit(mut self) -> Result<Vec<PathBuf>> {
        for f in &self.files {
            File::open(&f.tmp)
                .and_then(|h| h.sync_all())
                .map_err(|e| write_err(&f.tmp, e))?;
            self.check(&f.dest)?;
        }
        let mut renamed = 0;
        let result = self.files.iter().try_for_each(|f| {
            self.rename(&f.tmp, &f.dest)?;
            renamed += 1;
            Ok(())
        });
        if let Err(e) = result {
            // Without force no destination existed: removing the ones
            // already renamed restores the directory. With force the files
            // replaced are gone, and the renamed ones stay.
            if !self.force {
                for f in &self.files[..renamed] {
                    let _ = fs::remove_file(&f.dest);
                }
            }
            return Err(e);
        }
        let mut dirs: Vec<&Path> = self.files.iter().map(|f| parent_dir(&f.dest)).collect();
        dirs.dedup();
        for d in dirs {
            // Best effort: the files are complete; only their names might
            // not survive a crash right now.
            let _ = File::open(d).and_then(|h| h.sync_all());
        }
        self.created_dirs.clear();
        Ok(std::mem::take(&mut self.files)
            .into_iter()
            .map(|f| f.dest)
            .collect())
    }

    fn rename(&self, tmp: &Path, dest: &Path) -> Result<()> {
        if self.force {
            return fs::rename(tmp, dest).map_err(|e| write_err(dest, e));
        }
        let cwd = rustix::fs::CWD;
        match rustix::fs::renameat_with(cwd, tmp, cwd, dest, rustix::fs::RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::EXIST) => Err(FormatError::Exists {
                path: dest.to_path_buf(),
            }),
            // File systems without RENAME_NOREPLACE: the check made just
            // before is what protects the destination.
            Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOSYS) => {
                self.check(dest)?;
                fs::rename(tmp, dest).map_err(|e| write_err(dest, e))
            }
            Err(e) => Err(write_err(dest, e.into())),
        }
    }
}

/// Write the one file `path` with `write` (given a buffered writer on its
/// temporary file) through a [`Staging`] of its own: `path` appears,
/// complete, only if `write` succeeds. Returns `write`'s value and the
/// stale temporary files removed ([`Staging::stale_removed`]).
pub fn write_one<T>(
    path: &Path,
    force: bool,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
) -> Result<(T, Vec<PathBuf>)> {
    let mut staging = Staging::new(force);
    let mut w = BufWriter::with_capacity(1 << 20, staging.create(path)?);
    let value = write(&mut w)?;
    w.flush().map_err(|e| write_err(path, e))?;
    drop(w);
    let stale = staging.stale_removed().to_vec();
    staging.commit()?;
    Ok((value, stale))
}

impl Drop for Staging {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = fs::remove_file(&f.tmp);
        }
        for d in self.created_dirs.iter().rev() {
            let _ = fs::remove_dir(d);
        }
    }
}
