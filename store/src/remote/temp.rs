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

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::dirfs::{self, FsError};
use super::names;
use super::v2::layout;

/// The directory of temporary files, at the remote's root.
pub const TMP_DIR: &str = "tmp";

/// A temporary file untouched for this long belongs to no running push:
/// one object is written in well under a second.
pub const STALE_AFTER: Duration = Duration::from_secs(3600);

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Write object `key` of the remote at `root`: a new file under `tmp/`,
/// renamed to the object's path once complete (with `create_only`, only
/// if no object of that key exists: `Ok(false)` when one does). No link
/// below `root` is followed (`dirfs`).
pub fn write_object(
    root: &Path,
    key: &str,
    body: &[u8],
    create_only: bool,
) -> Result<bool, FsError> {
    let name = format!(
        "{}.{}.{}",
        rrstore_format::output::host_name(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    dirfs::write(root, TMP_DIR, &name, key, body, create_only)
}

/// Remove the stale temporary files of the remote at `root` (see the
/// module documentation); returns how many were removed. Only names of
/// the exact form of a temporary file are candidates (`names`).
pub fn remove_stale(root: &Path) -> Result<u64, FsError> {
    let now = SystemTime::now();
    let me = rrstore_format::output::host_name();
    let mut removed = 0;
    for e in dirfs::list(root, TMP_DIR)? {
        let Some(name) = e
            .key
            .strip_prefix(TMP_DIR)
            .and_then(|k| k.strip_prefix('/'))
        else {
            continue;
        };
        let gone = parse_name(name).is_some_and(|(host, pid)| host == me && process_gone(pid));
        if names::is_temporary(&e.key) && (gone || untouched(e.modified, now)) {
            removed += u64::from(dirfs::delete(root, &e.key)?);
        }
    }
    for dir in [
        layout::CHUNKS,
        layout::LISTS,
        layout::PARTS,
        layout::RECORDINGS,
        layout::IMAGES,
        super::v3::PACKS,
        super::v3::INDEX,
    ] {
        for e in dirfs::list(root, dir)? {
            if names::is_temporary(&e.key) && untouched(e.modified, now) {
                removed += u64::from(dirfs::delete(root, &e.key)?);
            }
        }
    }
    Ok(removed)
}

/// The host and pid of a temporary file's name `<host>.<pid>.<n>` (the
/// host may hold dots; pid and n are decimal).
pub fn parse_name(name: &str) -> Option<(&str, u32)> {
    let (rest, n) = name.rsplit_once('.')?;
    let (host, pid) = rest.rsplit_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if host.is_empty() || host.contains('/') || !digits(n) || !digits(pid) {
        return None;
    }
    Some((host, pid.parse().ok()?))
}

/// Process `pid` of this host no longer runs (this process always does).
/// Used for temporary files and lock objects of this host (`lock`).
pub fn process_gone(pid: u32) -> bool {
    pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// `object_store`'s staging name: `<name>#<digits>`.
pub fn is_legacy_staging(key: &str) -> bool {
    key.rsplit_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn untouched(modified: SystemTime, now: SystemTime) -> bool {
    now.duration_since(modified)
        .is_ok_and(|age| age >= STALE_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn objects_appear_whole_and_stale_temporaries_go() {
        let d = tempfile::tempdir().unwrap();
        write_object(d.path(), "chunks/ab/abcd", b"body", false).unwrap();
        assert_eq!(fs::read(d.path().join("chunks/ab/abcd")).unwrap(), b"body");
        assert!(dirfs::list(d.path(), TMP_DIR).unwrap().is_empty());
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
        assert!(!is_legacy_staging("tmp/elsewhere.12.0"));
        assert!(is_legacy_staging("chunks/ab/abcd#1"));
        assert!(!is_legacy_staging("chunks/ab/abcd#x"));
        assert_eq!(parse_name("a.b.c.12.3"), Some(("a.b.c", 12)));
        assert_eq!(parse_name("victim"), None);
        assert_eq!(remove_stale(d.path()).unwrap(), 1);
        assert!(!dead.exists() && live.exists() && other.exists());
    }
}
