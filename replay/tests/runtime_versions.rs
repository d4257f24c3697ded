//! Host recordings of two LLVM versions replay on one machine without
//! `LD_LIBRARY_PATH`: LLVM 19's runtime is found in `/usr/lib/llvm-19/lib`
//! (where Debian's libomp5-19 installs it, outside the loader's path) and
//! LLVM 22's where liboffload-22 puts it. A runtime found nowhere is named
//! with the Debian package that ships it.

mod common;

use rrstore_replay::{replay, ReplaySource, Verdict};

#[test]
fn llvm19_and_llvm22_recordings_replay_side_by_side() {
    let v19 = common::descriptors("llvm19-host");
    assert_eq!(v19.len(), 2);
    let v22 = common::descriptors("llvm22-host");
    // Alternate the versions, so each runner set-up meets the other's.
    let order = [&v19[0], &v22[0], &v19[1], &v22[1], &v19[0]];
    for d in order {
        let mut src = ReplaySource::llvm(d).unwrap();
        let mut opts = common::options();
        opts.backends
            .host
            .env
            .push(("LD_LIBRARY_PATH".into(), "".into()));
        let r = replay(&mut src, &opts);
        assert_eq!(
            r.verdict,
            Verdict::Verified,
            "{}: {:?} {:?}",
            d.display(),
            r.error,
            r.mismatch
        );
        let want = if v19.contains(d) {
            "libomptarget.so.19"
        } else {
            "libomptarget.so.22"
        };
        assert!(
            r.runtime_libraries.iter().any(|l| l.contains(want)),
            "{}: {:?}",
            d.display(),
            r.runtime_libraries
        );
    }
}

#[test]
fn a_missing_llvm19_runtime_names_libomp5_19() {
    let d = &common::descriptors("llvm19-host")[0];
    let mut src = ReplaySource::llvm(d).unwrap();
    let empty = tempfile::tempdir().unwrap();
    let mut opts = common::options();
    // The test hook replaces the directories searched for runtimes.
    opts.backends
        .host
        .env
        .push(("RRSTORE_RUNTIME_SEARCH".into(), empty.path().into()));
    let r = replay(&mut src, &opts);
    let err = r.error.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        err.contains("libomptarget.so.19.1") && err.contains("apt-get install -y libomp5-19"),
        "{:?}: {err}",
        r.verdict
    );
    assert!(!err.contains("liboffload-19"), "{err}");
}
