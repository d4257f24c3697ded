//! Damaged, hostile and future archives: every one gives a clear error
//! naming the file (and byte offset), never a panic and never wrong bytes.

mod archive_support;

use std::path::Path;

use archive_support::*;
use rrstore_format::archive::layout::{
    Bytes32, ChunkEntry, Index, Manifest, Trailer, HEADER_LEN, TRAILER_LEN,
};
use rrstore_format::archive::{Reader, WriteOptions};
use std::io::Read;

use rrstore_format::{FormatError, PartSource, Recording};

/// Open `path` and read every part; Ok only if everything verified.
fn read_all(path: &Path) -> Result<(Recording, Vec<Vec<u8>>), String> {
    let mut r = Reader::open(path).map_err(|e| e.to_string())?;
    let rec = r.recording().clone();
    let mut parts = Vec::new();
    for p in &rec.parts {
        let a = read_stream(&mut r, p.role).map_err(|e| e.to_string())?;
        let mut b = vec![0u8; p.len as usize];
        r.read_part_into(p.role, &mut b)
            .map_err(|e| e.to_string())?;
        assert_eq!(a, b, "the two read paths disagree");
        for c in r.chunks(p.role).map_err(|e| e.to_string())? {
            c.map_err(|e| e.to_string())?;
        }
        parts.push(a);
    }
    Ok((rec, parts))
}

fn archive_of_tiny() -> (Recording, Vec<Vec<u8>>, Vec<u8>) {
    let (rec, mut src) = tiny();
    let bytes = pack(&rec, &mut src, &WriteOptions::default());
    let parts = src.0.iter().map(|(_, b)| b.clone()).collect();
    (rec, parts, bytes)
}

/// Split an archive into (payload region, manifest, index, trailer).
fn split(bytes: &[u8]) -> (Trailer, Manifest, Index) {
    let t = Trailer::decode(
        bytes[bytes.len() - TRAILER_LEN as usize..]
            .try_into()
            .unwrap(),
    )
    .unwrap();
    let m = &bytes[t.manifest_offset as usize..(t.manifest_offset + t.manifest_len) as usize];
    let i = &bytes[t.index_offset as usize..(t.index_offset + t.index_len) as usize];
    (
        t,
        rmp_serde::from_slice(m).unwrap(),
        rmp_serde::from_slice(i).unwrap(),
    )
}

/// Rebuild an archive from its payload region and new manifest/index bytes,
/// with correct checksums (a well-formed but hostile or future archive).
fn rebuild(bytes: &[u8], manifest: &[u8], index: &[u8]) -> Vec<u8> {
    let (t, _, _) = split(bytes);
    let mut out = bytes[..t.manifest_offset as usize].to_vec();
    let manifest_offset = out.len() as u64;
    out.extend_from_slice(manifest);
    let index_offset = out.len() as u64;
    out.extend_from_slice(index);
    let t = Trailer {
        manifest_offset,
        manifest_len: manifest.len() as u64,
        index_offset,
        index_len: index.len() as u64,
        manifest_blake3: *blake3::hash(manifest).as_bytes(),
        index_blake3: *blake3::hash(index).as_bytes(),
    };
    out.extend_from_slice(&t.encode());
    out
}

fn open_err(dir: &Path, name: &str, bytes: &[u8]) -> FormatError {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let err = Reader::open(&path).unwrap_err();
    assert!(
        err.to_string().contains(path.to_str().unwrap()),
        "the error should name the file: {err}"
    );
    err
}

#[test]
fn every_flipped_byte_and_every_truncation_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.rra");
    let mut cases: Vec<(Recording, Vec<Vec<u8>>, Vec<u8>)> = vec![archive_of_tiny()];
    // The globals fixture: a real image, a globals table, two snapshots.
    let desc = fixtures()
        .into_iter()
        .find(|p| p.to_str().unwrap().contains("llvm22-host/globals"))
        .unwrap();
    let mut l = rrstore_format::llvm::load(&desc).unwrap();
    let rec = l.recording.clone();
    let bytes = pack(&rec, &mut l, &WriteOptions::default());
    let parts = rec
        .parts
        .iter()
        .map(|p| {
            let mut v = Vec::new();
            l.open_part(p.role).unwrap().read_to_end(&mut v).unwrap();
            v
        })
        .collect();
    cases.push((rec, parts, bytes));

    for (rec, parts, bytes) in &cases {
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(read_all(&path).unwrap(), (rec.clone(), parts.clone()));
        let mut unnoticed = 0;
        for pos in 0..bytes.len() {
            let mut m = bytes.clone();
            m[pos] ^= 1 << (pos % 8);
            std::fs::write(&path, &m).unwrap();
            match read_all(&path) {
                // Unnoticed flips (the minor version, which readers ignore,
                // or a bit zstd ignores) must still give the exact bytes.
                Ok(got) => {
                    unnoticed += 1;
                    assert_eq!(&got, &(rec.clone(), parts.clone()), "flip at {pos}");
                }
                Err(e) => assert!(e.contains("m.rra"), "flip at {pos}: {e}"),
            }
        }
        assert!(unnoticed < 16, "{unnoticed} flips went unnoticed");
        for len in 0..bytes.len() {
            std::fs::write(&path, &bytes[..len]).unwrap();
            let e = read_all(&path).unwrap_err();
            assert!(e.contains("m.rra"), "truncated to {len}: {e}");
        }
    }
}

#[test]
fn wrong_magic_truncation_and_future_versions_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, bytes) = archive_of_tiny();

    let mut m = bytes.clone();
    m[1] = b'X';
    let e = open_err(dir.path(), "magic.rra", &m);
    assert!(e.to_string().contains("not an rrstore archive"), "{e}");
    let e = open_err(dir.path(), "json.rra", b"{\"Name\": \"x\"}");
    assert!(e.to_string().contains("not an rrstore archive"), "{e}");

    let mut m = bytes.clone();
    m[8..12].copy_from_slice(&2u32.to_le_bytes());
    let e = open_err(dir.path(), "v2.rra", &m);
    match &e {
        FormatError::UnsupportedVersion {
            found, supported, ..
        } => assert_eq!((*found, *supported), (2, 1)),
        other => panic!("{other}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("version 2") && msg.contains("version 1"),
        "{msg}"
    );

    let e = open_err(dir.path(), "cut.rra", &bytes[..bytes.len() - 10]);
    assert!(matches!(e, FormatError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");
}

#[test]
fn a_manifest_with_unknown_fields_still_reads() {
    #[derive(serde::Serialize)]
    struct FutureManifest<'a> {
        id: Bytes32,
        added_in_1_1: &'a str,
        recording: &'a Recording,
        chunking: &'a rrstore_format::archive::layout::ChunkingInfo,
        compression: &'a rrstore_format::archive::layout::CompressionInfo,
        provenance: std::collections::BTreeMap<&'a str, u64>,
    }
    #[derive(serde::Serialize)]
    struct FutureIndex<'a> {
        chunks: &'a [ChunkEntry],
        bloom: Vec<u8>,
        parts: &'a [rrstore_format::archive::layout::PartEntry],
    }
    let dir = tempfile::tempdir().unwrap();
    let (rec, parts, bytes) = archive_of_tiny();
    let (_, m, i) = split(&bytes);
    let fm = FutureManifest {
        id: m.id,
        added_in_1_1: "a field this reader does not know",
        recording: &m.recording,
        chunking: &m.chunking,
        compression: &m.compression,
        provenance: [("host", 7)].into_iter().collect(),
    };
    let fi = FutureIndex {
        chunks: &i.chunks,
        bloom: vec![1, 2, 3],
        parts: &i.parts,
    };
    let mut out = rebuild(
        &bytes,
        &rmp_serde::to_vec_named(&fm).unwrap(),
        &rmp_serde::to_vec_named(&fi).unwrap(),
    );
    out[12..16].copy_from_slice(&1u32.to_le_bytes()); // minor version 1
    let path = dir.path().join("future.rra");
    std::fs::write(&path, &out).unwrap();
    assert_eq!(read_all(&path).unwrap(), (rec, parts));
}

#[test]
fn hostile_but_well_checksummed_archives_are_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, bytes) = archive_of_tiny();
    let (t, m, i) = split(&bytes);

    // A part claiming 2^62 bytes (the ID recomputed so only sizes are wrong).
    let mut m2 = m.clone();
    m2.recording.parts[0].len = 1 << 62;
    m2.recording.arena.size = 1 << 62;
    m2.id = Bytes32(m2.recording.id().0);
    let mut i2 = i.clone();
    i2.parts[0].len = 1 << 62;
    let e = open_err(
        dir.path(),
        "huge.rra",
        &rebuild(
            &bytes,
            &rmp_serde::to_vec_named(&m2).unwrap(),
            &rmp_serde::to_vec_named(&i2).unwrap(),
        ),
    );
    assert!(e.to_string().contains("add up to"), "{e}");

    // A chunk pointing past the chunk region, a chunk of absurd length.
    for (name, row) in [
        (
            "outside.rra",
            ChunkEntry(i.chunks[0].0, bytes.len() as u64, 10, 10, 0),
        ),
        (
            "wrap.rra",
            ChunkEntry(i.chunks[0].0, u64::MAX - 3, 10, 10, 0),
        ),
        (
            "long.rra",
            ChunkEntry(i.chunks[0].0, HEADER_LEN, u32::MAX, u32::MAX, 1),
        ),
        (
            "codec.rra",
            ChunkEntry(i.chunks[0].0, HEADER_LEN, 10, 10, 9),
        ),
    ] {
        let mut i3 = i.clone();
        i3.chunks[0] = row;
        let e = open_err(
            dir.path(),
            name,
            &rebuild(
                &bytes,
                &rmp_serde::to_vec_named(&m).unwrap(),
                &rmp_serde::to_vec_named(&i3).unwrap(),
            ),
        );
        assert!(e.to_string().contains("chunk table row 0"), "{name}: {e}");
    }

    // A part referring to a chunk row that does not exist.
    let mut i4 = i.clone();
    i4.parts[0].chunks[0] = 1_000_000;
    let e = open_err(
        dir.path(),
        "ref.rra",
        &rebuild(
            &bytes,
            &rmp_serde::to_vec_named(&m).unwrap(),
            &rmp_serde::to_vec_named(&i4).unwrap(),
        ),
    );
    assert!(e.to_string().contains("chunk row 1000000"), "{e}");

    // Chunks swapped between parts: each chunk is intact, the part is not.
    let mut i5 = i.clone();
    let (a, b) = (i5.parts[0].chunks.clone(), i5.parts[1].chunks.clone());
    if a != b && a.len() == b.len() {
        i5.parts[0].chunks = b;
        i5.parts[1].chunks = a;
        let path = dir.path().join("swap.rra");
        std::fs::write(
            &path,
            rebuild(
                &bytes,
                &rmp_serde::to_vec_named(&m).unwrap(),
                &rmp_serde::to_vec_named(&i5).unwrap(),
            ),
        )
        .unwrap();
        let e = read_all(&path).unwrap_err();
        assert!(e.contains("index is damaged"), "{e}");
    }

    // A trailer announcing a 2^62-byte manifest.
    let mut t2 = t;
    t2.manifest_len = 1 << 62;
    let mut out = bytes.clone();
    let n = out.len();
    out[n - TRAILER_LEN as usize..].copy_from_slice(&t2.encode());
    let e = open_err(dir.path(), "trailer.rra", &out);
    assert!(e.to_string().contains("inconsistent"), "{e}");

    // A manifest whose recording does not match its ID.
    let mut m6 = m.clone();
    m6.recording.kernel.push('x');
    let e = open_err(
        dir.path(),
        "id.rra",
        &rebuild(
            &bytes,
            &rmp_serde::to_vec_named(&m6).unwrap(),
            &rmp_serde::to_vec_named(&i).unwrap(),
        ),
    );
    assert!(e.to_string().contains("hashes to ID"), "{e}");
}
