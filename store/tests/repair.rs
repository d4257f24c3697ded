//! `Store::repair` and the checks at open, through the library: the index
//! is rebuilt from real packs and recovery metadata, parts read back
//! byte-identical, damaged metadata loses only what it describes, and the
//! typed errors say what is wrong.

mod common;

use common::*;
use rrstore_format::llvm;
use rrstore_store::{Store, StoreError};

#[test]
fn repair_rebuilds_every_fixture_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let mut store = Store::open(&dir).unwrap();
    let mut n = 0;
    for set in ["llvm22-host", "upstream-native"] {
        n += import_path(&mut store, &fixtures().join(set)).len() as u64;
    }
    drop(store);
    for sfx in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("index.sqlite{sfx}")));
    }
    assert!(matches!(
        Store::open(&dir),
        Err(StoreError::IndexUnusable { .. })
    ));
    let report = Store::repair(&dir).unwrap();
    assert_eq!(report.recordings, n);
    assert!(report.lost.is_empty(), "{:?}", report.lost);
    assert_eq!(report.bad_chunks, 0);
    let store = Store::open_existing(&dir).unwrap();
    assert!(store.verify(&[], true).unwrap().ok());
    for set in ["llvm22-host", "upstream-native"] {
        for desc in llvm::find_recordings(&fixtures().join(set)).unwrap() {
            let mut orig = llvm::load(&desc).unwrap();
            let id = orig.recording.id();
            assert_eq!(store.recording(&id).unwrap(), orig.recording);
            let mut src = store.part_source(&id).unwrap();
            for p in &orig.recording.parts.clone() {
                assert_eq!(
                    stream_part(&mut src, p.role),
                    stream_part(&mut orig, p.role),
                    "{}",
                    p.role
                );
            }
        }
    }
}

#[test]
fn a_damaged_chunk_list_loses_only_the_recordings_that_need_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let mut store = Store::open(&dir).unwrap();
    let reports = import_path(&mut store, &fixtures().join("llvm22-host/saxpy"));
    import_path(&mut store, &fixtures().join("llvm22-host/reduction"));
    let saxpy: rrstore_format::RecordingId = reports[0].id.parse().unwrap();
    let rec = store.recording(&saxpy).unwrap();
    drop(store);
    // Damage the chunk list of the saxpy input snapshot (its own part).
    let input = rec
        .part(rrstore_format::PartRole::Input)
        .expect("saxpy has an input snapshot");
    let list = rrstore_store::recovery::part_path(&dir, &input.blake3);
    let mut bytes = std::fs::read(&list).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&list, bytes).unwrap();
    std::fs::write(dir.join("index.sqlite"), b"").unwrap();
    let report = Store::repair(&dir).unwrap();
    assert_eq!(report.lost.len(), 1, "{:?}", report.lost);
    assert_eq!(report.lost[0].id, saxpy.to_hex());
    assert!(
        report.lost[0].reason.contains("checksum"),
        "{:?}",
        report.lost
    );
    assert!(report.lost[0].metadata.is_file());
    assert!(report.recordings >= 1);
    assert_eq!(report.moved_aside.len(), 1);
    let store = Store::open_existing(&dir).unwrap();
    assert!(!store.contains(&saxpy).unwrap());
    assert!(store.verify(&[], true).unwrap().ok());
}

#[test]
fn open_says_what_is_not_a_store_and_what_needs_repair() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    assert!(matches!(
        Store::open_existing(&missing),
        Err(StoreError::NotAStore { .. })
    ));
    assert!(!missing.exists());
    let dir = tmp.path().join("s");
    let mut store = Store::open(&dir).unwrap();
    import_path(&mut store, &fixtures().join("llvm22-host/saxpy"));
    drop(store);
    // Another application's SQLite database in its place.
    std::fs::remove_file(dir.join("index.sqlite")).unwrap();
    {
        let c = rusqlite::Connection::open(dir.join("index.sqlite")).unwrap();
        c.execute_batch("CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('x');")
            .unwrap();
    }
    match Store::open_existing(&dir) {
        Err(e @ StoreError::IndexUnusable { .. }) => {
            assert!(e.needs_repair());
            assert!(e.to_string().contains("not an rrstore index"), "{e}");
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a foreign index was accepted"),
    }
    let report = Store::repair(&dir).unwrap();
    assert_eq!(report.recordings, 1);
}
