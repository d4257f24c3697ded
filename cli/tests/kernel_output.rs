//! The kernel's output reaches every command that replays through the
//! replays' reports: `replay` and `check` (text) show a compiled host
//! kernel's lines, prefixed `  kernel| `, apart from their own.

mod store_common;

use rrstore_tests::fixtures;

const GLOBALS: &str = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13";

/// `rrstore --store STORE args...`.
use store_common::run as rrstore;

#[test]
fn replay_and_check_show_what_the_kernel_printed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let rec = dir.path().join("rec");
    let j = rrstore_tests::recording_with_kernel(&fixtures().join(GLOBALS), &rec, |kernel| {
        format!(
            "#include <stdio.h>\nvoid {kernel}(long kle, long out) {{ printf(\"printed by the kernel\\n\"); fflush(stdout); }}\n"
        )
    });
    let o = rrstore(&store, &["import", j.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = "  kernel| printed by the kernel";
    for args in [&["replay", j.to_str().unwrap()][..], &["check"][..]] {
        let o = rrstore(&store, args);
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            stdout.lines().any(|l| l == line),
            "{args:?}: {stdout}{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
