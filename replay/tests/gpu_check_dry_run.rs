//! `scripts/gpu-check.sh --dry-run` (issue 42): the hardware script parses,
//! kills a step that hangs with its `timeout`, and leaves exactly its three
//! outputs (summary, log, one archive of details) under `$OUT`, no more
//! than two folders deep, without a GPU, nvcc or network.

use std::path::Path;
use std::process::Command;

#[test]
fn the_gpu_check_dry_run_parses_times_out_and_packages() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = tempfile::tempdir().unwrap();
    let run = Command::new("bash")
        .arg(root.join("scripts/gpu-check.sh"))
        .arg("--dry-run")
        .env("OUT", out.path())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{log}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let mut files: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["details.tar.gz", "log.txt", "summary.txt"]);
    let summary = std::fs::read_to_string(out.path().join("summary.txt")).unwrap();
    // The first minute's cases come first, each on one line.
    let first: Vec<&str> = summary
        .lines()
        .take(4)
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        first,
        [
            "devices",
            "small-default",
            "small-sandbox-off",
            "small-in-process"
        ]
    );
    assert!(
        summary.contains("hang-killed PASS rc=124 want=124")
            && summary.contains("killed by its 2 s timeout"),
        "{summary}"
    );
    assert!(!summary.contains(" FAIL"), "{summary}");
    let listed = Command::new("tar")
        .arg("tzf")
        .arg(out.path().join("details.tar.gz"))
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("details/small-default.txt"), "{listed}");
    assert!(
        listed.lines().all(|l| l.matches('/').count() <= 2),
        "{listed}"
    );
}
