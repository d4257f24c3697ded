//! The store commands through the real binary on real fixtures: import
//! (twice), ls filters, show, export byte-identical, tag, rm, gc, stats,
//! record, ID prefixes and exit codes.

mod store_common;

use std::path::Path;

use rrstore_format::llvm;
use store_common::*;

#[test]
fn import_ls_show_export_tag_rm_gc_stats() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let fx = fixtures();
    let out = ok(
        &s,
        &[
            "import",
            fx.join("llvm22-host").to_str().unwrap(),
            "--label",
            "run-a",
        ],
    );
    assert!(
        out.contains("imported 11 recording(s), 0 already present"),
        "{out}"
    );
    // Twice: nothing added, reported present.
    let stats1 = ok(&s, &["stats", "--json"]);
    let out = ok(
        &s,
        &["import", fx.join("llvm22-host/multi").to_str().unwrap()],
    );
    assert!(
        out.contains("imported 0 recording(s), 8 already present"),
        "{out}"
    );
    let stats2 = ok(&s, &["stats", "--json"]);
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&stats1).unwrap(),
        serde_json::from_str(&stats2).unwrap(),
    );
    assert_eq!(a["chunks"], b["chunks"]);
    assert_eq!(a["recordings"], 11);
    // Upstream-native copies of the same data: new recordings, few new bytes.
    let out = ok(
        &s,
        &[
            "import",
            fx.join("upstream-native").to_str().unwrap(),
            "--label",
            "run-b",
        ],
    );
    assert!(out.contains("imported 11 recording(s)"), "{out}");

    // ls filters.
    let ls = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut a = vec!["ls", "--json"];
        a.extend_from_slice(args);
        serde_json::from_str::<serde_json::Value>(&ok(&s, &a))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    assert_eq!(ls(&[]).len(), 22);
    assert_eq!(ls(&["--kernel", "*stepPfS*"]).len(), 12);
    assert_eq!(ls(&["--label", "run-?"]).len(), 22);
    assert_eq!(ls(&["--label", "run-b"]).len(), 11);
    assert_eq!(ls(&["--target", "x86_64"]).len(), 22);
    assert_eq!(ls(&["--target", "sm_90"]).len(), 0);
    assert_eq!(ls(&["--since", "1d"]).len(), 22);
    assert_eq!(ls(&["--since", "2999-01-01"]).len(), 0);
    let by_size = ls(&["--sort", "size"]);
    assert!(by_size[0]["input_size"].as_u64() >= by_size[21]["input_size"].as_u64());
    let by_name = ls(&["--sort", "name"]);
    assert!(by_name[0]["kernel"].as_str() <= by_name[21]["kernel"].as_str());
    let text = ok(&s, &["ls"]);
    assert_eq!(text.lines().count(), 23);
    assert!(text.lines().next().unwrap().starts_with("ID"));

    // show: inspect plus stored size and sharing.
    let saxpy = fx.join("llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json");
    let id = llvm::load(&saxpy).unwrap().recording.id().to_hex();
    let show: serde_json::Value =
        serde_json::from_str(&ok(&s, &["show", &id[..8], "--json"])).unwrap();
    assert_eq!(show["id"], id.as_str());
    assert!(show["store"]["stored_bytes"].as_u64().unwrap() > 0);
    assert!(!show["store"]["shared_with"].as_array().unwrap().is_empty());
    let text = ok(&s, &["show", &id[..8]]);
    assert!(text.contains("shares chunks with"), "{text}");
    // The import time is a UTC date, just now.
    let line = text.lines().find(|l| l.contains("imported at")).unwrap();
    assert!(
        line.contains(" UTC (") && line.ends_with("s ago)"),
        "{line}"
    );

    // export: LLVM files byte-identical, and a .rra that re-imports as present.
    let out_dir = tmp.path().join("exp");
    ok(&s, &["export", &id[..10], "-o", out_dir.to_str().unwrap()]);
    for e in std::fs::read_dir(saxpy.parent().unwrap()).unwrap() {
        let e = e.unwrap();
        let got = std::fs::read(out_dir.join(e.file_name())).unwrap();
        assert!(
            got == std::fs::read(e.path()).unwrap(),
            "{:?}",
            e.file_name()
        );
    }
    let rra = tmp.path().join("x.rra");
    ok(&s, &["export", &id[..10], "-o", rra.to_str().unwrap()]);
    let out = ok(&s, &["import", rra.to_str().unwrap()]);
    assert!(out.contains("1 already present"), "{out}");
    let native = tmp.path().join("native");
    ok(
        &s,
        &[
            "export",
            &id[..10],
            "-o",
            native.to_str().unwrap(),
            "--layout",
            "native",
        ],
    );
    assert!(std::fs::read_dir(&native).unwrap().count() >= 4);
    // A .rra into a fresh store gives the same ID.
    let s2 = tmp.path().join("store2");
    ok(&s2, &["import", rra.to_str().unwrap()]);
    assert_eq!(ls_ids(&s2), vec![id.clone()]);

    // tag / --remove / ls --tag.
    ok(&s, &["tag", &id[..8], "app=saxpy", "run=1"]);
    assert_eq!(ls(&["--tag", "app=saxpy"]).len(), 1);
    assert_eq!(ls(&["--tag", "app=saxpy", "--tag", "run=2"]).len(), 0);
    let tags = ok(&s, &["tag", &id[..8], "--remove", "run", "--json"]);
    assert!(tags.contains("app") && !tags.contains("run"), "{tags}");
    let (code, err) = fails(&s, &["tag", &id[..8], "novalue"]);
    assert_eq!(code, 2, "{err}");

    // rm + gc frees space; the rest still verifies.
    let before: serde_json::Value = serde_json::from_str(&ok(&s, &["stats", "--json"])).unwrap();
    let big: Vec<String> = ls(&["--label", "run-a"])
        .iter()
        .map(|r| r["id"].as_str().unwrap()[..12].to_string())
        .collect();
    let mut args = vec!["rm"];
    args.extend(big.iter().map(|s| s.as_str()));
    ok(&s, &args);
    let gc: serde_json::Value = serde_json::from_str(&ok(&s, &["gc", "--json"])).unwrap();
    assert!(
        gc["chunks_removed"].as_u64().unwrap() > 0 || gc["parts_removed"].as_u64().unwrap() > 0,
        "{gc}"
    );
    let after: serde_json::Value = serde_json::from_str(&ok(&s, &["stats", "--json"])).unwrap();
    assert_eq!(after["recordings"], 11);
    assert!(after["logical_bytes"].as_u64() < before["logical_bytes"].as_u64());
    ok(&s, &["verify", "--full"]);
}

#[test]
fn id_prefix_errors_have_distinct_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path();
    ok(
        s,
        &["import", fixtures().join("llvm22-host").to_str().unwrap()],
    );
    assert_eq!(fails(s, &["show", "abc"]).0, 4);
    assert_eq!(fails(s, &["show", "zzzzzz"]).0, 4);
    let ids = ls_ids(s);
    let missing = (0..=0xffffu32)
        .map(|n| format!("{n:04x}"))
        .find(|p| !ids.iter().any(|id| id.starts_with(p.as_str())))
        .unwrap();
    let (code, err) = fails(s, &["show", &missing]);
    assert_eq!(code, 3, "{err}");
    // Ambiguous: a 4-digit prefix shared by two IDs, if any; else the empty-ish
    // prefix check on a prefix shared by all is not possible, so construct
    // one from the data.
    let mut shared = None;
    for a in &ids {
        for b in &ids {
            if a != b && a[..4] == b[..4] {
                shared = Some(a[..4].to_string());
            }
        }
    }
    if let Some(p) = shared {
        let (code, err) = fails(s, &["show", &p]);
        assert_eq!(code, 6, "{err}");
        assert!(err.contains("ambiguous"), "{err}");
    }
    assert_eq!(
        fails(s, &["export", &ids[0][..8], "-o", "/proc/nope/x"]).0,
        7
    );
}

#[test]
fn record_runs_a_program_in_scratch_and_imports_what_it_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let src = fixtures().join("llvm22-host/reduction");
    // A "program" that checks the record environment and writes a
    // recording into its working directory, as libomptarget does.
    let prog = tmp.path().join("prog.sh");
    rrstore_tests::write_script(
        &prog,
        &format!(
            "#!/bin/sh\n[ \"$LIBOMPTARGET_RECORD\" = 1 ] || exit 9\n\
             [ \"$LIBOMPTARGET_RR_SAVE_OUTPUT\" = 1 ] || exit 9\n\
             [ \"$LIBOMPTARGET_RECORD_DIR\" = \"$PWD\" ] || exit 9\n\
             cp {}/* . && echo wrote\nexit 3\n",
            src.display()
        ),
    );
    let o = run(
        &s,
        &["record", "--label", "red", "--", prog.to_str().unwrap()],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{stdout} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("imported 1 recording(s)"), "{stdout}");
    assert!(stdout.contains("exit status: 3"), "{stdout}");
    let ls: serde_json::Value =
        serde_json::from_str(&ok(&s, &["ls", "--json", "--label", "red"])).unwrap();
    assert_eq!(ls.as_array().unwrap().len(), 1);
    // Scratch files are gone.
    let tmpdir = s.join("tmp");
    assert_eq!(
        std::fs::read_dir(&tmpdir).map(|d| d.count()).unwrap_or(0),
        0
    );
    // With --dir: recording files removed from it afterwards.
    let d = tmp.path().join("scratch");
    ok(
        &s,
        &[
            "record",
            "--dir",
            d.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &format!("cp {}/* .", src.display()),
        ],
    );
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    // A program that writes nothing: RECORD.
    let (code, err) = fails(&s, &["record", "--", "true"]);
    assert_eq!(code, 15, "{err}");
    let (code, _) = fails(&s, &["record", "--", "/nonexistent/prog"]);
    assert_eq!(code, 15);
}

fn assert_unchanged(
    s: &Path,
    before: &std::collections::BTreeMap<std::path::PathBuf, Vec<u8>>,
    ids: &[String],
) {
    assert_eq!(&tree_bytes(s), before);
    assert_eq!(ls_ids(s), ids);
}

#[test]
fn bad_input_is_a_clear_error_and_leaves_the_store_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    ok(
        &s,
        &[
            "import",
            fixtures().join("llvm22-host/globals").to_str().unwrap(),
        ],
    );
    let ids = ls_ids(&s);
    let before = tree_bytes(&s);

    let (code, err) = fails(&s, &["import", "/nonexistent/dir"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("/nonexistent/dir"), "{err}");
    assert_unchanged(&s, &before, &ids);

    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(empty.join("sub")).unwrap();
    std::fs::write(empty.join("sub/notes.json"), "{}").unwrap();
    let (code, err) = fails(&s, &["import", empty.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no LLVM recording"), "{err}");
    assert_unchanged(&s, &before, &ids);

    // A recording missing its snapshot.
    let broken = tmp.path().join("broken");
    copy_tree(&fixtures().join("llvm22-host/saxpy"), &broken);
    std::fs::remove_file(with_extension(&broken, "memory")).unwrap();
    let json = with_extension(&broken, "json");
    let (code, err) = fails(&s, &["import", json.to_str().unwrap()]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("memory"), "{err}");
    assert_unchanged(&s, &before, &ids);

    // Truncated snapshot (size no longer matches the descriptor).
    let trunc = tmp.path().join("trunc");
    copy_tree(&fixtures().join("llvm22-host/saxpy"), &trunc);
    std::fs::OpenOptions::new()
        .write(true)
        .open(with_extension(&trunc, "memory"))
        .unwrap()
        .set_len(100)
        .unwrap();
    let (code, err) = fails(&s, &["import", trunc.to_str().unwrap()]);
    assert_eq!(code, 4, "{err}");
    assert_unchanged(&s, &before, &ids);
}

/// The one file in `dir` with extension `ext`.
fn with_extension(dir: &Path, ext: &str) -> std::path::PathBuf {
    let mut found = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext));
    let one = found.next().unwrap();
    assert!(found.next().is_none(), "several .{ext} files in {dir:?}");
    one
}

/// Run the binary as user `nobody` (permissions do not apply to root).
fn as_nobody(store: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            bin(),
            "--store",
        ])
        .arg(store)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn unreadable_files_and_read_only_store_are_clear_errors() {
    if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: needs root and setpriv to drop privileges");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let chmod = |p: &Path, mode: &str| {
        assert!(std::process::Command::new("chmod")
            .args(["-R", mode])
            .arg(p)
            .status()
            .unwrap()
            .success())
    };
    chmod(tmp.path(), "a+rwx");
    let s = tmp.path().join("store");
    ok(
        &s,
        &[
            "import",
            fixtures().join("llvm22-host/globals").to_str().unwrap(),
        ],
    );
    let ids = ls_ids(&s);
    chmod(&s, "a+rwX");
    // Unreadable snapshot.
    let rec = tmp.path().join("rec");
    copy_tree(&fixtures().join("llvm22-host/saxpy"), &rec);
    chmod(&rec, "a+rX");
    for e in std::fs::read_dir(&rec).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "memory") {
            chmod(&p, "000");
        }
    }
    let before = tree_bytes(&s);
    let o = as_nobody(&s, &["import", rec.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("Permission denied") || err.contains("ermission"),
        "{err}"
    );
    assert_eq!(tree_bytes(&s), before);
    assert_eq!(ls_ids(&s), ids);
    // Read-only store directory.
    chmod(&rec, "a+r");
    chmod(&s, "a-w");
    let o = as_nobody(&s, &["import", rec.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(7), "{err}");
    chmod(&s, "u+w");
    assert_eq!(tree_bytes(&s), before);
    assert_eq!(ls_ids(&s), ids);
}

#[test]
fn export_of_several_ids_writes_one_directory_each_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let multi = fixtures().join("llvm22-host/multi");
    ok(&s, &["import", multi.to_str().unwrap()]);
    let ids = ls_ids(&s);
    assert_eq!(ids.len(), 8);
    let out = tmp.path().join("out");
    let mut args = vec!["export"];
    args.extend(ids.iter().map(|i| &i[..10]));
    args.extend(["-o", out.to_str().unwrap()]);
    ok(&s, &args);
    // Every recording comes back in <out>/<short id>/, byte for byte.
    for id in &ids {
        let dir = out.join(&id[..12]);
        let rec = llvm::load(
            &std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.extension().is_some_and(|x| x == "json"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(rec.recording.id().to_hex(), *id);
        for (_, f) in &rec.files {
            let orig = std::fs::read_dir(&multi)
                .unwrap()
                .map(|e| e.unwrap().path().join(f.file_name().unwrap()))
                .filter(|p| p.exists())
                .find(|p| std::fs::read(p).unwrap() == std::fs::read(f).unwrap());
            assert!(orig.is_some(), "{} matches no original file", f.display());
        }
    }
    // Several recordings cannot go into one .rra.
    let rra = tmp.path().join("x.rra");
    let (code, err) = fails(
        &s,
        &[
            "export",
            &ids[0][..10],
            &ids[1][..10],
            "-o",
            rra.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds one recording"), "{err}");
}
