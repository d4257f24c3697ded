//! The importer's single-pass paths: LLVM recordings loaded without part
//! hashes (multi-block parts, whole-part dedup, changed files) and `.rra`
//! archives copied chunk by chunk as stored.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use rrstore_format::archive::{self, Reader, WriteOptions};
use rrstore_format::chunk::ChunkParams;
use rrstore_format::{llvm, PartRole, PartSource};
use rrstore_store::{ImportOptions, Store};

const STEM: &str = "__omp_offloading_fe00_9ae056_main_l13";

use rrstore_tests::noise;

/// A copy of the saxpy fixture whose snapshots are `input` and `output`.
fn big_recording(dir: &Path, input: &[u8], output: &[u8]) -> PathBuf {
    let src = fixtures().join("llvm22-host/saxpy");
    std::fs::create_dir_all(dir).unwrap();
    for ext in ["image", "globals"] {
        std::fs::copy(
            src.join(format!("{STEM}.{ext}")),
            dir.join(format!("{STEM}.{ext}")),
        )
        .unwrap();
    }
    std::fs::write(dir.join(format!("{STEM}.memory")), input).unwrap();
    std::fs::write(dir.join(format!("{STEM}.original.output")), output).unwrap();
    let json = std::fs::read_to_string(src.join(format!("{STEM}.json"))).unwrap();
    let json = json.replace(
        "\"DeviceMemorySize\":2097168",
        &format!("\"DeviceMemorySize\":{}", input.len()),
    );
    let desc = dir.join(format!("{STEM}.json"));
    std::fs::write(&desc, json).unwrap();
    desc
}

fn check_back(store: &Store, desc: &Path) {
    let mut orig = llvm::load(desc).unwrap();
    let id = orig.recording.id();
    assert_eq!(store.recording(&id).unwrap(), orig.recording);
    let mut src = store.part_source(&id).unwrap();
    for p in &orig.recording.parts.clone() {
        assert!(
            stream_part(&mut src, p.role) == stream_part(&mut orig, p.role),
            "{}",
            p.role
        );
    }
}

#[test]
fn multi_block_parts_are_hashed_in_the_chunking_pass_and_dedup_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path().join("s")).unwrap();
    // 19 MiB + 5 bytes: many scan blocks, the last one short.
    let mut input = noise((19 << 20) + 5, 3);
    input[(2 << 20)..(9 << 20)].fill(0);
    let mut output = input.clone();
    output[(12 << 20)..(12 << 20) + 4096].fill(7);
    let a = big_recording(&tmp.path().join("a"), &input, &output);
    let r = import_path(&mut store, &a);
    assert_eq!(r.len(), 1);
    assert!(!r[0].present);
    assert_eq!(r[0].id, llvm::load(&a).unwrap().recording.id().to_hex());
    // input and output share all but a chunk or two.
    assert!(
        r[0].new_bytes < input.len() as u64 + (1 << 20),
        "{:?}",
        r[0]
    );
    check_back(&store, &a);

    // The next kernel: its input is the previous output (a whole part the
    // store holds), its output differs a little.
    let mut output2 = output.clone();
    output2[100..200].fill(9);
    let b = big_recording(&tmp.path().join("b"), &output, &output2);
    let r = import_path(&mut store, &b);
    assert!(!r[0].present);
    assert!(r[0].new_bytes < 1 << 20, "{:?}", r[0]);
    check_back(&store, &b);
    assert!(import_path(&mut store, &b)[0].present);
    assert!(store.verify(&[], true).unwrap().ok());
}

/// An application run: each recording's snapshots hold mostly the same
/// blocks at the same offsets as the one before. Blocks seen before are not
/// cut again (the block memo), and every recording still reads back
/// byte-identical with only the changed chunks stored anew.
#[test]
fn blocks_seen_earlier_in_the_run_are_not_cut_again() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path().join("s")).unwrap();
    let mut arena = noise(8 << 20, 41);
    arena[(5 << 20)..(6 << 20) + 300].fill(0);
    let (_, _, hits0) = rrstore_format::stages::snapshot();
    let mut new_bytes = Vec::new();
    for step in 0..3u8 {
        let before = arena.clone();
        let at = (1 << 20) * (step as usize + 1) + 12_345;
        arena[at..at + 16_384].fill(step + 1);
        let d = big_recording(&tmp.path().join(format!("r{step}")), &before, &arena);
        let r = import_path(&mut store, &d);
        assert!(!r[0].present);
        new_bytes.push(r[0].new_bytes);
        check_back(&store, &d);
    }
    let (_, _, hits1) = rrstore_format::stages::snapshot();
    // 8 blocks per snapshot, 6 snapshots, 1 changed block in each but the
    // first: at least 8 * 5 - 5 blocks were seen before.
    assert!(hits1 - hits0 >= 35, "{} memo hits", hits1 - hits0);
    // After the first recording only the chunks around each change are new.
    assert!(
        new_bytes[1] < 1 << 20 && new_bytes[2] < 1 << 20,
        "{new_bytes:?}"
    );
    assert!(store.verify(&[], true).unwrap().ok());
}

#[test]
fn a_file_that_changes_length_after_loading_fails_the_import() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path().join("s")).unwrap();
    let input = noise(3 << 20, 5);
    let desc = big_recording(&tmp.path().join("a"), &input, &input);
    let mut lazy = llvm::load_unhashed(&desc).unwrap();
    let mut rec = lazy.recording.clone();
    std::fs::write(
        tmp.path().join("a").join(format!("{STEM}.original.output")),
        &input[..input.len() - 1],
    )
    .unwrap();
    let err = store
        .import_unhashed(&mut rec, &mut lazy, &ImportOptions::default(), &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("changed"), "{err}");
    assert_eq!(store.stats().unwrap().recordings, 0);
}

/// Stored bytes of every chunk of an archive, by hash.
fn archive_chunks(r: &Reader) -> std::collections::HashMap<[u8; 32], Vec<u8>> {
    let mut out = std::collections::HashMap::new();
    for p in &r.recording().parts {
        for c in r.chunks(p.role).unwrap() {
            let c = c.unwrap();
            out.insert(c.hash, c.data);
        }
    }
    out
}

#[test]
fn archives_are_copied_chunk_by_chunk_as_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let mut input = noise(5 << 20, 9);
    input[(1 << 20)..(3 << 20)].fill(0);
    let mut output = input.clone();
    output[4 << 20..(4 << 20) + 10].fill(1);
    let desc = big_recording(&tmp.path().join("a"), &input, &output);
    let mut l = llvm::load(&desc).unwrap();
    let rec = l.recording.clone();
    let rra = tmp.path().join("a.rra");
    // A level no import would pick: copied bytes keep it.
    let opts = WriteOptions {
        level: 9,
        ..WriteOptions::default()
    };
    archive::write_path(&rec, &mut l, &rra, &opts).unwrap();
    let reader = Reader::open(&rra).unwrap();
    let want = archive_chunks(&reader);

    let mut store = Store::open(tmp.path().join("s")).unwrap();
    let r = import_path(&mut store, &rra);
    assert_eq!(r[0].id, rec.id().to_hex());
    assert!(!r[0].present);
    check_back(&store, &desc);
    assert!(store.verify(&[], true).unwrap().ok());
    // Every pack entry holds exactly the archive's stored bytes.
    let payload: u64 = want.values().map(|d| d.len() as u64).sum();
    assert_eq!(r[0].new_chunks, want.len() as u64);
    assert_eq!(r[0].stored_bytes, payload + 52 * want.len() as u64);
    let mut src = store.part_source(&rec.id()).unwrap();
    let mut joined = Vec::new();
    src.open_part(PartRole::Input)
        .unwrap()
        .read_to_end(&mut joined)
        .unwrap();
    assert!(joined == input);

    // The same recording imported from its files is present; an archive of
    // it is present too.
    assert!(import_path(&mut store, &desc)[0].present);
    assert!(import_path(&mut store, &rra)[0].present);

    // An archive chunked differently is re-chunked like the store does.
    let odd = WriteOptions {
        chunking: ChunkParams {
            min: 4096,
            avg: 16384,
            max: 65536,
        },
        ..WriteOptions::default()
    };
    let rra2 = tmp.path().join("b.rra");
    let mut l = llvm::load(&desc).unwrap();
    archive::write_path(&rec, &mut l, &rra2, &odd).unwrap();
    let mut store2 = Store::open(tmp.path().join("s2")).unwrap();
    let r2 = import_path(&mut store2, &rra2);
    assert_eq!(r2[0].id, rec.id().to_hex());
    let mut store3 = Store::open(tmp.path().join("s3")).unwrap();
    let r3 = import_path(&mut store3, &desc);
    assert_eq!(r2[0].new_chunks, r3[0].new_chunks);
    assert!(store2.verify(&[], true).unwrap().ok());
}

use std::io::Read;

/// One store handle imports, removes and collects: the chunks it
/// remembers committing (`import::known`) are not taken as stored once gc
/// deleted their rows, even where their pack stays (another recording
/// keeps it alive), so a later import stores what a freshly opened handle
/// stores, and reads back.
#[test]
fn chunks_a_handle_committed_are_stored_again_after_gc_deleted_them() {
    let tmp = tempfile::tempdir().unwrap();
    let a_in = noise(3 << 20, 71);
    let a_out = noise(3 << 20, 72);
    let a = big_recording(&tmp.path().join("a"), &a_in, &a_out);
    let c = big_recording(
        &tmp.path().join("c"),
        &noise(2 << 20, 73),
        &noise(2 << 20, 74),
    );
    // A again, as a new recording B (same snapshots, another descriptor).
    let b = big_recording(&tmp.path().join("b"), &a_in, &a_out);
    let json = std::fs::read_to_string(&b).unwrap();
    std::fs::write(&b, json.replacen('{', "{\"Note\":\"b\",", 1)).unwrap();
    let mut reports = Vec::new();
    for reopen in [false, true] {
        let dir = tmp.path().join(format!("s{reopen}"));
        let mut store = Store::open(&dir).unwrap();
        import_path(&mut store, &a);
        import_path(&mut store, &c);
        let packs = || std::fs::read_dir(dir.join("packs")).unwrap().count();
        let packs_before = packs();
        let id = llvm::load(&a).unwrap().recording.id();
        assert_eq!(store.remove(&[id]).unwrap(), 1);
        let gc = store
            .gc_with(&rrstore_store::gc::GcOptions {
                dry_run: false,
                max_unused_percent: 100.0,
            })
            .unwrap();
        assert!(gc.chunks_removed > 0 && gc.packs_rewritten == 0, "{gc:?}");
        // The shared pack is still there, with A's bytes in it.
        assert_eq!(packs(), packs_before);
        if reopen {
            drop(store);
            store = Store::open(&dir).unwrap();
        }
        let rb = import_path(&mut store, &b);
        assert!(!rb[0].present);
        check_back(&store, &b);
        assert!(store.verify(&[], true).unwrap().ok());
        reports.push((rb[0].new_chunks, rb[0].new_bytes, rb[0].chunks));
    }
    assert_eq!(reports[0], reports[1], "same handle vs reopened");
    assert!(reports[0].0 > 0, "{reports:?}");
}

/// Within one handle, chunks committed by one recording are found by the
/// next without the index, and the result is the same as a fresh handle's.
#[test]
fn a_second_recording_reuses_what_the_first_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let arena = noise(6 << 20, 81);
    let mut out = arena.clone();
    out[100..5000].fill(1);
    let a = big_recording(&tmp.path().join("a"), &arena, &out);
    let mut out2 = out.clone();
    out2[(3 << 20)..(3 << 20) + 9000].fill(2);
    let b = big_recording(&tmp.path().join("b"), &out, &out2);
    let mut one = Store::open(tmp.path().join("one")).unwrap();
    import_path(&mut one, &a);
    let r1 = import_path(&mut one, &b);
    let mut fresh = Store::open(tmp.path().join("fresh")).unwrap();
    import_path(&mut fresh, &a);
    drop(fresh);
    let mut fresh = Store::open(tmp.path().join("fresh")).unwrap();
    let r2 = import_path(&mut fresh, &b);
    assert_eq!(
        (r1[0].new_chunks, r1[0].new_bytes, r1[0].chunks),
        (r2[0].new_chunks, r2[0].new_bytes, r2[0].chunks)
    );
    check_back(&one, &b);
    assert!(one.verify(&[], true).unwrap().ok());
}
