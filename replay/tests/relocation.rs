//! Relocated replays through the library (issue 19): the stored-pointer
//! scan on both rehydration paths (the runner filling from files, the
//! engine's windows copied in), repetitions, and `--save-output`, which
//! writes the recorded-address form.

mod common;

use rrstore_format::PartRole;
use rrstore_replay::backend::host::ArenaIo;
use rrstore_replay::placement::Placement;
use rrstore_replay::{replay, RehydratePath, ReplayOptions, ReplaySource, Verdict};

/// A relocation base for an arena recorded at `base`: same page offset,
/// far from the recorders' mmap area.
fn target(base: u64) -> u64 {
    0x3100_0000_0000 + base % 4096
}

#[test]
fn pointer_recordings_verify_relocated_on_both_fill_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let mut all = common::descriptors("llvm22-relocation");
    all.extend(common::descriptors("llvm22-host"));
    for d in all {
        for io in [ArenaIo::Auto, ArenaIo::Copy] {
            let mut src = ReplaySource::llvm(&d).unwrap();
            let base = src.recording.arena.base.unwrap();
            let save = tmp.path().join("out.bin");
            let mut opts = ReplayOptions {
                placement: Placement::Relocate,
                relocate_to: Some(target(base)),
                repetitions: 2,
                save_output: Some(save.clone()),
                ..common::options()
            };
            opts.backends.host.arena_io = io;
            let r = replay(&mut src, &opts);
            assert_eq!(r.verdict, Verdict::Verified, "{d:?} {io:?}: {:?}", r.error);
            let p = r.placement.clone().unwrap();
            assert_eq!((p.mode, p.address), ("relocated", target(base)), "{d:?}");
            if io == ArenaIo::Copy {
                assert_eq!(r.timing.rehydrate_path, Some(RehydratePath::Engine));
            }
            let stem = d.to_string_lossy();
            if stem.contains("pointers") {
                // Field{n, src*, dst*} and Outer{scale, Inner*} -> Inner{n,
                // data*}: four stored pointers, found on either path.
                assert_eq!(p.rebased_pointers, 4, "{d:?} {io:?}");
            }
            // The saved arena is the recorded-address form: the recorded
            // output, byte for byte.
            let out = src.recording.part(PartRole::Output).unwrap();
            let saved = std::fs::read(&save).unwrap();
            assert_eq!(*blake3::hash(&saved).as_bytes(), out.blake3, "{d:?} {io:?}");
        }
    }
}
