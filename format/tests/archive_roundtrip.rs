//! `.rra` round trips over the real fixtures and synthetic recordings:
//! every part comes back byte for byte through each read path, chunks are
//! deduplicated inside an archive, the ID does not depend on the settings
//! and the bytes do not depend on anything else.

mod archive_support;

use std::collections::HashSet;
use std::io::Write;

use archive_support::*;
use rrstore_format::archive::{self, Reader, WriteOptions};
use rrstore_format::chunk::{ChunkParams, Codec};
use rrstore_format::{llvm, PartRole, PartSource};

fn check_reader(r: &mut Reader, rec: &rrstore_format::Recording, src: &MemSource) {
    assert_eq!(r.recording(), rec);
    assert_eq!(r.id(), rec.id());
    for p in &rec.parts {
        let want = src.get(p.role);
        assert_eq!(read_stream(r, p.role).unwrap(), want, "{} stream", p.role);
        let mut buf = vec![0u8; p.len as usize];
        r.read_part_into(p.role, &mut buf).unwrap();
        assert_eq!(buf, want, "{} read_part_into", p.role);
        let mut joined = Vec::new();
        for c in r.chunks(p.role).unwrap() {
            let c = c.unwrap();
            let plain = match c.codec {
                Codec::Raw => c.data.clone(),
                Codec::Zstd => zstd::bulk::decompress(&c.data, c.len as usize).unwrap(),
            };
            assert_eq!(rrstore_format::chunk::hash(&plain), c.hash);
            joined.extend_from_slice(&plain);
        }
        assert_eq!(joined, want, "{} chunks", p.role);
    }
}

fn load_into_memory(desc: &std::path::Path) -> (rrstore_format::Recording, MemSource) {
    let mut l = llvm::load(desc).unwrap();
    let rec = l.recording.clone();
    let mut parts = Vec::new();
    for p in &rec.parts {
        let mut b = Vec::new();
        l.open_part(p.role).unwrap().read_to_end(&mut b).unwrap();
        parts.push((p.role, b));
    }
    (rec, MemSource(parts))
}

use std::io::Read;

#[test]
fn every_fixture_round_trips_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    for desc in fixtures() {
        let (rec, src) = load_into_memory(&desc);
        let mut l = llvm::load(&desc).unwrap();
        let path = dir.path().join(format!("{}.rra", rec.stem));
        let stats = archive::write_path(&rec, &mut l, &path, &WriteOptions::default()).unwrap();
        assert_eq!(stats.id, rec.id());
        assert_eq!(stats.archive_bytes, std::fs::metadata(&path).unwrap().len());
        let mut r = Reader::open(&path).unwrap();
        check_reader(&mut r, &rec, &src);
        r.verify().unwrap();
        // Single-threaded reads give the same bytes.
        r.set_threads(1);
        check_reader(&mut r, &rec, &src);
    }
    // Nothing but the archives is left behind (no temporary files).
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(name.ends_with(".rra") && !name.starts_with('.'), "{name}");
    }
}

#[test]
fn input_and_output_share_chunks_inside_one_archive() {
    let input = gpu_like(6 << 20, 7);
    let mut output = input.clone();
    for b in &mut output[3 << 20..(3 << 20) + 50_000] {
        *b = b.wrapping_add(1);
    }
    let (rec, mut src) = synthetic(
        "shared",
        vec![(PartRole::Input, input), (PartRole::Output, output)],
    );
    let mut out = Vec::new();
    let stats = archive::write(&rec, &mut src, &mut out, &WriteOptions::default()).unwrap();
    assert!(stats.chunks > 40, "{stats:?}");
    // The output costs only the few chunks around the change.
    assert!(
        stats.unique_chunks * 10 < stats.chunks * 6,
        "expected about half the references to be repeats: {stats:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.rra");
    std::fs::write(&path, &out).unwrap();
    let mut r = Reader::open(&path).unwrap();
    check_reader(&mut r, &rec, &src);
    // Each distinct chunk is stored once.
    let hashes: HashSet<_> = r.chunk_table().iter().map(|c| c.hash).collect();
    assert_eq!(hashes.len(), r.chunk_table().len());
    // Zeros compress, random bytes are stored raw.
    assert!(stats.raw_chunks > 0 && stats.raw_chunks < stats.unique_chunks);
    assert!(stats.archive_bytes < stats.part_bytes / 2, "{stats:?}");
}

#[test]
fn same_settings_give_identical_bytes_whatever_the_threads() {
    let (rec, mut src) = synthetic(
        "det",
        vec![
            (PartRole::Input, gpu_like(3 << 20, 3)),
            (PartRole::Output, gpu_like(3 << 20, 4)),
        ],
    );
    let a = pack(&rec, &mut src, &WriteOptions::default());
    for threads in [1, 2, 5] {
        let opts = WriteOptions {
            threads,
            ..WriteOptions::default()
        };
        assert!(pack(&rec, &mut src, &opts) == a, "threads={threads}");
    }
    // The fixtures too, through the file-backed source.
    for desc in fixtures().into_iter().take(4) {
        let mut l = llvm::load(&desc).unwrap();
        let rec = l.recording.clone();
        let x = pack(&rec, &mut l, &WriteOptions::default());
        let y = pack(&rec, &mut l, &WriteOptions::default());
        assert!(x == y, "{}", desc.display());
    }
}

#[test]
fn other_levels_and_chunk_sizes_change_bytes_not_the_id() {
    let (rec, mut src) = synthetic("settings", vec![(PartRole::Input, gpu_like(2 << 20, 5))]);
    let base = pack(&rec, &mut src, &WriteOptions::default());
    let variants = [
        WriteOptions {
            level: 19,
            ..WriteOptions::default()
        },
        WriteOptions {
            chunking: ChunkParams {
                min: 4096,
                avg: 16384,
                max: 65536,
            },
            ..WriteOptions::default()
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, opts) in variants.iter().enumerate() {
        let bytes = pack(&rec, &mut src, opts);
        assert!(bytes != base, "variant {i} should differ");
        let path = dir.path().join(format!("{i}.rra"));
        std::fs::write(&path, &bytes).unwrap();
        let mut r = Reader::open(&path).unwrap();
        assert_eq!(r.id(), rec.id());
        assert_eq!(r.level(), opts.level);
        assert_eq!(r.chunk_params(), opts.chunking);
        check_reader(&mut r, &rec, &src);
    }
}

#[test]
fn empty_parts_and_a_changed_source_are_handled() {
    let (rec, mut src) = synthetic(
        "empty",
        vec![(PartRole::Input, vec![]), (PartRole::Globals, vec![])],
    );
    let bytes = pack(&rec, &mut src, &WriteOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.rra");
    std::fs::write(&path, &bytes).unwrap();
    let mut r = Reader::open(&path).unwrap();
    check_reader(&mut r, &rec, &src);

    // A part whose bytes no longer match the recording is refused.
    let (rec, _) = synthetic("changed", vec![(PartRole::Input, vec![1u8; 5000])]);
    let mut other = MemSource(vec![(PartRole::Input, vec![2u8; 5000])]);
    let err = archive::write(&rec, &mut other, Vec::new(), &WriteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("changed after they were read"), "{err}");
    // A failed write_path leaves nothing behind.
    let target = dir.path().join("changed.rra");
    assert!(archive::write_path(&rec, &mut other, &target, &WriteOptions::default()).is_err());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    // Out-of-range settings are refused.
    let bad = WriteOptions {
        level: 40,
        ..WriteOptions::default()
    };
    assert!(archive::write(&rec, &mut src, Vec::new(), &bad).is_err());
}

#[test]
fn a_part_stream_can_be_dropped_early() {
    let (rec, mut src) = synthetic("early", vec![(PartRole::Input, gpu_like(4 << 20, 9))]);
    let bytes = pack(&rec, &mut src, &WriteOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.rra");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
    let mut r = Reader::open(&path).unwrap();
    let mut s = r.open_part(PartRole::Input).unwrap();
    let mut head = [0u8; 1000];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head[..], &src.get(PartRole::Input)[..1000]);
    drop(s);
    assert!(r.open_part(PartRole::Bitcode).is_err());
}

#[test]
fn unhashed_load_writes_the_same_archive_and_fills_the_hashes() {
    let dir = tempfile::tempdir().unwrap();
    for desc in fixtures() {
        let mut hashed = llvm::load(&desc).unwrap();
        let want_rec = hashed.recording.clone();
        let a = dir.path().join("a.rra");
        let sa = archive::write_path(&want_rec, &mut hashed, &a, &WriteOptions::default()).unwrap();

        let mut lazy = llvm::load_unhashed(&desc).unwrap();
        assert!(!lazy.parts_hashed);
        assert!(lazy.recording.parts.iter().all(|p| p.blake3 == [0; 32]));
        let lens: Vec<u64> = want_rec.parts.iter().map(|p| p.len).collect();
        let got_lens: Vec<u64> = lazy.recording.parts.iter().map(|p| p.len).collect();
        assert_eq!(got_lens, lens);
        assert_eq!(lazy.recording.image_target, want_rec.image_target);
        assert_eq!(lazy.recording.globals, want_rec.globals);
        let mut rec = lazy.recording.clone();
        let b = dir.path().join("b.rra");
        let sb = archive::write_path_unhashed(&mut rec, &mut lazy, &b, &WriteOptions::default())
            .unwrap();
        assert_eq!(rec, want_rec, "{}", desc.display());
        assert_eq!(sb, sa);
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());

        let mut again = llvm::load_unhashed(&desc).unwrap();
        again.hash_parts().unwrap();
        assert!(again.parts_hashed);
        assert_eq!(again.recording, want_rec);
    }
}

#[test]
fn unhashed_write_refuses_a_part_whose_length_changed() {
    let desc = fixtures().into_iter().next().unwrap();
    let mut lazy = llvm::load_unhashed(&desc).unwrap();
    let mut rec = lazy.recording.clone();
    rec.parts[0].len += 1;
    let err = archive::write_unhashed(
        &mut rec,
        &mut lazy,
        std::io::sink(),
        &WriteOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("the files changed"), "{err}");
}
