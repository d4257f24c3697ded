//! `history`, `history --changes` and `gc` tell the truth, through the real
//! binary on real LLVM 22 host recordings: IDs are hex strings in JSON,
//! failed replays show `-` for what they did not measure and do not count
//! as output changes, a change the thread count caused shows its
//! `OMP_NUM_THREADS`, and gc says why it kept packs, honours
//! `--max-unused` and changes nothing with `--dry-run`.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use rrstore_tests::output::{json as json_of, text};
use store_common::*;

const SAXPY: &str = "llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json";
const REDUCTION: &str = "llvm22-host/reduction/__omp_offloading_fe00_9ae058_main_l10.json";

/// `rrstore --store S args...` with `OMP_NUM_THREADS` set as given (removed
/// when None), so the test does not depend on the caller's environment.
fn rr(s: &Path, threads: Option<&str>, args: &[&str]) -> Output {
    let mut c = store_common::command();
    c.arg("--store").arg(s).args(args).env_remove("RRSTORE_DIR");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("OMP_") {
            c.env_remove(k);
        }
    }
    if let Some(t) = threads {
        c.env("OMP_NUM_THREADS", t);
    }
    c.output().unwrap()
}

fn fixture(rel: &str) -> String {
    fixtures().join(rel).to_string_lossy().into_owned()
}

fn is_hex64(v: &serde_json::Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn import(s: &Path, rel: &str) -> String {
    let o = rr(s, Some("2"), &["import", &fixture(rel), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_str(&ok(s, &["ls", "--json"])).unwrap();
    let kernel = Path::new(rel)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    v.as_array()
        .unwrap()
        .iter()
        .find(|r| r["kernel"] == kernel.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn history_json_has_hex_ids_and_failed_rows_show_dashes() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let id = import(&s, SAXPY);
    let o = rr(&s, Some("2"), &["replay", &id[..12]]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // No CUDA device here: the replay fails (and leaves a history row).
    let o = rr(&s, Some("2"), &["replay", &id[..12], "--backend", "cuda"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));

    let rows = json_of(&rr(&s, None, &["history", "--json"]));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in rows {
        assert!(is_hex64(&r["recording"]), "{r:#}");
        assert_eq!(r["recording"], id.as_str());
        assert!(is_hex64(&r["image_hash"]), "{r:#}");
        assert_eq!(r["num_teams"], 1, "{r:#}");
        assert_eq!(r["num_threads"], 1, "{r:#}");
    }
    assert!(is_hex64(&rows[0]["output_blake3"]));
    assert_eq!(rows[0]["launch_overrides"], "OMP_NUM_THREADS=2");
    assert!(rows[1]["output_blake3"].is_null());

    let t = ok(&s, &["history"]);
    let failed = t
        .lines()
        .find(|l| l.starts_with(&rows[1]["id"].to_string()))
        .unwrap();
    assert!(!failed.contains("0.000ms"), "{t}");
    assert!(!failed.contains("0.0ms"), "{t}");
    let cells: Vec<&str> = failed.split_whitespace().collect();
    // row, date, time, recording, machine, backend, verdict, kernel, wall,
    // output
    assert_eq!(&cells[7..10], ["-", "-", "-"], "{t}");
    let verified = t
        .lines()
        .find(|l| l.starts_with(&rows[0]["id"].to_string()))
        .unwrap();
    assert!(verified.ends_with("1x1 OMP_NUM_THREADS=2"), "{t}");
}

#[test]
fn failed_replays_are_not_output_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let id = import(&s, SAXPY);
    // An image without the recording's kernel: the replay cannot start.
    let wrong = fixture("llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13.image");
    for (args, code) in [
        (vec!["replay", &id[..12]], 0),
        (vec!["replay", &id[..12], "--backend", "cuda"], 9),
        (vec!["replay", &id[..12], "--image", &wrong], 11),
        (vec!["replay", &id[..12]], 0),
    ] {
        let o = rr(&s, Some("2"), &args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
    }
    let rows = json_of(&rr(&s, None, &["history", "--json"]));
    assert_eq!(rows.as_array().unwrap().len(), 4, "{rows:#}");
    let t = ok(&s, &["history", "--changes"]);
    assert!(
        t.contains("no recording changed its output between completed replays"),
        "{t}"
    );
    let v = json_of(&rr(&s, None, &["history", "--changes", "--json"]));
    assert_eq!(v.as_array().unwrap().len(), 0, "{v:#}");
}

#[test]
fn a_change_the_thread_count_caused_shows_its_thread_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let id = import(&s, REDUCTION);
    // Recorded with two threads: a float sum over one thread adds in
    // another order.
    let o = rr(&s, Some("2"), &["replay", &id[..12]]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = rr(&s, Some("1"), &["replay", &id[..12]]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // And a failed replay, which is no third output.
    rr(&s, Some("1"), &["replay", &id[..12], "--backend", "cuda"]);

    let v = json_of(&rr(&s, None, &["history", "--changes", "--json"]));
    let c = &v.as_array().unwrap()[0];
    assert_eq!(c["recording"], id.as_str());
    let outputs = c["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 2, "{v:#}");
    assert_eq!(outputs[0]["launches"][0], "1x1 OMP_NUM_THREADS=2", "{v:#}");
    assert_eq!(outputs[0]["recorded"], true);
    assert_eq!(outputs[1]["launches"][0], "1x1 OMP_NUM_THREADS=1", "{v:#}");
    assert_eq!(outputs[1]["verdicts"][0], "mismatch");
    assert_eq!(c["failed_rows"].as_array().unwrap().len(), 1, "{v:#}");

    let t = ok(&s, &["history", "--changes"]);
    assert!(
        t.contains("2 different outputs (1 failed replay(s) not counted: rows 3)"),
        "{t}"
    );
    // The table's columns line up: every cell starts where its header does.
    let lines: Vec<&str> = t.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.trim_start().starts_with("output"))
        .unwrap();
    let launch_col = lines[head].find("launch").unwrap();
    for l in [lines[head + 1], lines[head + 3]] {
        assert_eq!(l.find("1x1"), Some(launch_col), "{t}");
    }
}

/// Every file of the store, index included, with its bytes.
fn all_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.to_string_lossy().ends_with("-shm") {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn gc_says_why_it_kept_packs_and_dry_run_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    // One import of the eleven recordings: one pack.
    ok(&s, &["import", &fixture("llvm22-host")]);
    let ids = ls_ids(&s);
    assert_eq!(ids.len(), 11);
    let mut rm = vec!["rm"];
    rm.extend(ids.iter().take(5).map(|i| i.as_str()));
    ok(&s, &rm);
    // A replay leaves its history row in the index's write-ahead log, which
    // a dry run must not fold back either.
    let o = rr(&s, Some("2"), &["replay", &ids[10][..12]]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(s.join("index.sqlite-wal").is_file());

    // --dry-run: says what it would do and changes nothing.
    let before = all_bytes(&s);
    let t = ok(&s, &["gc", "--dry-run"]);
    assert!(t.starts_with("dry run, nothing changed"), "{t}");
    let plan = json_of(&rr(&s, None, &["gc", "--dry-run", "--json"]));
    assert_eq!(all_bytes(&s), before, "gc --dry-run changed the store");
    assert_eq!(plan["dry_run"], true);

    // A real gc: what it removed matches the plan, and it says why the pack
    // with unused bytes stays.
    let r = json_of(&rr(&s, None, &["gc", "--json"]));
    for k in [
        "parts_removed",
        "chunks_removed",
        "packs_deleted",
        "packs_rewritten",
    ] {
        assert_eq!(r[k], plan[k], "{k}: {plan:#} vs {r:#}");
    }
    assert!(r["chunks_removed"].as_u64().unwrap() > 0, "{r:#}");
    assert_eq!(r["packs_rewritten"], 0, "{r:#}");
    assert_eq!(r["packs_kept_with_unused"], 1, "{r:#}");
    assert!(r["unused_bytes_kept"].as_u64().unwrap() > 0, "{r:#}");
    let t = ok(&s, &["gc"]);
    assert!(t.contains("rewrote 0"), "{t}");
    assert!(
        t.contains("kept 1 pack(s) holding") && t.contains("more than 50% unused (--max-unused)"),
        "{t}"
    );

    // --max-unused 0 rewrites it; the store shrinks and still verifies.
    let r = json_of(&rr(&s, None, &["gc", "--max-unused", "0", "--json"]));
    assert_eq!(r["packs_rewritten"], 1, "{r:#}");
    assert!(
        r["bytes_after"].as_u64() < r["bytes_before"].as_u64(),
        "{r:#}"
    );
    ok(&s, &["verify"]);
    assert_eq!(ls_ids(&s).len(), 6);
    // The rewritten pack has no unused byte: nothing to rewrite again.
    let r = json_of(&rr(&s, None, &["gc", "--max-unused", "0", "--json"]));
    assert_eq!(r["packs_rewritten"], 0, "{r:#}");
    assert_eq!(r["packs_kept_with_unused"], 0, "{r:#}");

    // A bad percentage is a usage error that leaves the store alone.
    let before = all_bytes(&s);
    let (code, err) = fails(&s, &["gc", "--max-unused", "150"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("from 0 to 100"), "{err}");
    assert_eq!(all_bytes(&s), before);
}
