//! Temporary files of a `file://` remote (spec/REMOTE.md, "Temporary
//! files"): every object is written under `tmp/` and renamed into place,
//! so nothing a reader lists is ever incomplete, and the files an
//! interrupted push leaves behind are found and removed by the next push.
//!
//! A temporary file is named `<host>.<pid>.<n>`: a file of this host whose
//! process is gone is stale at once; any other is stale once it has not
//! been written to for [`STALE_AFTER`] (another machine's push, or a reused
//! pid). Older rrstore versions wrote `<key>#<n>` beside the object (the
//! `object_store` crate's staging name); those are removed after
//! [`STALE_AFTER`] too.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::layout;

/// The directory of temporary files, at the remote's root.
pub const TMP_DIR: &str = "tmp";

/// A temporary file untouched for this long belongs to no running push:
/// one object is written in well under a second.
pub const STALE_AFTER: Duration = Duration::from_secs(3600);

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Write object `key` of the remote at `root`: a new file under `tmp/`,
/// renamed to the object's path once complete.
pub fn write_object(root: &Path, key: &str, body: &[u8]) -> io::Result<()> {
    let dir = root.join(TMP_DIR);
    let name = format!(
        "{}.{}.{}",
        rrstore_format::output::host_name(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = dir.join(name);
    let dest = root.join(key);
    let r = (|| {
        fs::create_dir_all(&dir)?;
        File::create_new(&tmp)?.write_all(body)?;
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::rename(&tmp, &dest)
    })();
    if r.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    r
}

/// Remove the stale temporary files of the remote at `root` (see the
/// module documentation); returns how many were removed.
pub fn remove_stale(root: &Path) -> io::Result<u64> {
    let now = SystemTime::now();
    let me = rrstore_format::output::host_name();
    let mut removed = 0;
    for path in files(&root.join(TMP_DIR))? {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if owner_gone(name, &me) || untouched(&path, now) {
            removed += remove(&path)?;
        }
    }
    for dir in [
        layout::CHUNKS,
        layout::LISTS,
        layout::PARTS,
        layout::RECORDINGS,
        layout::IMAGES,
        super::layout3::PACKS,
        super::layout3::INDEX,
    ] {
        for path in walk(&root.join(dir.trim_end_matches('/')))? {
            if is_legacy_staging(&path) && untouched(&path, now) {
                removed += remove(&path)?;
            }
        }
    }
    Ok(removed)
}

/// `<host>.<pid>.<n>` of this host whose process no longer runs.
fn owner_gone(name: &str, me: &str) -> bool {
    let mut it = name.split('.');
    let (Some(host), Some(pid), Some(_), None) = (it.next(), it.next(), it.next(), it.next())
    else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    host == me && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// `object_store`'s staging name: `<name>#<digits>`.
fn is_legacy_staging(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.rsplit_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn untouched(path: &Path, now: SystemTime) -> bool {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| now.duration_since(t).ok())
        .is_some_and(|age| age >= STALE_AFTER)
}

/// Remove a file another cleaner may have removed first.
fn remove(path: &Path) -> io::Result<u64> {
    match fs::remove_file(path) {
        Ok(()) => Ok(1),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("removing {}: {e}", path.display()),
        )),
    }
}

/// The plain files directly in `dir` (none when it does not exist).
fn files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e?;
        if e.file_type()?.is_file() {
            out.push(e.path());
        }
    }
    Ok(out)
}

/// The plain files under `dir`, one level of fan-out directories deep.
fn walk(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = files(dir)?;
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    };
    for e in rd {
        let e = e?;
        if e.file_type()?.is_dir() {
            out.extend(files(&e.path())?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_appear_whole_and_stale_temporaries_go() {
        let d = tempfile::tempdir().unwrap();
        write_object(d.path(), "chunks/ab/abcd", b"body").unwrap();
        assert_eq!(fs::read(d.path().join("chunks/ab/abcd")).unwrap(), b"body");
        assert_eq!(
            files(&d.path().join(TMP_DIR)).unwrap(),
            Vec::<PathBuf>::new()
        );
        let me = rrstore_format::output::host_name();
        // A dead process of this host: stale now. This process: kept.
        let dead = d.path().join(TMP_DIR).join(format!("{me}.4194999.0"));
        let live = d
            .path()
            .join(TMP_DIR)
            .join(format!("{me}.{}.7", std::process::id()));
        let other = d.path().join(TMP_DIR).join("elsewhere.12.0");
        for p in [&dead, &live, &other] {
            fs::write(p, b"x").unwrap();
        }
        assert!(!is_legacy_staging(&other));
        assert!(is_legacy_staging(Path::new("chunks/ab/abcd#1")));
        assert!(!is_legacy_staging(Path::new("chunks/ab/abcd#x")));
        assert_eq!(remove_stale(d.path()).unwrap(), 1);
        assert!(!dead.exists() && live.exists() && other.exists());
    }
}
