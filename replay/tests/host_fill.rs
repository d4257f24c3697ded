//! The host runner fills the arena itself from the files that hold the
//! input (a store's packs, an `.rra`, an LLVM `.memory` file), checking each
//! chunk's blake3; a plan it cannot carry out (a file gone, bytes outside
//! the arena, a corrupt chunk) is reported without harming the runner, and
//! the engine then hands the bytes over itself, which names a corrupt
//! chunk's part and byte range.

mod common;

use std::os::unix::fs::FileExt;

use rrstore_format::extents::PartExtents;
use rrstore_format::PartRole;
use rrstore_replay::backend::host::{ArenaIo, HostBackend, HostConfig};
use rrstore_replay::backend::{Backend, LaunchParams};
use rrstore_replay::{replay, ReplaySource, Verdict};
use rrstore_store::{ImportOptions, Store};

fn config() -> HostConfig {
    let opts = common::options();
    HostConfig {
        runner: opts.host_runner.clone().unwrap(),
        env: opts.host_env.clone(),
        arena_io: ArenaIo::Auto,
    }
}

fn read(src: &mut ReplaySource, role: PartRole) -> Vec<u8> {
    let len = src.recording.part(role).map_or(0, |p| p.len);
    let mut buf = vec![0u8; len as usize];
    src.parts.read_part_into(role, &mut buf).unwrap();
    buf
}

#[test]
fn a_bad_plan_is_reported_and_the_runner_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let d = common::saxpy_fixture();
    let mut src = ReplaySource::llvm(&d).unwrap();
    let rec = src.recording.clone();
    let (image, expected) = (
        read(&mut src, PartRole::Image),
        rec.part(PartRole::Output).unwrap().blake3,
    );
    let plan = src.parts.extents(PartRole::Input).unwrap().unwrap();
    assert_eq!(plan.len(), rec.arena.size);

    let mut b = HostBackend::new(config());
    b.reserve(rec.arena.base.unwrap(), rec.arena.size).unwrap();
    let fill = |b: &mut HostBackend, plan: &PartExtents| {
        assert!(b.start_fill(plan).unwrap());
        b.finish_fill().unwrap()
    };

    let gone = PartExtents::plain_file(tmp.path().join("gone.memory"), rec.arena.size);
    let why = fill(&mut b, &gone).unwrap_err();
    assert!(why.contains("gone.memory"), "{why}");

    let long = PartExtents::plain_file(plan.files[0].clone(), rec.arena.size + 4096 * 1024);
    let why = fill(&mut b, &long).unwrap_err();
    assert!(why.contains("outside the arena"), "{why}");

    let mut wrong = plan.clone();
    let last = wrong.extents.len() - 1;
    wrong.extents[last].hash = Some([7; 32]);
    let why = fill(&mut b, &wrong).unwrap_err();
    let at = rec.arena.size - wrong.extents[last].len;
    assert!(
        why.contains("corrupt") && why.contains(&format!("at byte {at} of the input")),
        "{why}"
    );

    // The good plan after all that: the replay verifies.
    fill(&mut b, &plan).unwrap();
    b.load_image(&image, &rec.kernel).unwrap();
    let params = LaunchParams {
        num_teams: rec.launch.num_teams,
        num_threads: rec.launch.num_threads,
        shared_memory: rec.launch.shared_memory,
        loop_trip_count: rec.launch.loop_trip_count,
        timeout: None,
    };
    b.launch(&rec.args, &params).unwrap();
    assert_eq!(b.arena_hash().unwrap(), Some(expected));
}

#[test]
fn a_corrupt_input_chunk_in_the_store_is_named_by_its_byte_range() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path()).unwrap();
    let mut rec = rrstore_format::llvm::load(&common::saxpy_fixture()).unwrap();
    let r = rec.recording.clone();
    store
        .import(&r, &mut rec, &ImportOptions::default(), &mut |_| {})
        .unwrap();
    let id = r.id();
    let open = || ReplaySource::open(&id.to_hex(), || Ok(Store::open(tmp.path()).unwrap()));

    // Intact: filled from the packs by the runner.
    let report = replay(&mut open().unwrap(), &common::options());
    assert_eq!(report.verdict, Verdict::Verified, "{:?}", report.error);
    assert_eq!(report.timing.rehydrate_path, "files");

    // Flip a byte in the stored bytes of the input's last chunk: the fill
    // fails on its hash, and so does the engine's own decoding after it.
    let mut src = open().unwrap();
    let plan = src.parts.extents(PartRole::Input).unwrap().unwrap();
    let last = plan.extents.last().unwrap();
    let start = r.arena.size - last.len;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&plan.files[last.file as usize])
        .unwrap();
    let mut byte = [0u8];
    let at = last.offset + last.stored_len / 2;
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x40], at).unwrap();

    let report = replay(&mut src, &common::options());
    assert_eq!(report.verdict, Verdict::Error);
    let err = report.error.unwrap();
    assert!(
        err.contains("input") && err.contains(&format!("{start}")),
        "the error names the part and the range: {err}"
    );
}
