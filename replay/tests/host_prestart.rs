//! A host runner started before the recording is opened
//! (`ReplayOptions::start_backend_early`) is used by the next replay with the same
//! settings; a spare with other settings, or one that died, is not, and the
//! replay starts its own runner and still verifies.

mod common;

use rrstore_replay::{replay, ReplaySource, Verdict};

fn verify_globals(opts: &rrstore_replay::ReplayOptions) {
    let mut src = ReplaySource::llvm(&common::globals_fixture()).unwrap();
    let r = replay(&mut src, opts);
    assert_eq!(r.verdict, Verdict::Verified, "{:?}", r.error);
    assert_eq!(
        r.output_blake3,
        Some(
            src.recording
                .part(rrstore_format::PartRole::Output)
                .unwrap()
                .blake3
        )
    );
}

#[test]
fn prestarted_runners_are_used_or_replaced() {
    let opts = common::options();

    // Started first, used by the replay (reserve takes only a few ms then).
    opts.start_backend_early();
    verify_globals(&opts);

    // A spare with other settings is not used for this replay.
    let mut other = common::options();
    other.num_threads = Some(1);
    other.start_backend_early();
    verify_globals(&opts);
    // ... but by one with its settings (OMP_NUM_THREADS=1 still verifies:
    // the globals kernel has no float reduction).
    verify_globals(&other);

    // A spare started on a thread that has ended was killed with it
    // (PR_SET_PDEATHSIG): the replay starts a fresh runner.
    let o = opts.clone();
    std::thread::spawn(move || o.start_backend_early())
        .join()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    verify_globals(&opts);
}
