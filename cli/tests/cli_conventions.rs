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
