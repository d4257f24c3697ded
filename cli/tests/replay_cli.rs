//! `rrstore replay` and `rrstore history` through the real binary: every
//! fixture from its .json, from the store by ID prefix and from a .rra; the
//! exit code of each failure; history rows in text and JSON.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use rrstore_tests::fixtures;

use rrstore_tests::descriptors;
use rrstore_tests::output::{json, text};

/// rrstore with a private store. OMP_NUM_THREADS=2: the fixtures' float
/// reductions were recorded with two OpenMP threads.
fn rrstore(store: &Path, args: &[&str]) -> Output {
    store_common::command()
        .arg("--store")
        .arg(store)
        .args(args)
        .env("OMP_NUM_THREADS", "2")
        .env_remove("RRSTORE_DIR")
        .output()
        .unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

const GLOBALS: &str = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13";
const SAXPY: &str = "llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13";

#[test]
fn every_fixture_verifies_from_json_store_and_archive_with_history() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut all = descriptors("llvm22-host");
    all.extend(descriptors("upstream-native"));
    assert_eq!(all.len(), 22);
    let mut ids = Vec::new();
    for (i, d) in all.iter().enumerate() {
        let o = rrstore(&store, &["replay", d.to_str().unwrap(), "--json"]);
        assert_eq!(code(&o), 0, "{}", text(&o));
        let v = json(&o);
        assert_eq!(v["verdict"], "verified", "{}", text(&o));
        assert_eq!(v["backend"], "host");
        ids.push(v["recording_id"].as_str().unwrap().to_string());
        // .rra
        let rra = tmp.path().join(format!("{i}.rra"));
        let o = rrstore(
            &store,
            &["pack", d.to_str().unwrap(), "-o", rra.to_str().unwrap()],
        );
        assert_eq!(code(&o), 0, "{}", text(&o));
        let o = rrstore(&store, &["replay", rra.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", text(&o));
        assert!(text(&o).contains("VERIFIED"), "{}", text(&o));
    }
    // store, by a 12-digit prefix
    let mut import = vec!["import"];
    let dirs = [
        fixtures().join("llvm22-host"),
        fixtures().join("upstream-native"),
    ];
    import.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    let o = rrstore(&store, &import);
    assert_eq!(code(&o), 0, "{}", text(&o));
    for id in &ids {
        let o = rrstore(&store, &["replay", &id[..12], "--verify"]);
        assert_eq!(code(&o), 0, "{}", text(&o));
        assert!(text(&o).contains("VERIFIED"), "{}", text(&o));
    }
    // three rows per recording: .json, .rra, store
    let o = rrstore(&store, &["history", "--json"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let rows = json(&o);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3 * ids.len());
    assert!(rows
        .iter()
        .all(|r| r["verdict"] == "verified" && r["backend"] == "host"));
    let o = rrstore(&store, &["history", &ids[0][..8]]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let t = text(&o);
    assert_eq!(
        t.lines().filter(|l| l.contains(&ids[0][..12])).count(),
        3,
        "{t}"
    );
}

/// However the host runner is prepared before the recording is known
/// (`RRSTORE_HOST_PRELOAD`: the offload runtime found on this machine, a
/// library the image does not need, nothing, a library that does not
/// exist), the replay verifies: a spare the image cannot use is replaced.
#[test]
fn every_preload_setting_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let d = fixtures().join(format!("{GLOBALS}.json"));
    for setting in ["auto", "libz.so.1", "off", "libdoes-not-exist.so.0"] {
        let o = store_common::command()
            .arg("--store")
            .arg(&store)
            .args(["replay", d.to_str().unwrap(), "--json"])
            .env("OMP_NUM_THREADS", "2")
            .env("RRSTORE_HOST_PRELOAD", setting)
            .env_remove("RRSTORE_DIR")
            .output()
            .unwrap();
        assert_eq!(code(&o), 0, "{setting}: {}", text(&o));
        assert_eq!(json(&o)["verdict"], "verified", "{setting}: {}", text(&o));
    }
}

/// The replay library's messages name no command-line flag; the CLI adds
/// the flag that gets past the error as a hint line.
#[test]
fn flags_are_hints_of_the_cli_not_in_library_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let run = |args: &[&str]| rrstore(&store, args);
    let error_and_hint = |o: &Output| {
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let line = |p: &str| {
            err.lines()
                .find(|l| l.starts_with(p))
                .unwrap_or_else(|| panic!("no `{p}` line in: {err}"))
                .to_string()
        };
        (line("error: "), line("hint: "))
    };
    let native =
        fixtures().join("upstream-native/saxpy/15370218017841526287_9883226215827474840.json");
    let d = tmp.path().join("noout");
    std::fs::create_dir(&d).unwrap();
    let noout = copy_recording(SAXPY, &d);
    std::fs::remove_file(noout.with_extension("original.output")).unwrap();
    let d = tmp.path().join("cubin");
    std::fs::create_dir(&d).unwrap();
    let cubin = copy_recording(SAXPY, &d);
    let elf = rrstore_tests::elf_header(rrstore_tests::elf::EM_CUDA, 80, 0);
    std::fs::write(cubin.with_extension("image"), elf).unwrap();
    for (args, code_wanted, flag) in [
        (
            vec!["replay", native.to_str().unwrap(), "--num-threads", "4"],
            20,
            "--ignore-limits",
        ),
        (
            vec!["replay", noout.to_str().unwrap(), "--verify"],
            18,
            "--verify",
        ),
        (
            vec!["replay", cubin.to_str().unwrap(), "--backend", "host"],
            9,
            "--backend auto",
        ),
    ] {
        let o = run(&args);
        assert_eq!(code(&o), code_wanted, "{}", text(&o));
        let (error, hint) = error_and_hint(&o);
        assert!(!error.contains(" --"), "{args:?}: {error}");
        assert!(hint.contains(flag), "{args:?}: {hint}");
    }
}

/// Each replay appends a history row to the index's write-ahead log; every
/// few replays the log is folded back into the index once the result is
/// printed. Over many replays the log stays below that threshold plus
/// about one row, and no row is lost.
#[test]
fn replays_fold_the_index_log_back_before_it_grows() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let d = fixtures().join(format!("{GLOBALS}.json"));
    let wal = store.join("index.sqlite-wal");
    let mut largest = 0;
    for _ in 0..24 {
        let o = rrstore(&store, &["replay", d.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{}", text(&o));
        largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
    }
    // Folded at 32 pages (before a replay's row), not at the 64 pages at
    // which appending a row folds it for callers that never do.
    assert!(largest < 48 * 4120, "the log grew to {largest} bytes");
    let s = rrstore_store::Store::open(&store).unwrap();
    assert!(s.history_log_folds().unwrap() >= 1);
    assert_eq!(s.history(None).unwrap().len(), 24);
}

fn copy_recording(rel: &str, dir: &Path) -> PathBuf {
    rrstore_tests::copy_recording(&fixtures().join(rel), dir)
}

#[test]
fn a_modified_output_is_a_mismatch_with_exit_1_and_a_history_row() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let json_path = copy_recording(SAXPY, tmp.path());
    let out = json_path.with_extension("original.output");
    let mut b = std::fs::read(&out).unwrap();
    b[1_048_576 + 64] ^= 0x40; // inside x (argument 3)
    std::fs::write(&out, &b).unwrap();
    let o = rrstore(&store, &["replay", json_path.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("MISMATCH"), "{t}");
    assert!(
        t.contains("1 bytes differ in 1 range(s); first difference at arena+0x100040"),
        "{t}"
    );
    assert!(
        t.contains("1 differing byte(s) in 1 byte(s), in the buffer of argument 3 (arena+0x100000) at +0x40"),
        "{t}"
    );
    let o = rrstore(&store, &["replay", json_path.to_str().unwrap(), "--json"]);
    assert_eq!(code(&o), 1);
    let v = json(&o);
    assert_eq!(v["verdict"], "mismatch");
    // The ranges as `diff` reports them: span and differing bytes.
    let m = &v["mismatch"];
    assert_eq!(m["differing_bytes"], 1);
    assert_eq!(
        (m["merge_gap"].clone(), m["unlisted_ranges"].clone()),
        (16.into(), 0.into())
    );
    let r = &m["largest"][0];
    assert_eq!(
        (
            r["offset"].clone(),
            r["span"].clone(),
            r["differing_bytes"].clone()
        ),
        (0x100040.into(), 1.into(), 1.into()),
        "{m}"
    );
    assert!(r.get("len").is_none(), "{m}");
    let o = rrstore(&store, &["history", "--json"]);
    let rows = json(&o);
    assert_eq!(rows[0]["verdict"], "mismatch");
    assert!(rows[0]["detail"].as_str().unwrap().contains("argument 3"));
}

#[test]
fn failures_have_their_own_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let run = |args: &[&str]| rrstore(&store, args);

    // legacy recording: 19
    let legacy = fixtures().join("legacy/globals/__omp_offloading_fe00_9ae057_main_l13.json");
    let o = run(&["replay", legacy.to_str().unwrap()]);
    assert_eq!(code(&o), 19, "{}", text(&o));
    assert!(text(&o).contains("cannot be replayed"));

    // --verify without an output snapshot: 18 (and it runs without --verify)
    let d = tmp.path().join("noout");
    std::fs::create_dir(&d).unwrap();
    let j = copy_recording(SAXPY, &d);
    std::fs::remove_file(j.with_extension("original.output")).unwrap();
    assert_eq!(code(&run(&["replay", j.to_str().unwrap(), "--verify"])), 18);
    let o = run(&["replay", j.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("not verified"));

    // missing kernel symbol: 11
    let d = tmp.path().join("nokernel");
    std::fs::create_dir(&d).unwrap();
    let j = copy_recording(SAXPY, &d);
    let other_image = fixtures().join(format!("{GLOBALS}.image"));
    std::fs::copy(other_image, j.with_extension("image")).unwrap();
    let o = run(&["replay", j.to_str().unwrap()]);
    assert_eq!(code(&o), 11, "{}", text(&o));
    assert!(text(&o).contains("__omp_offloading_fe00_9ae056_main_l13"));

    // global with another size: 17
    let d = tmp.path().join("global");
    std::fs::create_dir(&d).unwrap();
    let j = copy_recording(GLOBALS, &d);
    rrstore_tests::shrink_global(&j.with_extension("globals"), "g_counter", 2);
    let o = run(&["replay", j.to_str().unwrap()]);
    assert_eq!(code(&o), 17, "{}", text(&o));
    assert!(text(&o).contains("g_counter"), "{}", text(&o));

    // cubin image on the host backend: 9, naming both targets
    let d = tmp.path().join("cubin");
    std::fs::create_dir(&d).unwrap();
    let j = copy_recording(SAXPY, &d);
    let elf = rrstore_tests::elf_header(rrstore_tests::elf::EM_CUDA, 80, 0);
    std::fs::write(j.with_extension("image"), elf).unwrap();
    let o = run(&["replay", j.to_str().unwrap(), "--backend", "host"]);
    assert_eq!(code(&o), 9, "{}", text(&o));
    assert!(
        text(&o).contains("sm_80") && text(&o).contains("host"),
        "{}",
        text(&o)
    );

    // launch limits: 20
    let native =
        fixtures().join("upstream-native/saxpy/15370218017841526287_9883226215827474840.json");
    let o = run(&["replay", native.to_str().unwrap(), "--num-threads", "4"]);
    assert_eq!(code(&o), 20, "{}", text(&o));
    let o = run(&[
        "replay",
        native.to_str().unwrap(),
        "--num-threads",
        "4",
        "--ignore-limits",
    ]);
    assert_eq!(code(&o), 0, "{}", text(&o));

    // unknown recording: 3
    assert_eq!(code(&run(&["replay", "no/such/file.json"])), 3);

    // every attempt that got as far as a recording left a history row
    let rows = json(&run(&["history", "--json"]));
    let verdicts: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(
        verdicts,
        [
            "error",
            "error",
            "unverified",
            "error",
            "error",
            "error",
            "error",
            "verified"
        ]
    );
}

/// A copy of the globals recording in `dir` whose image is replaced by a
/// kernel with C body `body` (no globals): returns its descriptor.
fn recording_with_kernel_body(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    rrstore_tests::recording_with_kernel(&fixtures().join(GLOBALS), dir, |name| {
        format!("void {name}(long kle, long out) {{ {body} }}\n")
    })
}

#[test]
fn a_crash_is_exit_12_and_the_binary_survives_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let j = recording_with_kernel_body(tmp.path(), "__builtin_trap();");
    let o = rrstore(&store, &["replay", j.to_str().unwrap()]);
    assert_eq!(code(&o), 12, "{}", text(&o));
    assert!(text(&o).contains("CRASHED (signal 4)"), "{}", text(&o));
    let rows = json(&rrstore(&store, &["history", "--json"]));
    assert_eq!(rows[0]["verdict"], "crashed");
}

#[test]
fn a_hanging_kernel_is_killed_after_the_timeout_with_exit_13() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let j = recording_with_kernel_body(tmp.path(), "volatile long n = 0; for (;;) n++;");
    let o = rrstore(&store, &["replay", j.to_str().unwrap(), "--timeout", "0.3"]);
    assert_eq!(code(&o), 13, "{}", text(&o));
    let rows = json(&rrstore(&store, &["history", "--json"]));
    assert_eq!(rows[0]["verdict"], "timed-out");
}
