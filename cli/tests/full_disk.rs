//! The store on a real full file system (a small tmpfs; the tests need root
//! to mount it, as CI runs): a command that runs out of space fails with
//! exit 7 and a sentence naming the full file system, leaves what was
//! committed whole, and reading the store works while the disk is full
//! and first time once space is back.

mod store_common;

use std::path::{Path, PathBuf};

use store_common::*;

/// A tmpfs of a given size mounted in a fresh temporary directory;
/// unmounted when dropped (before the directory is removed), even when
/// the test fails.
struct SmallFs {
    mnt: PathBuf,
    tmp: tempfile::TempDir,
}

impl SmallFs {
    /// `None` (the test is skipped, saying why) when not run as root.
    fn mount(size: &str, test: &str) -> Option<SmallFs> {
        if !is_root() {
            eprintln!("{test} skipped: it needs root to mount a tmpfs (CI runs as root)");
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        let mnt = tmp.path().join("small");
        std::fs::create_dir_all(&mnt).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(st.success(), "mount -t tmpfs failed");
        Some(SmallFs { mnt, tmp })
    }

    /// Scratch space on another file system (export targets).
    fn scratch(&self) -> &Path {
        self.tmp.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.mnt).status();
    }
}

/// A file that takes every free page of the file system at `dir` but
/// `pages`: written a page at a time until ENOSPC, then cut back.
fn fill_leaving(dir: &Path, pages: u64) {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let page = [0u8; 4096];
    let mut len = 0u64;
    while f.write_all(&page).is_ok() {
        len += 4096;
    }
    f.set_len(len.saturating_sub(pages * 4096)).unwrap();
}

/// The tags `show --json` gives the recording `id`, read once: a read of
/// the store must not need a second try.
fn tags(s: &Path, id: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(&ok(s, &["show", id, "--json"])).unwrap();
    v["store"]["tags"].clone()
}

#[test]
fn full_disk_is_a_clear_error_and_leaves_a_consistent_store() {
    // A real full file system: a 600 KiB tmpfs.
    let Some(fs) = SmallFs::mount("600k", "full_disk") else {
        return;
    };
    let s = fs.mnt.join("store");
    let multi = fixtures().join("llvm22-host/multi");
    let (code, err) = fails(&s, &["import", multi.to_str().unwrap()]);
    assert_eq!(code, 7, "{err}");
    assert!(err.contains("full"), "{err}");
    // What was committed before the disk filled is whole and verifies;
    // the recording being imported is absent.
    ok(&s, &["verify", "--full"]);
    let ids = ls_ids(&s);
    assert!(ids.len() < 8, "{ids:?}");
    for id in &ids {
        let out = fs.scratch().join(&id[..12]);
        ok(&s, &["export", &id[..12], "-o", out.to_str().unwrap()]);
    }
}

/// With not one page free, SQLite cannot grow the index's `-shm` file
/// (SQLITE_IOERR_SHMSIZE): reading the store still works (the store gives
/// back the space it kept for this), everything committed is there, and a
/// tag fails with exit 7 and a sentence saying the file system is full,
/// changing nothing. Once space is back the next read works first time,
/// nothing was lost and the reserve is made again.
#[test]
fn a_store_on_a_full_disk_can_be_read_and_reports_a_full_disk() {
    let Some(fs) = SmallFs::mount("16m", "full-disk read test") else {
        return;
    };
    let s = fs.mnt.join("store");
    let saxpy = fixtures().join("llvm22-host/saxpy");
    ok(&s, &["import", saxpy.to_str().unwrap()]);
    let id = ls_ids(&s).remove(0);
    let short = &id[..12];
    ok(&s, &["tag", short, "kept=1"]);
    let meta = s.join("meta");
    let packs = s.join("packs");
    let (meta_before, packs_before) = (tree_bytes(&meta), tree_bytes(&packs));
    let reserve = s.join("index-shm.reserve");

    fill_leaving(&fs.mnt, 0);
    assert_eq!(ls_ids(&s), vec![id.clone()]);
    assert_eq!(tags(&s, short)["kept"], "1");
    ok(&s, &["verify", "--full"]);
    let out = fs.scratch().join("export");
    ok(&s, &["export", short, "-o", out.to_str().unwrap()]);
    // The reads took the pages the store kept for this; take them too.
    assert!(!reserve.exists());
    fill_leaving(&fs.mnt, 0);
    let (code, err) = fails(&s, &["tag", short, "lost=1"]);
    assert_eq!(code, 7, "{err}");
    assert!(
        err.contains("the file system holding the store is full: free space"),
        "{err}"
    );
    assert!(err.contains("--store DIR"), "{err}");

    std::fs::remove_file(fs.mnt.join("filler")).unwrap();
    assert_eq!(ls_ids(&s), vec![id.clone()]);
    let t = tags(&s, short);
    assert_eq!(t["kept"], "1");
    assert!(t.get("lost").is_none(), "{t}");
    assert_eq!(tree_bytes(&meta), meta_before);
    assert_eq!(tree_bytes(&packs), packs_before);
    ok(&s, &["verify", "--full"]);
    assert!(reserve.exists(), "made again once space is back");
    // And the store is writable again.
    ok(&s, &["tag", short, "later=1"]);
    assert_eq!(tags(&s, short)["later"], "1");
}

/// `tag` on a full disk: its recovery metadata is rewritten after the
/// index commit (spec/STORE.md), so once the commit is made the tag is
/// set and the command succeeds, warning that the metadata is stale and
/// how to refresh it; a tag that did not commit is a failure (exit 7).
/// Free space is swept a page at a time so that one run lands between the
/// commit and the metadata write. Each read-back right after space
/// returns must work first time (it once needed a second try).
#[test]
fn tag_on_a_full_disk_reports_what_was_committed() {
    let Some(fs) = SmallFs::mount("16m", "tag full-disk test") else {
        return;
    };
    let mnt = &fs.mnt;
    let s = mnt.join("store");
    ok(
        &s,
        &[
            "import",
            fixtures().join("llvm22-host/saxpy").to_str().unwrap(),
        ],
    );
    let id = ls_ids(&s).remove(0);
    let meta = s.join(format!("meta/recordings/{}/{id}", &id[..2]));
    assert!(meta.exists(), "{}", meta.display());
    let mut stale_seen = false;
    for k in 0..64 {
        let before = std::fs::read(&meta).unwrap();
        // Exactly `k` pages: without the space the store keeps for its
        // `-shm` file, which the read-backs make again.
        let _ = std::fs::remove_file(s.join("index-shm.reserve"));
        fill_leaving(mnt, k);
        let key = format!("k{k}");
        let o = run(&s, &["tag", &id[..12], &format!("{key}=v")]);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        eprintln!("{k} free page(s): exit {:?}: {err}", o.status.code());
        std::fs::remove_file(mnt.join("filler")).unwrap();
        let committed = tags(&s, &id[..12]).get(&key).is_some();
        let refreshed = std::fs::read(&meta).unwrap() != before;
        match (committed, refreshed) {
            // Not committed: a failure, which says the disk is full.
            (false, _) => {
                assert_eq!(o.status.code(), Some(7), "{k} pages: {err}");
                assert!(err.contains("is full"), "{k} pages: {err}");
            }
            (true, false) => {
                stale_seen = true;
                assert_eq!(o.status.code(), Some(0), "{k} pages: the tag is set: {err}");
                assert!(
                    err.contains("warning: the tags are saved")
                        && err.contains(&format!("rrstore tag {}", &id[..12])),
                    "{err}"
                );
                assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("{key}=v")));
                // The way out the warning names refreshes the metadata:
                // an index rebuilt from it has the tag.
                ok(&s, &["tag", &id[..12]]);
                assert_ne!(std::fs::read(&meta).unwrap(), before);
                std::fs::remove_file(s.join("index.sqlite")).unwrap();
                for side in ["index.sqlite-wal", "index.sqlite-shm"] {
                    let _ = std::fs::remove_file(s.join(side));
                }
                ok(&s, &["repair"]);
                assert_eq!(tags(&s, &id[..12])[&key], "v");
            }
            (true, true) => {
                assert_eq!(o.status.code(), Some(0), "{err}");
                assert!(!err.contains("warning"), "{err}");
                break;
            }
        }
    }
    assert!(
        stale_seen,
        "no free-space step fell between the tag's commit and its metadata write"
    );
}
