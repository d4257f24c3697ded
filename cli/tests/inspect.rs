//! `rrstore inspect` through the real binary, on real fixtures of every
//! generation and on a real archive.

mod store_common;

use std::process::Output;

use rrstore_format::archive::{write_path, WriteOptions};
use rrstore_format::llvm;

use rrstore_tests::fixtures;

fn rrstore(args: &[&str]) -> Output {
    store_common::command().args(args).output().unwrap()
}

fn ok_stdout(args: &[&str]) -> String {
    let o = rrstore(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

const SAXPY: &str = "llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json";

#[test]
fn text_output_decodes_arguments_and_sizes() {
    let p = fixtures().join(SAXPY);
    let out = ok_stdout(&["inspect", p.to_str().unwrap()]);
    let id = llvm::load(&p).unwrap().recording.id().to_hex();
    assert!(out.contains(&id), "{out}");
    assert!(out.contains("kernel-named (LLVM 18-22)"), "{out}");
    assert!(out.contains("-1 (no launch environment)"), "{out}");
    assert!(out.contains("arena+1048576"), "{out}");
    assert!(out.contains("arena+2097152"), "{out}");
    // a = 2.5f passed by value.
    let a_line = out.lines().find(|l| l.contains("1075838976")).unwrap();
    assert!(a_line.contains("2.5"), "{a_line}");
    assert!(out.contains("base 0x7f1a"), "{out}");
    assert!(out.contains("2097168 B (2.0 MiB)"), "{out}");
    assert!(out.contains("x86_64 ELF"), "{out}");
    // Argument rows are aligned: the hex column starts at the same place.
    let cols: Vec<usize> = out
        .lines()
        .filter(|l| l.contains("0x0000") || l.contains("0xffff"))
        .map(|l| l.find("0x").unwrap())
        .collect();
    assert_eq!(cols.len(), 6, "{out}");
    assert!(cols.iter().all(|c| *c == cols[0]), "{out}");
}

#[test]
fn json_output_is_stable_and_complete() {
    let p = fixtures().join("upstream-native/globals/8213343555634104159_9883226215827474840.json");
    let out = ok_stdout(&["inspect", "--json", p.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["inspect_version"], 1);
    assert_eq!(v["generation"], "native");
    assert_eq!(v["image"]["target"], "x86_64");
    assert_eq!(v["args"][0]["kind"], "launch-environment-none");
    assert_eq!(v["args"][0]["value"], u64::MAX);
    assert_eq!(v["args"][1]["kind"], "pointer");
    assert_eq!(v["args"][1]["arena_offset"], 0);
    assert_eq!(v["arena"]["reserved"], 1u64 << 30);
    let globals: Vec<(String, u64)> = v["globals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap().into(),
                g["size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        globals,
        vec![
            ("g_counter".into(), 4),
            ("g_table".into(), 2048),
            ("g_scale".into(), 4)
        ]
    );
    let parts: Vec<&str> = v["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["role"].as_str().unwrap())
        .collect();
    assert_eq!(parts, ["input", "output", "globals", "image"]);
    assert_eq!(
        v["id"].as_str().unwrap(),
        llvm::load(&p).unwrap().recording.id().to_hex()
    );
}

#[test]
fn legacy_recording_and_directory_input() {
    let dir = fixtures().join("legacy/globals");
    let out = ok_stdout(&["inspect", dir.to_str().unwrap()]);
    assert!(out.contains("kernel-named-legacy (LLVM 16-17)"), "{out}");
    assert!(out.contains("unknown (not recorded)"), "{out}");
    let o = rrstore(&[
        "inspect",
        fixtures().join("llvm22-host/multi").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("holds 8 recordings"));
}

#[test]
fn archive_input_shows_the_same_recording() {
    let p = fixtures().join(SAXPY);
    let mut l = llvm::load(&p).unwrap();
    let rec = l.recording.clone();
    let tmp = tempfile::tempdir().unwrap();
    let rra = tmp.path().join("saxpy.rra");
    write_path(&rec, &mut l, &rra, &WriteOptions::default()).unwrap();
    let from_archive = ok_stdout(&["inspect", "--json", rra.to_str().unwrap()]);
    let from_json = ok_stdout(&["inspect", "--json", p.to_str().unwrap()]);
    assert_eq!(from_archive, from_json);
}

#[test]
fn bad_input_exits_non_zero_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("k.json");
    std::fs::write(
        &bad,
        "{\"Name\":\"k\",\"NumArgs\":1.5,\"NumTeamsClause\":1}",
    )
    .unwrap();
    let o = rrstore(&["inspect", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(4), "invalid input");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("NumArgs") && err.contains("k.json"), "{err}");
    let o = rrstore(&["inspect", tmp.path().join("missing.json").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "not found");
    let rra = tmp.path().join("x.rra");
    std::fs::write(&rra, b"not an archive at all").unwrap();
    let o = rrstore(&["inspect", rra.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(o.status.code() != Some(70), "not an internal error");
}
