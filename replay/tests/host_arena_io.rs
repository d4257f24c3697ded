//! The host runner's arena is filled by the runner from the input's files
//! (the default), or by the parent with `process_vm_writev` (`Copy`), or,
//! where a sandbox forbids that, over the control socket; it is read back
//! with `process_vm_readv` or over the socket. Every way gives
//! byte-identical results on real recordings, in the fast path (verified by
//! the runner's in-place hash) and in the paths that copy the arena back (a
//! located mismatch, `--save-output`, repetitions).

mod common;

use rrstore_format::PartRole;
use rrstore_replay::backend::host::{fills_from_files, ArenaIo};
use rrstore_replay::{replay, RehydratePath, ReplayOptions, ReplaySource, Verdict};

const SAXPY: &str = "__omp_offloading_fe00_9ae056_main_l13";

fn options(io: ArenaIo) -> ReplayOptions {
    let mut opts = common::options();
    opts.backends.host.arena_io = io;
    opts
}

#[test]
fn both_transports_verify_every_recording_and_save_the_same_output() {
    let tmp = tempfile::tempdir().unwrap();
    for d in common::descriptors("llvm22-host") {
        let mut saved = Vec::new();
        for io in [ArenaIo::Auto, ArenaIo::Copy, ArenaIo::Shared] {
            for repetitions in [1, 2] {
                let save = tmp.path().join(format!("{io:?}.out"));
                let opts = ReplayOptions {
                    repetitions,
                    save_output: Some(save.clone()),
                    ..options(io)
                };
                let mut src = ReplaySource::llvm(&d).unwrap();
                let r = replay(&mut src, &opts);
                assert_eq!(r.verdict, Verdict::Verified, "{d:?} {io:?}: {:?}", r.error);
                // The path of the last repetition: the runner reads files
                // only before the image is loaded, so a second
                // repetition's input is always written by rrstore.
                let from_files = r.timing.rehydrate_path == Some(RehydratePath::Files);
                let size = src.recording.arena.size;
                assert_eq!(
                    from_files,
                    repetitions == 1 && io == ArenaIo::Auto && fills_from_files(size),
                    "{d:?} {io:?} x{repetitions}"
                );
                let out = src.recording.part(PartRole::Output).unwrap();
                assert_eq!(r.output_blake3, Some(out.blake3), "{d:?} {io:?}");
                if repetitions == 2 {
                    saved.push(std::fs::read(&save).unwrap());
                }
            }
        }
        assert!(saved[0] == saved[1] && saved[1] == saved[2], "{d:?}");
        assert_eq!(*blake3::hash(&saved[0]).as_bytes(), {
            let src = ReplaySource::llvm(&d).unwrap();
            src.recording.part(PartRole::Output).unwrap().blake3
        });
    }
}

#[test]
fn both_transports_locate_the_same_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    let json = common::copy_recording(&common::saxpy_fixture(), tmp.path(), SAXPY);
    let out = tmp.path().join(format!("{SAXPY}.original.output"));
    let mut b = std::fs::read(&out).unwrap();
    for v in &mut b[3000..3016] {
        *v ^= 0x5a;
    }
    std::fs::write(&out, &b).unwrap();
    let mut reports = Vec::new();
    for io in [ArenaIo::Auto, ArenaIo::Copy, ArenaIo::Shared] {
        let mut src = ReplaySource::llvm(&json).unwrap();
        let r = replay(&mut src, &options(io));
        assert_eq!(r.verdict, Verdict::Mismatch, "{io:?}: {:?}", r.error);
        let m = r.mismatch.unwrap();
        assert_eq!((m.differing_bytes, m.first_offset), (16, 3000), "{io:?}");
        reports.push(r.output_blake3);
    }
    assert!(reports[0] == reports[1] && reports[1] == reports[2]);
}
