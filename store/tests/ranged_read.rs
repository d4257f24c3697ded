//! Ranged reads of stored parts (`read_part_range_into`, what the replay
//! engine uses to fill GPU staging windows): every range of every fixture
//! part equals the same bytes of the original, including ranges that cut
//! chunks, span many chunks (decoded on several threads) and repeat.

mod common;

use common::*;
use rrstore_format::{llvm, PartSource};
use rrstore_store::Store;

/// Offsets and lengths that cut chunks at both ends, cover the whole part,
/// hit its last byte and read nothing.
fn ranges(len: u64) -> Vec<(u64, u64)> {
    let mut out = vec![
        (0, len),
        (0, 0),
        (len, 0),
        (len.saturating_sub(1), len.min(1)),
    ];
    for (a, b) in [(1, 3), (7, 2), (3, 5)] {
        let off = len * a / 11;
        let end = (off + len * b / 7 + 13).min(len);
        out.push((off, end - off));
    }
    out
}

#[test]
fn every_range_of_every_fixture_part_reads_back_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path().join("s")).unwrap();
    // Small chunks: many chunks per part, so ranges cut and span chunks.
    store.chunk_params.min = 4096;
    store.chunk_params.avg = 16384;
    store.chunk_params.max = 65536;
    let root = fixtures().join("llvm22-host");
    import_path(&mut store, &root);
    let mut checked = 0;
    for desc in llvm::find_recordings(&root).unwrap() {
        let mut orig = llvm::load(&desc).unwrap();
        let id = orig.recording.id();
        let mut src = store.part_source(&id).unwrap();
        assert!(src.random_access());
        for p in orig.recording.parts.clone() {
            let want = stream_part(&mut orig, p.role);
            for (off, n) in ranges(p.len) {
                let mut buf = vec![0xa5u8; n as usize];
                src.read_part_range_into(p.role, off, &mut buf).unwrap();
                let range = off as usize..(off + n) as usize;
                assert!(buf == want[range], "{} {} bytes at {off}", p.role, n);
                checked += 1;
            }
            // Past the end: an error, never short or wrong bytes.
            let mut buf = vec![0u8; 2];
            let err = src
                .read_part_range_into(p.role, p.len.saturating_sub(1), &mut buf)
                .unwrap_err();
            assert!(err.to_string().contains("outside"), "{err}");
        }
    }
    assert!(checked > 100, "{checked}");
}
