//! A store knows it is a store: an index that is emptied, deleted,
//! truncated or older is an error naming `rrstore repair`, gc deletes
//! nothing it cannot account for, `repair` rebuilds the index from the
//! packs, re-importing heals a lost pack, a damaged pack header is found,
//! a read-only store can be read, and a mistyped `--store` is not a store.
//! Real `rrstore` binary, real fixtures (tests/fixtures/llvm22-host).

mod store_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use store_common::*;

fn host() -> PathBuf {
    fixtures().join("llvm22-host")
}

/// A store with every fixture recording, labelled, two of them tagged.
fn filled_store(dir: &Path) -> PathBuf {
    let store = dir.join("store");
    ok(
        &store,
        &["import", "--label", "fixtures", host().to_str().unwrap()],
    );
    let ids = ls_ids(&store);
    assert_eq!(ids.len(), 11);
    ok(&store, &["tag", &ids[0], "suite=nightly", "owner=ci"]);
    ok(&store, &["tag", &ids[3], "suite=weekly"]);
    store
}

/// What `ls --json` says about each recording: label, tags, kernel, size.
fn listing(store: &Path) -> BTreeMap<String, serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&ok(store, &["ls", "--json"])).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let keep = serde_json::json!({
                "label": r["label"], "tags": r["tags"], "kernel": r["kernel"],
                "logical_size": r["logical_size"], "source": r["source"],
                "imported_at": r["imported_at"],
            });
            (r["id"].as_str().unwrap().to_string(), keep)
        })
        .collect()
}

/// Every pack file with its length.
fn packs(store: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    for fan in std::fs::read_dir(store.join("packs")).unwrap().flatten() {
        if let Ok(files) = std::fs::read_dir(fan.path()) {
            for f in files.flatten() {
                out.insert(f.path(), f.metadata().unwrap().len());
            }
        }
    }
    out
}

#[test]
fn empty_index_fails_naming_repair_and_gc_deletes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = filled_store(tmp.path());
    let before = packs(&store);
    assert!(!before.is_empty());
    std::fs::write(store.join("index.sqlite"), b"").unwrap();
    let (code, err) = fails(&store, &["verify", "--full"]);
    assert_eq!(code, 7, "{err}");
    assert!(
        err.contains("empty") && err.contains("rrstore repair"),
        "{err}"
    );
    let (code, err) = fails(&store, &["gc"]);
    assert_ne!(code, 0);
    assert!(err.contains("rrstore repair"), "{err}");
    assert_eq!(packs(&store), before, "gc must not delete any pack");
    let (code, _) = fails(&store, &["ls"]);
    assert_eq!(code, 7);
}

#[test]
fn older_index_is_found_by_verify_and_gc_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    ok(&store, &["import", host().join("saxpy").to_str().unwrap()]);
    let old = tmp.path().join("old-index.sqlite");
    std::fs::copy(store.join("index.sqlite"), &old).unwrap();
    ok(&store, &["import", host().to_str().unwrap()]);
    let before = packs(&store);
    // An index restored from a copy taken before the last imports.
    for sfx in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(store.join(format!("index.sqlite{sfx}")));
    }
    std::fs::copy(&old, store.join("index.sqlite")).unwrap();
    let (code, err) = fails(&store, &["verify"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("does not list 10 recording(s)"), "{err}");
    let (code, err) = fails(&store, &["gc"]);
    assert_eq!(code, 7, "{err}");
    assert!(
        err.contains("deleted nothing") && err.contains("rrstore repair"),
        "{err}"
    );
    assert_eq!(packs(&store), before);
    ok(&store, &["repair"]);
    assert_eq!(ls_ids(&store).len(), 11);
    ok(&store, &["verify", "--full"]);
}

/// Damage the index three ways; `repair` brings back every recording with
/// its label and tags, `verify --full` passes and replays still verify.
#[test]
fn repair_restores_every_recording_after_index_loss() {
    for damage in ["emptied", "deleted", "truncated"] {
        let tmp = tempfile::tempdir().unwrap();
        let store = filled_store(tmp.path());
        let want = listing(&store);
        let index = store.join("index.sqlite");
        // Fold the log into the file so the damage hits the real index.
        ok(&store, &["stats"]);
        let old_len = std::fs::metadata(&index).unwrap().len();
        match damage {
            "emptied" => std::fs::write(&index, b"").unwrap(),
            "deleted" => {
                for sfx in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(store.join(format!("index.sqlite{sfx}")));
                }
            }
            _ => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&index)
                    .unwrap();
                f.set_len(old_len / 2).unwrap();
            }
        }
        let (code, err) = fails(&store, &["ls"]);
        assert_eq!(code, 7, "{damage}: {err}");
        assert!(err.contains("rrstore repair"), "{damage}: {err}");
        let out = ok(&store, &["repair"]);
        assert!(out.contains("11 recording(s) restored"), "{damage}: {out}");
        assert!(out.contains("0 not recovered"), "{damage}: {out}");
        if damage != "deleted" {
            assert!(out.contains("moved the old index aside"), "{damage}: {out}");
            let aside = std::fs::read_dir(&store).unwrap().flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("index.sqlite.bad-")
            });
            assert!(aside, "{damage}: the damaged index must be kept");
        }
        assert_eq!(listing(&store), want, "{damage}");
        let v = ok(&store, &["verify", "--full"]);
        assert!(
            v.contains("11 recording(s)") && v.contains("ok"),
            "{damage}: {v}"
        );
        for id in want.keys().take(2) {
            let r = ok(&store, &["replay", id]);
            assert!(r.contains("VERIFIED"), "{damage}: {r}");
        }
    }
}

#[test]
fn repair_reports_recordings_whose_data_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    ok(&store, &["import", host().join("saxpy").to_str().unwrap()]);
    ok(&store, &["import", host().join("multi").to_str().unwrap()]);
    let all = ls_ids(&store);
    let first: Vec<PathBuf> = packs(&store).into_keys().collect();
    // Lose one pack and the index.
    std::fs::remove_file(&first[0]).unwrap();
    std::fs::remove_file(store.join("index.sqlite")).unwrap();
    let o = run(&store, &["repair"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not recovered: recording"), "{err}");
    let kept = ls_ids(&store);
    assert!(kept.len() < all.len() && kept.iter().all(|k| all.contains(k)));
    ok(&store, &["verify", "--full"]);
    // What was lost is kept aside, and gc may run again.
    assert!(store.join("meta/lost").is_dir());
    ok(&store, &["gc"]);
}

#[test]
fn reimport_heals_a_lost_pack() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    ok(&store, &["import", host().join("saxpy").to_str().unwrap()]);
    ok(&store, &["import", host().join("multi").to_str().unwrap()]);
    let lost = packs(&store).into_keys().next().unwrap();
    std::fs::remove_file(&lost).unwrap();
    let (code, _) = fails(&store, &["verify"]);
    assert_eq!(code, 5);
    let out = ok(&store, &["import", host().to_str().unwrap()]);
    assert!(out.contains("healed"), "{out}");
    let v = ok(&store, &["verify", "--full"]);
    assert!(v.contains("ok"), "{v}");
    let id = &ls_ids(&store)[0];
    assert!(ok(&store, &["replay", id]).contains("VERIFIED"));
}

#[test]
fn flipped_bit_in_a_pack_header_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    ok(&store, &["import", host().join("saxpy").to_str().unwrap()]);
    let pack = packs(&store).into_keys().next().unwrap();
    let good = std::fs::read(&pack).unwrap();
    for byte in [0usize, 7, 9, 14, 16, 31] {
        let mut bad = good.clone();
        bad[byte] ^= 0x10;
        std::fs::write(&pack, &bad).unwrap();
        let (code, err) = fails(&store, &["verify", "--full"]);
        assert_eq!(code, 5, "byte {byte}: {err}");
        assert!(err.contains("header"), "byte {byte}: {err}");
    }
    std::fs::write(&pack, &good).unwrap();
    ok(&store, &["verify", "--full"]);
}

#[test]
fn a_mistyped_store_is_not_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no/such/store");
    for args in [
        &["ls"][..],
        &["verify"],
        &["show", "abcd"],
        &["gc"],
        &["stats"],
    ] {
        let (code, err) = fails(&missing, args);
        assert_eq!(code, 3, "{args:?}: {err}");
        assert!(err.contains("not an rrstore store"), "{args:?}: {err}");
    }
    assert!(
        !missing.exists(),
        "a read-only command must not create a store"
    );
    // A directory that exists but holds something else is not a store either.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"x").unwrap();
    let (code, _) = fails(&other, &["ls"]);
    assert_eq!(code, 3);
    // Commands that write create the store.
    ok(
        &missing,
        &["import", host().join("saxpy").to_str().unwrap()],
    );
    assert_eq!(ls_ids(&missing).len(), 1);
    assert!(missing.join("config").is_file());
}

#[test]
fn a_store_from_before_the_marker_is_adopted() {
    let tmp = tempfile::tempdir().unwrap();
    let store = filled_store(tmp.path());
    let want = listing(&store);
    // What an older rrstore left: index and packs, no marker, no metadata.
    std::fs::remove_file(store.join("config")).unwrap();
    std::fs::remove_dir_all(store.join("meta")).unwrap();
    assert_eq!(listing(&store), want);
    assert!(store.join("config").is_file());
    // Adoption wrote the metadata: the index can now be lost and rebuilt.
    std::fs::write(store.join("index.sqlite"), b"").unwrap();
    ok(&store, &["repair"]);
    assert_eq!(listing(&store), want);
}

/// Unmounts the read-only bind mount when the test ends.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn ro_bind(from: &Path, to: &Path) -> Result<Mount, String> {
    std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
    let bind = Command::new("mount")
        .arg("--bind")
        .arg(from)
        .arg(to)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if !bind.status.success() {
        return Err(String::from_utf8_lossy(&bind.stderr).into_owned());
    }
    let mount = Mount(to.to_path_buf());
    let ro = Command::new("mount")
        .args(["-o", "remount,bind,ro"])
        .arg(to)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if !ro.status.success() {
        return Err(String::from_utf8_lossy(&ro.stderr).into_owned());
    }
    Ok(mount)
}

#[test]
fn a_read_only_store_can_be_read() {
    let tmp = tempfile::tempdir().unwrap();
    let store = filled_store(tmp.path());
    let want = listing(&store);
    let id = want.keys().next().unwrap().clone();
    // A replay leaves its history row in the index's log (-wal): the
    // read-only store must read it from there.
    ok(&store, &["replay", &id]);
    assert!(store.join("index.sqlite-wal").is_file());
    let ro = tmp.path().join("ro");
    let _mount = match ro_bind(&store, &ro) {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot make a read-only bind mount here (needs root): {why}");
            return;
        }
    };
    // The mount really is read-only, even for root.
    assert!(std::fs::write(ro.join("probe"), b"x").is_err());
    assert_eq!(listing(&ro), want);
    assert!(ok(&ro, &["history"]).contains("verified"));
    assert!(ok(&ro, &["show", &id]).contains(&id));
    assert!(ok(&ro, &["verify", "--full"]).contains("ok"));
    let out = tmp.path().join("out.rra");
    ok(&ro, &["export", &id, "-o", out.to_str().unwrap()]);
    assert!(out.is_file());
    let o = run(&ro, &["replay", &id]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("VERIFIED"), "{stdout}");
    assert!(
        stderr.contains("history row could not be written") && stderr.contains("read-only"),
        "{stderr}"
    );
    // A command that writes says it could not.
    let (code, err) = fails(&ro, &["tag", &id, "k=v"]);
    assert_eq!(code, 7, "{err}");
    assert!(err.contains("read-only"), "{err}");
}

#[test]
fn another_stores_index_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    ok(&a, &["import", host().join("saxpy").to_str().unwrap()]);
    ok(&b, &["import", host().join("reduction").to_str().unwrap()]);
    let before = packs(&b);
    std::fs::copy(a.join("index.sqlite"), b.join("index.sqlite")).unwrap();
    for args in [&["ls"][..], &["verify", "--full"], &["gc"]] {
        let (code, err) = fails(&b, args);
        assert_eq!(code, 7, "{args:?}: {err}");
        assert!(
            err.contains("belongs to another store") && err.contains("rrstore repair"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(packs(&b), before);
    ok(&b, &["repair"]);
    assert_eq!(ls_ids(&b).len(), 1);
    ok(&b, &["verify", "--full"]);
}

/// The store library names no command-line flag: an unusable store
/// directory, or none at all, is a sentence about the store, and the CLI
/// adds the `--store DIR` way out as a hint line.
#[test]
fn store_errors_name_no_flag_and_the_cli_adds_the_store_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let saxpy = fixtures().join("llvm22-host/saxpy");
    let (code, err) = fails(&file.join("store"), &["import", saxpy.to_str().unwrap()]);
    let error_line = err.lines().find(|l| l.starts_with("error:")).unwrap_or("");
    assert!(error_line.contains("cannot use store directory"), "{err}");
    assert!(!error_line.contains("--store"), "{err}");
    assert!(err.contains("hint: pass --store DIR"), "{err}");
    assert_eq!(code, 7, "{err}");

    let o = store_common::command()
        .args(["ls"])
        .env_remove("RRSTORE_DIR")
        .env_remove("XDG_DATA_HOME")
        .env_remove("HOME")
        .output()
        .unwrap();
    let (_, err) = expect_failure(o, &["ls"]);
    let error_line = err.lines().find(|l| l.starts_with("error:")).unwrap_or("");
    assert!(error_line.contains("no store directory"), "{err}");
    assert!(!error_line.contains("--store"), "{err}");
    assert!(err.contains("hint: pass --store DIR"), "{err}");
}
