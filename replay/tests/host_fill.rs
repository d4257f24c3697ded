//! The host runner fills the arena itself from the files that hold the
//! input (a store's packs, an `.rra`, an LLVM `.memory` file), checking each
//! chunk's blake3; a plan it cannot carry out (a file gone, bytes outside
//! the arena, a corrupt chunk) is reported without harming the runner, and
//! the engine then hands the bytes over itself, which names a corrupt
//! chunk's part and byte range.

mod common;

use std::os::unix::fs::FileExt;

use rrstore_format::chunk::{self, Codec};
use rrstore_format::extents::{Extent, PartExtents};
use rrstore_format::PartRole;
use rrstore_replay::backend::host::{HostBackend, FILL_LARGE};
use rrstore_replay::backend::Backend;
use rrstore_replay::{replay, RehydratePath, ReplaySource, Verdict};
use rrstore_store::{ImportOptions, Store};

#[test]
fn a_bad_plan_is_reported_and_the_runner_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let d = common::globals_fixture();
    let mut src = ReplaySource::llvm(&d).unwrap();
    let rec = src.recording.clone();
    let (image, globals, expected) = (
        common::read_part(&mut src, PartRole::Image),
        common::read_part(&mut src, PartRole::Globals),
        rec.part(PartRole::Output).unwrap().blake3,
    );
    let plan = src.parts.extents(PartRole::Input).unwrap().unwrap();
    assert_eq!(plan.len(), rec.arena.size);

    let mut b = HostBackend::new(common::host_config());
    b.reserve(rec.arena.base.unwrap(), rec.arena.size).unwrap();
    let fill = |b: &mut HostBackend, plan: &PartExtents| {
        assert!(b.fills_from_files(plan.len()), "{} bytes", plan.len());
        b.start_fill(plan).unwrap();
        b.finish_fill().unwrap()
    };

    let gone = PartExtents::plain_file(tmp.path().join("gone.memory"), rec.arena.size);
    let why = fill(&mut b, &gone).unwrap_err();
    assert!(why.contains("gone.memory"), "{why}");

    let long = PartExtents::plain_file(plan.files[0].clone(), rec.arena.size + FILL_LARGE);
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
    assert_eq!(
        common::write_globals_and_launch(&mut b, &rec, &globals),
        Some(expected)
    );
}

/// A 17 MiB input from two files, raw and zstd chunks: large enough for the
/// runner to fill it, on several threads.
#[test]
fn a_large_fill_from_several_files_lands_byte_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let raw = rrstore_tests::XorShift::new(0x9e3779b97f4a7c15).bytes(15 << 20, 0);
    let squeezable: Vec<u8> = (0..2u32 << 20).map(|i| (i / 4096) as u8).collect();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::write(&a, &raw).unwrap();
    let mut plan = PartExtents {
        files: vec![a, b.clone()],
        extents: Vec::new(),
    };
    // Chunk `plain` stored as `stored_len` bytes at `offset` of file `file`.
    let extent = |file, offset, stored_len: usize, codec, plain: &[u8]| Extent {
        file,
        offset,
        stored_len: stored_len as u64,
        len: plain.len() as u64,
        codec,
        hash: Some(chunk::hash(plain)),
    };
    for (i, piece) in raw.chunks(64 << 10).enumerate() {
        let e = extent(0, (i << 16) as u64, piece.len(), Codec::Raw, piece);
        plan.extents.push(e);
    }
    let mut stored = Vec::new();
    for piece in squeezable.chunks(256 << 10) {
        let (codec, bytes) = chunk::compress(piece, 3);
        assert_eq!(codec, Codec::Zstd);
        let e = extent(1, stored.len() as u64, bytes.len(), codec, piece);
        plan.extents.push(e);
        stored.extend_from_slice(&bytes);
    }
    // A run of four equal chunks (zero pages): one stored entry, decoded
    // once and copied three times.
    let zeros = vec![0u8; 64 << 10];
    let (codec, bytes) = chunk::compress(&zeros, 3);
    let e = extent(1, stored.len() as u64, bytes.len(), codec, &zeros);
    plan.extents.extend([e; 4]);
    stored.extend_from_slice(&bytes);
    std::fs::write(&b, &stored).unwrap();
    let mut whole = raw.clone();
    whole.extend_from_slice(&squeezable);
    whole.extend_from_slice(&[7u8; 256 << 10]);

    // An address this process got from the kernel and gave back: free in
    // the (executed) runner too, almost surely; the backend retries in
    // fresh runners if not.
    let len = whole.len();
    let p = common::map_anonymous(len);
    // SAFETY: unmapping the mapping just made, which nothing uses.
    unsafe { libc::munmap(p, len) };
    let base = p as u64;
    let mut b = HostBackend::new(common::host_config());
    b.reserve(base, len as u64).unwrap();
    assert!(b.fills_from_files(plan.len()));
    // Garbage first, so the zero run must really be written.
    b.upload(len as u64 - (256 << 10), &whole[len - (256 << 10)..])
        .unwrap();
    for v in &mut whole[len - (256 << 10)..] {
        *v = 0;
    }
    // A corrupt chunk past the first thread's share is reported at its
    // offset in the input, not in the thread's share.
    let mut wrong = plan.clone();
    let k = 200; // raw chunk 200: bytes 200 * 64 KiB.. of the input
    wrong.extents[k].hash = Some([1; 32]);
    b.start_fill(&wrong).unwrap();
    let why = b.finish_fill().unwrap().unwrap_err();
    assert!(
        why.contains(&format!("at byte {} of the input", k << 16)),
        "{why}"
    );

    b.start_fill(&plan).unwrap();
    b.finish_fill().unwrap().unwrap();
    assert_eq!(b.arena_hash().unwrap(), Some(chunk::hash(&whole)));
    let mut tail = vec![0u8; 4096];
    b.download(len as u64 - 4096, &mut tail).unwrap();
    assert!(tail == whole[len - 4096..]);
    // Read back from the stopped runner, which serves nothing more.
    let e = b.start_fill(&plan).unwrap_err().to_string();
    assert!(e.contains("stopped"), "{e}");
}

#[test]
fn a_corrupt_input_chunk_in_the_store_is_named_by_its_byte_range() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path()).unwrap();
    let mut rec = rrstore_format::llvm::load(&common::globals_fixture()).unwrap();
    let r = rec.recording.clone();
    store
        .import(&r, &mut rec, &ImportOptions::default(), &mut |_| {})
        .unwrap();
    let id = r.id();
    let open = || ReplaySource::open(&id.to_hex(), false, || Ok(Store::open(tmp.path()).unwrap()));

    // Intact: filled from the packs by the runner.
    let report = replay(&mut open().unwrap(), &common::options());
    assert_eq!(report.verdict, Verdict::Verified, "{:?}", report.error);
    assert_eq!(report.timing.rehydrate_path, Some(RehydratePath::Files));

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
    let err = report.error.unwrap().to_string();
    assert!(
        err.contains("input") && err.contains(&format!("bytes {start}..{}", r.arena.size)),
        "the error names the part and the range: {err}"
    );
}
