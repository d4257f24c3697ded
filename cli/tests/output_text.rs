//! Text output and help details people read: `show`'s chunk-sharing table
//! is aligned, and every `--json` flag says what it prints.

mod store_common;

use store_common::*;

#[test]
fn show_aligns_the_recordings_sharing_chunks() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let fx = fixtures().join("llvm22-host");
    ok(&s, &["import", fx.to_str().unwrap(), "--label", "run1"]);
    // multi/ holds eight recordings of one program: they share chunks, and
    // their kernel names and shared sizes have different lengths.
    let ls: serde_json::Value = serde_json::from_str(&ok(&s, &["ls", "--json"])).unwrap();
    let id = ls
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["source"].as_str().unwrap_or("").contains("multi"))
        .map(|r| r["id"].as_str().unwrap().to_string())
        .unwrap();
    let out = ok(&s, &["show", &id]);
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.contains("shares chunks with:"))
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .collect();
    assert!(rows.len() >= 2, "expected several sharers:\n{out}");
    // Column starts: after the 12-digit ID, the kernel, then the size
    // (right-aligned: its end), then the label.
    let kernel_ends: Vec<usize> = rows
        .iter()
        .map(|r| {
            let rest = &r[4 + 12 + 2..];
            4 + 12 + 2 + rest.find("  ").unwrap()
        })
        .collect();
    let label_starts: Vec<usize> = rows.iter().map(|r| r.rfind("  ").unwrap() + 2).collect();
    for r in &rows {
        assert!(r.contains("run1"), "{r}");
    }
    assert!(
        label_starts.iter().all(|&c| c == label_starts[0]),
        "labels not aligned:\n{}",
        rows.join("\n")
    );
    let size_ends: Vec<usize> = label_starts.iter().map(|c| c - 2).collect();
    assert!(
        size_ends.iter().all(|&c| c == size_ends[0]),
        "sizes not right-aligned:\n{}",
        rows.join("\n")
    );
    assert!(kernel_ends.iter().all(|&e| e <= size_ends[0]));
}

/// Every command with `--json` says in its help what the flag prints.
#[test]
fn every_json_flag_has_help_text() {
    let commands: &[&[&str]] = &[
        &["ls"],
        &["show"],
        &["stats"],
        &["verify"],
        &["inspect"],
        &["devices"],
        &["history"],
        &["replay"],
        &["check"],
        &["diff"],
        &["bisect"],
        &["gc"],
        &["import"],
        &["tag"],
        &["image", "ls"],
        &["remote", "ls"],
        &["push"],
        &["pull"],
    ];
    let mut bare = Vec::new();
    for c in commands {
        let mut args = c.to_vec();
        args.push("--help");
        let o = store_common::command().args(&args).output().unwrap();
        let help = String::from_utf8_lossy(&o.stdout);
        let lines: Vec<&str> = help.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with("--json"))
            .unwrap_or_else(|| panic!("{c:?} has no --json:\n{help}"));
        // Short help puts the text after the flag, long help on the next line.
        let next = lines.get(at + 1).map(|l| l.trim()).unwrap_or("");
        let described =
            lines[at].trim() != "--json" || (!next.is_empty() && !next.starts_with('-'));
        if !described {
            bare.push(c.join(" "));
        }
    }
    assert!(bare.is_empty(), "--json without help: {bare:?}");
}

/// `--store`'s help names every place the default store comes from.
#[test]
fn store_help_names_the_default_locations() {
    let o = store_common::command().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for want in [
        "$RRSTORE_DIR",
        "$XDG_DATA_HOME/rrstore",
        "~/.local/share/rrstore",
    ] {
        assert!(help.contains(want), "--store help lacks {want}:\n{help}");
    }
}
