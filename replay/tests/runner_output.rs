//! What a replay's runner prints travels in the replay's report
//! (`ReplayReport::runner_output`), not through a process-wide buffer the
//! command reads: a real host runner runs a compiled kernel that prints,
//! and the report of that replay holds its lines, the next replay's none
//! of them.

mod common;

use rrstore_replay::{replay, ReplaySource};

const GLOBALS: &str = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13";

fn printing_kernel(kernel: &str) -> String {
    format!(
        r#"
#include <stdio.h>
void {kernel}(long kle, long out) {{
    printf("printed by the kernel\n");
    fprintf(stderr, "and on stderr\n");
    fflush(stdout);
}}
"#
    )
}

#[test]
fn the_runners_output_is_in_the_replays_report() {
    let dir = tempfile::tempdir().unwrap();
    let j =
        rrstore_tests::copy_recording(&common::fixtures().join(GLOBALS), &dir.path().join("rec"));
    let kernel = j.file_stem().unwrap().to_str().unwrap().to_string();
    rrstore_tests::replace_kernel(&j, &printing_kernel(&kernel));
    let opts = common::options();

    let mut src = ReplaySource::llvm(&j).unwrap();
    let r = replay(&mut src, &opts);
    let text = String::from_utf8_lossy(&r.runner_output.bytes);
    assert!(
        text.contains("printed by the kernel\n"),
        "{:?}: {text:?}",
        r.verdict
    );
    assert!(text.contains("and on stderr\n"), "{text:?}");
    assert_eq!(r.runner_output.dropped, 0);
    // Shown once: taken into this report, not left for the next one.
    let plain = &common::descriptors("llvm22-host")[0];
    let mut src = ReplaySource::llvm(plain).unwrap();
    let next = replay(&mut src, &opts);
    assert!(
        !String::from_utf8_lossy(&next.runner_output.bytes).contains("printed by the kernel"),
        "{:?}",
        next.runner_output
    );
}
