//! A `file://` remote's directory, touched without ever following a
//! symbolic link below its root (spec/REMOTE.md, "Links and names").
//!
//! Anyone who can write the shared directory can replace `tmp/`, a fan-out
//! directory such as `packs/ff` or `signatures/<ID>` with a link to a
//! directory elsewhere; a path-based `remove_file` or a listing that
//! follows links would then delete or read files outside the remote. Here
//! every path is walked one component at a time from a descriptor of the
//! root, each directory opened with `O_NOFOLLOW | O_DIRECTORY`, each file
//! with `O_NOFOLLOW` and checked to be a regular file, and deletes and
//! renames name their file relative to such a descriptor. A link (or a
//! device, FIFO or socket) met on the way is not followed, removed or
//! skipped: the operation fails with [`FsError::Unsafe`], naming it. The
//! root itself is the user's choice and may be reached through links.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// What went wrong, with the key (relative to the root) it concerns.
#[derive(Debug)]
pub enum FsError {
    /// `path` is a symbolic link or not a regular file or directory:
    /// rrstore leaves it alone.
    Unsafe {
        path: String,
        what: &'static str,
    },
    Io {
        path: String,
        source: io::Error,
    },
}

type Result<T> = std::result::Result<T, FsError>;

fn io_at(path: &str) -> impl Fn(Errno) -> FsError + '_ {
    move |e| FsError::Io {
        path: path.to_string(),
        source: e.into(),
    }
}

/// One regular file of a listing.
pub struct Entry {
    pub key: String,
    pub size: u64,
    pub modified: SystemTime,
}

/// A key's directories and its file name; `..`, `.` and empty components
/// are refused (no key of rrstore has them).
fn split(key: &str) -> Result<(Vec<&str>, &str)> {
    let comps: Vec<&str> = key.split('/').collect();
    if comps
        .iter()
        .any(|c| c.is_empty() || *c == "." || *c == ".." || c.contains('\0'))
    {
        return Err(FsError::Unsafe {
            path: key.to_string(),
            what: "is not a plain relative key",
        });
    }
    let (name, dirs) = comps.split_last().ok_or_else(|| FsError::Unsafe {
        path: key.to_string(),
        what: "is empty",
    })?;
    Ok((dirs.to_vec(), name))
}

fn open_root(root: &Path) -> Result<OwnedFd> {
    rfs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| FsError::Io {
        path: root.display().to_string(),
        source: e.into(),
    })
}

/// Why `name` in `dir` could not be opened as what was wanted: a link or
/// another kind of file is [`FsError::Unsafe`].
fn refused(dir: impl AsFd, name: &str, path: &str, e: Errno) -> FsError {
    match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => FsError::Unsafe {
            path: path.to_string(),
            what: "is a symbolic link",
        },
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => FsError::Unsafe {
            path: path.to_string(),
            what: "is a directory where a file belongs",
        },
        Ok(_) if e == Errno::NOTDIR => FsError::Unsafe {
            path: path.to_string(),
            what: "is not a directory",
        },
        _ => io_at(path)(e),
    }
}

/// Open directory `name` in `dir`, not following a link.
fn open_dir(dir: impl AsFd, name: &str, path: &str) -> Result<Option<OwnedFd>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rfs::openat(&dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(refused(dir, name, path, e)),
    }
}

/// The directory `dirs` under `root` (created with `create`), every level
/// opened without following a link; `None` when one does not exist.
fn walk(root: &Path, dirs: &[&str], create: bool) -> Result<Option<OwnedFd>> {
    let mut fd = open_root(root)?;
    for (i, d) in dirs.iter().enumerate() {
        let path = dirs[..=i].join("/");
        if create {
            match rfs::mkdirat(&fd, *d, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(io_at(&path)(e)),
            }
        }
        match open_dir(&fd, d, &path)? {
            Some(next) => fd = next,
            None => return Ok(None),
        }
    }
    Ok(Some(fd))
}

/// Open regular file `name` in `dir`, not following a link (`O_NONBLOCK`:
/// opening a FIFO must not hang).
fn open_file(dir: impl AsFd, name: &str, key: &str) -> Result<Option<File>> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = match rfs::openat(&dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(refused(&dir, name, key, e)),
    };
    let st = rfs::fstat(&fd).map_err(io_at(key))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(FsError::Unsafe {
            path: key.to_string(),
            what: "is not a regular file",
        });
    }
    Ok(Some(File::from(fd)))
}

fn open_key(root: &Path, key: &str) -> Result<Option<File>> {
    let (dirs, name) = split(key)?;
    match walk(root, &dirs, false)? {
        Some(dir) => open_file(dir, name, key),
        None => Ok(None),
    }
}

/// Object `key`'s bytes, `None` when it does not exist.
pub fn get(root: &Path, key: &str) -> Result<Option<Vec<u8>>> {
    let Some(mut f) = open_key(root, key)? else {
        return Ok(None);
    };
    let mut b = Vec::new();
    f.read_to_end(&mut b).map_err(|source| FsError::Io {
        path: key.to_string(),
        source,
    })?;
    Ok(Some(b))
}

/// Bytes `start..end` of object `key` (fewer where it ends first) and its
/// size; `None` when it does not exist.
pub fn get_range(root: &Path, key: &str, start: u64, end: u64) -> Result<Option<(Vec<u8>, u64)>> {
    let Some(f) = open_key(root, key)? else {
        return Ok(None);
    };
    let err = |source| FsError::Io {
        path: key.to_string(),
        source,
    };
    let size = f.metadata().map_err(err)?.len();
    let stop = end.min(size);
    let mut b = vec![0u8; stop.saturating_sub(start) as usize];
    f.read_exact_at(&mut b, start).map_err(err)?;
    Ok(Some((b, size)))
}

/// Every regular file under directory `dir` (a key prefix such as
/// `packs/`), recursively. A link or special file anywhere below is an
/// error; names that are not UTF-8 are no key of rrstore and are left out.
pub fn list(root: &Path, dir: &str) -> Result<Vec<Entry>> {
    let prefix = dir.trim_end_matches('/');
    let dirs: Vec<&str> = if prefix.is_empty() {
        Vec::new()
    } else {
        split(prefix)?;
        prefix.split('/').collect()
    };
    let mut out = Vec::new();
    if let Some(fd) = walk(root, &dirs, false)? {
        list_into(fd, prefix, &mut out)?;
    }
    Ok(out)
}

fn list_into(fd: OwnedFd, prefix: &str, out: &mut Vec<Entry>) -> Result<()> {
    let mut names = Vec::new();
    let dir = rfs::Dir::read_from(&fd).map_err(io_at(prefix))?;
    for e in dir {
        let e = e.map_err(io_at(prefix))?;
        let Ok(name) = e.file_name().to_str() else {
            continue;
        };
        if name != "." && name != ".." {
            names.push(name.to_string());
        }
    }
    for name in names {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let st = match rfs::statat(&fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            // Removed since the directory was read.
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(io_at(&key)(e)),
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => out.push(Entry {
                key,
                size: st.st_size as u64,
                modified: SystemTime::UNIX_EPOCH
                    + Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec as u32),
            }),
            FileType::Directory => {
                if let Some(sub) = open_dir(&fd, &name, &key)? {
                    list_into(sub, &key, out)?;
                }
            }
            FileType::Symlink => {
                return Err(FsError::Unsafe {
                    path: key,
                    what: "is a symbolic link",
                })
            }
            _ => {
                return Err(FsError::Unsafe {
                    path: key,
                    what: "is not a regular file or directory",
                })
            }
        }
    }
    Ok(())
}

/// Remove file `key` (`Ok(false)`: it was not there). Only a regular file
/// is removed, by its name in a directory opened without following links.
pub fn delete(root: &Path, key: &str) -> Result<bool> {
    let (dirs, name) = split(key)?;
    let Some(dir) = walk(root, &dirs, false)? else {
        return Ok(false);
    };
    match rfs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {}
        Ok(st) => {
            return Err(FsError::Unsafe {
                path: key.to_string(),
                what: if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
                    "is a symbolic link"
                } else {
                    "is not a regular file"
                },
            })
        }
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(io_at(key)(e)),
    }
    // `unlinkat` never follows the last component: were the file swapped
    // for a link since, the link alone would go.
    match rfs::unlinkat(&dir, name, AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(io_at(key)(e)),
    }
}

/// Write file `tmp` (a name in directory `tmp_dir` of the root) with
/// `body`, then move it to `key`: replacing what is there, or with
/// `create_only` only if nothing is (`Ok(false)`: something was). Every
/// directory is opened (and created) without following links.
pub fn write(
    root: &Path,
    tmp_dir: &str,
    tmp: &str,
    key: &str,
    body: &[u8],
    create_only: bool,
) -> Result<bool> {
    let (dirs, name) = split(key)?;
    let tmp_key = format!("{tmp_dir}/{tmp}");
    let tdir = walk(root, &[tmp_dir], true)?.ok_or_else(|| FsError::Io {
        path: tmp_dir.to_string(),
        source: io::ErrorKind::NotFound.into(),
    })?;
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rfs::openat(&tdir, tmp, flags, Mode::from_raw_mode(0o666)).map_err(io_at(&tmp_key))?;
    let r = (|| {
        File::from(fd)
            .write_all(body)
            .map_err(|source| FsError::Io {
                path: tmp_key.clone(),
                source,
            })?;
        let ddir = walk(root, &dirs, true)?.ok_or_else(|| FsError::Io {
            path: key.to_string(),
            source: io::ErrorKind::NotFound.into(),
        })?;
        if create_only {
            // A hard link fails when the name exists: exclusive creation.
            return match rfs::linkat(&tdir, tmp, &ddir, name, AtFlags::empty()) {
                Ok(()) => Ok(true),
                Err(Errno::EXIST) => Ok(false),
                Err(e) => Err(io_at(key)(e)),
            };
        }
        rfs::renameat(&tdir, tmp, &ddir, name)
            .map(|()| true)
            .map_err(io_at(key))
    })();
    // Gone after a rename; the name to remove after a link or a failure.
    let _ = rfs::unlinkat(&tdir, tmp, AtFlags::empty());
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_at_any_level_are_refused_and_what_they_point_at_survives() {
        let d = tempfile::tempdir().unwrap();
        let (root, outside) = (d.path().join("r"), d.path().join("outside"));
        std::fs::create_dir_all(root.join("packs/aa")).unwrap();
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("victim"), b"keep").unwrap();
        std::fs::write(outside.join("sub/victim"), b"keep").unwrap();
        symlink(&outside, root.join("packs/ff")).unwrap();
        symlink(&outside, root.join("index")).unwrap();
        symlink(outside.join("victim"), root.join("packs/aa/file")).unwrap();
        for key in [
            "packs/ff/victim",
            "index/victim",
            "packs/aa/file",
            "index/sub/victim",
        ] {
            assert!(
                matches!(delete(&root, key), Err(FsError::Unsafe { .. })),
                "{key}"
            );
            assert!(
                matches!(get(&root, key), Err(FsError::Unsafe { .. })),
                "{key}"
            );
        }
        assert!(matches!(list(&root, "packs/"), Err(FsError::Unsafe { .. })));
        assert!(matches!(list(&root, "index/"), Err(FsError::Unsafe { .. })));
        assert!(matches!(
            write(&root, "tmp", "t.1.0", "index/x", b"y", false),
            Err(FsError::Unsafe { .. })
        ));
        assert_eq!(std::fs::read(outside.join("victim")).unwrap(), b"keep");
        assert_eq!(std::fs::read(outside.join("sub/victim")).unwrap(), b"keep");
        assert!(!outside.join("x").exists());
        // Plain files work as before.
        assert!(write(&root, "tmp", "t.1.1", "packs/ab/x", b"body", false).unwrap());
        assert!(!write(&root, "tmp", "t.1.2", "packs/ab/x", b"other", true).unwrap());
        assert_eq!(get(&root, "packs/ab/x").unwrap().unwrap(), b"body");
        let (b, size) = get_range(&root, "packs/ab/x", 1, 9).unwrap().unwrap();
        assert_eq!((b.as_slice(), size), (&b"ody"[..], 4));
        assert_eq!(list(&root, "packs/ab/").unwrap()[0].key, "packs/ab/x");
        assert!(delete(&root, "packs/ab/x").unwrap());
        assert!(!delete(&root, "packs/ab/x").unwrap());
        assert!(list(&root, "tmp/").unwrap().is_empty());
        assert!(matches!(
            get(&root, "../outside/victim"),
            Err(FsError::Unsafe { .. })
        ));
    }
}
