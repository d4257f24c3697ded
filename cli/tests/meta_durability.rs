//! The recovery metadata (`meta/`) is durable before the commands that
//! write it return (spec/STORE.md, "Recovery metadata"): the files one
//! command writes are renamed into place, then fsynced with their
//! directories after the last of them; a removal fsyncs its directory.
//! Observed from the real binary's system calls with strace (skipped where
//! strace is missing or not allowed).

mod store_common;

use std::path::Path;

use store_common::*;

/// `rrstore --store S args` under strace; the trace's lines, or None when
/// strace cannot run here.
fn traced(store: &Path, log: &Path, args: &[&str]) -> Option<Vec<String>> {
    let o = std::process::Command::new("strace")
        .args(["-f", "-y", "-qq", "-s", "512", "-o"])
        .arg(log)
        .args([
            "-e",
            "trace=fsync,fdatasync,syncfs,rename,renameat,renameat2,unlink,unlinkat",
        ])
        .arg(bin())
        .arg("--store")
        .arg(store)
        .args(args)
        .env("HOME", isolated_home())
        .env("XDG_CONFIG_HOME", isolated_home().join("config"))
        .env_remove("RRSTORE_CONFIG")
        .env_remove("RRSTORE_DIR")
        .output()
        .ok()?;
    let trace = std::fs::read_to_string(log).ok()?;
    if !o.status.success() {
        // strace itself refused (no ptrace here), or the command failed.
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("strace") || err.contains("ptrace"),
            "{args:?}: {err}"
        );
        return None;
    }
    Some(trace.lines().map(str::to_string).collect())
}

/// The destination of a traced `rename`/`renameat2` line.
fn renamed_to(line: &str) -> String {
    let quoted: Vec<&str> = line.split('"').collect();
    // ... "from", ... "to" ...: the fourth piece is the destination.
    quoted[3].to_string()
}

/// The index of the first line after `from` that fsyncs a descriptor open
/// on `path`.
fn fsync_of(lines: &[String], from: usize, path: &str) -> Option<usize> {
    (from..lines.len()).find(|&i| {
        let l = &lines[i];
        (l.contains("fsync(") || l.contains("fdatasync(")) && l.contains(&format!("<{path}>)"))
    })
}

#[test]
fn meta_files_of_an_import_are_made_durable_after_the_last_rename() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    let log = tmp.path().join("trace");
    let host = fixtures().join("llvm22-host");
    let Some(lines) = traced(&s, &log, &["import", host.to_str().unwrap()]) else {
        eprintln!("strace cannot trace here; skipped");
        return;
    };
    let meta = s.join("meta").canonicalize().unwrap();
    let meta = meta.to_str().unwrap();
    let renames: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("rename") && lines[i].contains(meta))
        .collect();
    // A recording file and a chunk list per part, for several recordings.
    assert!(renames.len() >= 8, "{}", lines.join("\n"));
    let last_rename = *renames.last().unwrap();
    assert!(
        !lines.iter().any(|l| l.contains("syncfs(")),
        "no syncfs (it would wait for every process's dirty data):\n{}",
        lines.join("\n")
    );
    // Every file renamed into meta/ is fsynced after the last rename (not
    // as it is written: the cost the batch removes), and so is its directory.
    for &r in &renames {
        let to = renamed_to(&lines[r]);
        let synced = fsync_of(&lines, last_rename + 1, &to);
        assert!(
            synced.is_some(),
            "{to} not fsynced after the last rename:\n{}",
            lines.join("\n")
        );
        let dir = Path::new(&to)
            .parent()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            fsync_of(&lines, last_rename + 1, &dir).is_some(),
            "{dir} not fsynced"
        );
    }
    let early = lines[..last_rename]
        .iter()
        .filter(|l| l.contains("fsync(") && l.contains(meta))
        .count();
    assert_eq!(early, 0, "{}", lines.join("\n"));

    // rm: its recording file's removal is made durable.
    let id = &ls_ids(&s)[0];
    let Some(lines) = traced(&s, &log, &["rm", &id[..12]]) else {
        return;
    };
    let file = rrstore_store::recovery::recording_path(&s, &id.parse().unwrap())
        .canonicalize()
        .ok();
    assert!(file.is_none(), "the recording file is still there");
    let at = lines
        .iter()
        .position(|l| l.contains("unlink") && l.contains(&id[..]))
        .unwrap_or_else(|| panic!("no unlink of {id}:\n{}", lines.join("\n")));
    let dir = Path::new(meta).join("recordings").join(&id[..2]);
    assert!(
        fsync_of(&lines, at + 1, dir.to_str().unwrap()).is_some(),
        "{} not fsynced after the removal:\n{}",
        dir.display(),
        lines.join("\n")
    );
}

/// An import of several recordings into an existing store syncs the
/// index's log once, after its last commit and before the `meta/` files
/// (spec/STORE.md, "Import durability"), instead of once per recording.
#[test]
fn an_import_syncs_the_index_log_once_before_the_meta_files() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    let log = tmp.path().join("trace");
    let first = fixtures().join("llvm19-host");
    ok(&s, &["import", "-q", first.to_str().unwrap()]);
    let before = ls_ids(&s).len();
    let host = fixtures().join("llvm22-host");
    let Some(lines) = traced(&s, &log, &["import", host.to_str().unwrap()]) else {
        eprintln!("strace cannot trace here; skipped");
        return;
    };
    // (The log is removed when the last connection closes.)
    let wal = s.canonicalize().unwrap().join("index.sqlite-wal");
    let wal = wal.to_str().unwrap();
    let wal_syncs: Vec<usize> = (0..lines.len())
        .filter(|&i| {
            let l = &lines[i];
            (l.contains("fsync(") || l.contains("fdatasync(")) && l.contains(&format!("<{wal}>)"))
        })
        .collect();
    let pack_syncs: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("fdatasync(") && lines[i].contains(".pack>)"))
        .collect();
    assert!(
        pack_syncs.len() >= 3,
        "one pack sync per recording:\n{}",
        lines.join("\n")
    );
    let meta = s.canonicalize().unwrap().join("meta");
    let syncfs = lines
        .iter()
        .position(|l| l.contains("fdatasync(") && l.contains(meta.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no meta/ sync:\n{}", lines.join("\n")));
    // After the second recording's pack sync (SQLite itself syncs the log's
    // header when it starts reusing it, at the first commit), the log is
    // synced once, before the meta/ files: not once per recording.
    let between: Vec<&usize> = wal_syncs
        .iter()
        .filter(|&&i| i > pack_syncs[1] && i < syncfs)
        .collect();
    assert_eq!(
        between.len(),
        1,
        "one sync of the index's log for the whole import:\n{}",
        lines.join("\n")
    );
    assert!(
        wal_syncs
            .iter()
            .all(|&i| i < pack_syncs[1] || i > *pack_syncs.last().unwrap()),
        "no log sync between recordings:\n{}",
        lines.join("\n")
    );
    // Every recording is there after a fresh open, and the store verifies.
    assert!(ls_ids(&s).len() >= before + 3);
    ok(&s, &["verify"]);
}
