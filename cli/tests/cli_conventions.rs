//! Issue 22's remaining conventions through the real binary: `--quiet` on
//! import/push/pull, `history` filters, `image rm`, `--json` on `record`
//! and `image rm`, the configured default remote, demangled kernel names.

mod store_common;

use std::path::Path;

use store_common::*;

fn saxpy() -> String {
    fixtures().join("llvm22-host/saxpy").display().to_string()
}

fn add_file_remote(store: &Path, name: &str, dir: &Path) {
    ok(
        store,
        &["remote", "add", name, &format!("file://{}", dir.display())],
    );
}

#[test]
fn quiet_import_push_pull_print_only_the_summary_line() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    let out = ok(&s, &["import", "--quiet", &saxpy()]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("imported 1 recording(s)"), "{out}");
    add_file_remote(&s, "r", &t.path().join("r"));
    let out = ok(&s, &["push", "-q", "r", "--all"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("pushed 1 recording(s)"), "{out}");
    let s2 = t.path().join("s2");
    add_file_remote(&s2, "r", &t.path().join("r"));
    let out = ok(&s2, &["pull", "--quiet", "r", "--all"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("pulled 1 recording(s)"), "{out}");
    // Without --quiet the per-recording line comes first.
    let out = ok(&s2, &["import", &saxpy()]);
    assert_eq!(out.lines().count(), 2, "{out}");
}

/// Rows of `history --json` with `args`: (recording ID, row ID).
fn history_rows(store: &Path, args: &[&str]) -> Vec<(String, i64)> {
    let mut all = vec!["history", "--json"];
    all.extend_from_slice(args);
    let v: serde_json::Value = serde_json::from_str(&ok(store, &all)).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["recording"].as_str().unwrap().to_string(),
                r["id"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn history_filters_by_kernel_label_time_and_count() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    let host = fixtures().join("llvm22-host");
    let red = host.join("reduction").display().to_string();
    ok(&s, &["import", "--label", "a-run", &saxpy()]);
    ok(&s, &["import", "--label", "b-run", &red]);
    let ids = ls_ids(&s);
    for id in ids.iter().chain(ids.iter()) {
        ok(&s, &["replay", &id[..12]]);
    }
    assert_eq!(history_rows(&s, &[]).len(), 4);
    let saxpy_id = &history_rows(&s, &["--kernel", "*9ae056*"]);
    assert_eq!(saxpy_id.len(), 2);
    let by_label = history_rows(&s, &["--label", "a-*"]);
    assert_eq!(&by_label, saxpy_id);
    assert!(history_rows(&s, &["--label", "nothing*"]).is_empty());
    let all = history_rows(&s, &[]);
    assert_eq!(history_rows(&s, &["--limit", "3"]), all[1..].to_vec());
    let b = history_rows(&s, &["--label", "b-run"]);
    assert_eq!(b.len(), 2);
    assert_eq!(
        history_rows(&s, &["--label", "b-run", "--limit", "1"]),
        b[1..].to_vec()
    );
    assert_eq!(history_rows(&s, &["--since", "1d"]), all);
    assert!(history_rows(&s, &["--since", "2999-01-01"]).is_empty());
    let out = ok(&s, &["history", "--kernel", "*9ae056*"]);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert_eq!(fails(&s, &["history", "--since", "soon"]).0, 2);
}
