//! What `import` (and `replay`) accept as input: a recording that fails does
//! not stop the others (unless `--fail-fast`), part files linked outside
//! their directory are refused unless `--follow-symlinks`, partial LLVM
//! 16-17 recordings are named as skipped, and `replay DIR` takes a directory
//! holding one recording. Real binary, real fixtures, real store.

mod store_common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use store_common::*;

const SAXPY: &str = "__omp_offloading_fe00_9ae056_main_l13";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// saxpy copied to `dir/rec` with its `.memory` moved to `dir/elsewhere/data`
/// and linked back: (the recording's directory, the link).
fn saxpy_linked_outside(dir: &Path) -> (PathBuf, PathBuf) {
    let rec = dir.join("rec");
    copy_tree(&fixtures().join("llvm22-host/saxpy"), &rec);
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let memory = rec.join(format!("{SAXPY}.memory"));
    std::fs::rename(&memory, elsewhere.join("data")).unwrap();
    symlink("../elsewhere/data", &memory).unwrap();
    (rec, memory)
}

/// Whether `err` refuses the link and names the flag that follows it.
fn refuses_the_link(err: &str) -> bool {
    err.contains(&format!("{SAXPY}.memory is a symbolic link"))
        && err.contains("outside the recording's directory")
        && err.contains("--follow-symlinks")
}

#[test]
fn replay_and_inspect_refuse_a_part_file_linked_outside_unless_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (rec, _) = saxpy_linked_outside(tmp.path());
    let desc = rec.join(format!("{SAXPY}.json"));

    // The directory and the descriptor, as replay and inspect take them.
    for target in [s(&rec), s(&desc)] {
        for verb in ["replay", "inspect"] {
            let (code, err) = fails(&store, &[verb, target]);
            assert_eq!(code, 4, "{verb} {target}: {err}");
            assert!(refuses_the_link(&err), "{verb} {target}: {err}");
        }
    }
    // Nothing was replayed: no history row.
    let h = ok(&store, &["history", "--json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&h).unwrap(),
        serde_json::json!([])
    );

    let out = ok(&store, &["inspect", s(&rec), "--follow-symlinks"]);
    assert!(out.contains(SAXPY), "{out}");
    let out = ok(&store, &["replay", s(&rec), "--follow-symlinks"]);
    assert!(out.contains("VERIFIED"), "{out}");
}

#[test]
fn a_part_file_linked_outside_its_directory_is_refused_unless_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (rec, memory) = saxpy_linked_outside(tmp.path());

    let (code, err) = fails(&store, &["import", s(&rec)]);
    assert_eq!(code, 4, "{err}");
    assert!(refuses_the_link(&err), "{err}");
    assert!(ls_ids(&store).is_empty());
    let (code, err) = fails(
        &store,
        &["pack", s(&rec), "-o", s(&tmp.path().join("x.rra"))],
    );
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("--follow-symlinks"), "{err}");

    let out = ok(&store, &["import", s(&rec), "--follow-symlinks"]);
    assert!(out.contains("imported 1 recording(s)"), "{out}");
    assert_eq!(ls_ids(&store).len(), 1);

    // A link that stays inside the directory is fine.
    let store2 = tmp.path().join("store2");
    std::fs::remove_file(&memory).unwrap();
    std::fs::rename(tmp.path().join("elsewhere/data"), rec.join("data")).unwrap();
    symlink("data", &memory).unwrap();
    ok(&store2, &["import", s(&rec)]);
    assert_eq!(ls_ids(&store2), ls_ids(&store));
}

/// The 8 recordings of `multi`, the fifth (04-step-ba) with a broken descriptor.
fn multi_with_a_bad_one(root: &Path) -> String {
    copy_tree(&fixtures().join("llvm22-host/multi"), root);
    let bad_dir = root.join("04-step-ba");
    let json = std::fs::read_dir(&bad_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    std::fs::write(&json, b"{\"Name\": ").unwrap();
    json.to_str().unwrap().to_string()
}

#[test]
fn a_bad_recording_in_a_directory_does_not_stop_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("multi");
    let bad = multi_with_a_bad_one(&root);

    let store = tmp.path().join("store");
    let o = run(&store, &["import", s(&root)]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(4), "{stdout}{stderr}");
    assert!(stderr.contains(&format!("cannot import {bad}")), "{stderr}");
    assert_eq!(stdout.matches("imported ").count(), 8, "{stdout}");
    assert!(
        stdout.contains("imported 7 recording(s), 0 already present, failed 1"),
        "{stdout}"
    );
    assert_eq!(ls_ids(&store).len(), 7);

    // --json lists the failure with its exit code.
    let store = tmp.path().join("store-json");
    let o = run(&store, &["import", s(&root), "--json"]);
    assert_eq!(o.status.code(), Some(4));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["imported"], 7);
    assert_eq!(v["failed"][0]["path"], bad.as_str());
    assert_eq!(v["failed"][0]["exit_code"], 4);

    // --fail-fast: the four before it are imported, nothing after it.
    let store = tmp.path().join("store-ff");
    let o = run(&store, &["import", s(&root), "--fail-fast"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{stdout}");
    assert!(
        stdout.contains("imported 4 recording(s), 0 already present, failed 1"),
        "{stdout}"
    );
    assert_eq!(ls_ids(&store).len(), 4);
}

#[test]
fn partial_llvm_16_17_descriptors_are_named_as_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("run");
    copy_tree(&fixtures().join("legacy"), &root);
    // A second, interrupted recording: its descriptor alone.
    let partial = root.join("partial");
    std::fs::create_dir(&partial).unwrap();
    let name = "__omp_offloading_fe00_9ae057_main_l13.json";
    std::fs::copy(root.join("globals").join(name), partial.join(name)).unwrap();
    // Not a descriptor at all: not mentioned.
    std::fs::write(root.join("compile_commands.json"), b"[]").unwrap();

    let store = tmp.path().join("store");
    let o = run(&store, &["import", s(&root)]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("skipped {}", partial.join(name).display()))
            && stderr.contains("without its input snapshot")
            && stderr.contains("__omp_offloading_fe00_9ae057_main_l13.memory"),
        "{stderr}"
    );
    assert!(!stderr.contains("compile_commands"), "{stderr}");
    assert!(stdout.contains("imported 1 recording(s)"), "{stdout}");
}

#[test]
fn replay_takes_a_directory_holding_one_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let dir = fixtures().join("llvm22-host/saxpy");
    let out = ok(&store, &["replay", s(&dir), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["verdict"], "verified", "{out}");
    let (code, err) = fails(
        &store,
        &["replay", s(&fixtures().join("llvm22-host/multi"))],
    );
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("holds 8 recordings"), "{err}");
}
