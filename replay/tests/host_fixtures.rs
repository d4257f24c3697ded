//! Every real LLVM 22 host recording in tests/fixtures replays on the host
//! backend and verifies byte-exactly, straight from its `.json`.

mod common;

use rrstore_replay::{replay, ReplaySource, Verdict};

fn replay_all(set: &str) {
    let descs = common::descriptors(set);
    assert!(descs.len() >= 11, "{set}: {} recordings", descs.len());
    for d in descs {
        let mut src = ReplaySource::llvm(&d).unwrap();
        let r = replay(&mut src, &common::options());
        assert_eq!(
            r.verdict,
            Verdict::Verified,
            "{}: {:?} {:?}",
            d.display(),
            r.error,
            r.mismatch
        );
        assert_eq!(r.backend, "host");
        assert_eq!(r.timing.kernel_ns.len(), 1);
        let out = src
            .recording
            .part(rrstore_format::PartRole::Output)
            .unwrap();
        assert_eq!(r.output_hash, Some(out.blake3));
        assert!(
            r.runtime_libraries
                .iter()
                .any(|l| l.contains("libomptarget.so.22")),
            "{:?}",
            r.runtime_libraries
        );
    }
}

#[test]
fn llvm22_host_recordings_verify() {
    replay_all("llvm22-host");
}

#[test]
fn upstream_native_recordings_verify() {
    replay_all("upstream-native");
}
