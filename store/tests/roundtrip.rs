//! Import real fixtures, read every part back through both read paths,
//! export byte-identically, dedup and ID resolution.

mod common;

use common::*;
use rrstore_format::{llvm, PartRole, PartSource};
use rrstore_store::{LsFilter, Store, StoreError};

#[test]
fn import_read_back_and_export_every_fixture_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path().join("s")).unwrap();
    for set in ["llvm22-host", "upstream-native"] {
        let root = fixtures().join(set);
        let reports = import_path(&mut store, &root);
        assert!(reports.len() >= 11, "{set}: {}", reports.len());
        assert!(reports.iter().all(|r| !r.present));
        for desc in llvm::find_recordings(&root).unwrap() {
            let mut orig = llvm::load(&desc).unwrap();
            let id = orig.recording.id();
            let rec = store.recording(&id).unwrap();
            assert_eq!(rec, orig.recording);
            let mut src = store.part_source(&id).unwrap();
            // The same reads through the store's own index connection.
            let mut shared = store.parts_of(&id).unwrap();
            assert_eq!(shared.recording(), &rec);
            for p in &rec.parts {
                let want = stream_part(&mut orig, p.role);
                assert_eq!(stream_part(&mut src, p.role), want, "{}", p.role);
                assert_eq!(stream_part(&mut shared, p.role), want, "{}", p.role);
                let mut buf = vec![0u8; p.len as usize];
                src.read_part_into(p.role, &mut buf).unwrap();
                assert_eq!(buf, want);
                buf.fill(0);
                shared.read_part_into(p.role, &mut buf).unwrap();
                assert_eq!(buf, want);
            }
            drop(shared);
            // Lossless export through the llvm exporter.
            let out = tmp.path().join("out").join(id.short());
            let files = llvm::export(&rec, &mut src, &out, None).unwrap();
            for f in files {
                let name = f.file_name().unwrap();
                let a = std::fs::read(&f).unwrap();
                let b = std::fs::read(desc.parent().unwrap().join(name)).unwrap();
                assert!(a == b, "{} differs", f.display());
            }
        }
    }
    // Importing again adds nothing.
    let before = store.stats().unwrap();
    let again = import_path(&mut store, &fixtures().join("llvm22-host"));
    assert!(again.iter().all(|r| r.present));
    let after = store.stats().unwrap();
    assert_eq!(before.chunks, after.chunks);
    assert_eq!(before.recordings, after.recordings);
    assert!(store.verify(&[], true).unwrap().ok());
}

#[test]
fn multi_dedups_images_and_snapshots() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path()).unwrap();
    let reports = import_path(&mut store, &fixtures().join("llvm22-host/multi"));
    assert_eq!(reports.len(), 8);
    let s = store.stats().unwrap();
    assert_eq!(s.recordings, 8);
    assert!(s.dedup_ratio > 1.5, "{s:?}");
    // One image part shared by all eight recordings.
    let images: std::collections::HashSet<_> = store
        .list(&LsFilter::default())
        .unwrap()
        .iter()
        .map(|r| {
            store
                .recording(&r.id.parse().unwrap())
                .unwrap()
                .part(PartRole::Image)
                .unwrap()
                .blake3
        })
        .collect();
    assert_eq!(images.len(), 1);
    let first = store.list(&LsFilter::default()).unwrap()[0].id.clone();
    let sharing = store.sharing(&first.parse().unwrap()).unwrap();
    assert!(!sharing.shared_with.is_empty());
}

#[test]
fn resolve_prefixes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path()).unwrap();
    import_path(&mut store, &fixtures().join("llvm22-host/multi"));
    let all = store.list(&LsFilter::default()).unwrap();
    for r in &all {
        assert_eq!(store.resolve(&r.id[..12]).unwrap().to_hex(), r.id);
        assert_eq!(store.resolve(&r.id.to_uppercase()).unwrap().to_hex(), r.id);
    }
    assert!(matches!(
        store.resolve("abc"),
        Err(StoreError::BadPrefix(_))
    ));
    assert!(matches!(
        store.resolve("xyz1"),
        Err(StoreError::BadPrefix(_))
    ));
    // A one-digit-shorter prefix shared by two IDs is ambiguous; find one.
    let mut ids: Vec<&str> = all.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    let none = "ffff".repeat(16);
    match store.resolve(&none[..8]) {
        Err(StoreError::NotFound(_)) => {}
        other => panic!("{other:?}"),
    }
    let unknown = rrstore_format::RecordingId([0xff; 32]);
    assert!(matches!(
        store.parts_of(&unknown).map(|_| ()),
        Err(StoreError::NotFound(_))
    ));
    // Any 4-digit prefix: either unique, or ambiguous listing candidates.
    for id in ids {
        match store.resolve(&id[..4]) {
            Ok(found) => assert_eq!(found.to_hex(), id),
            Err(StoreError::Ambiguous { candidates, .. }) => assert!(candidates.len() >= 2),
            Err(e) => panic!("{e}"),
        }
    }
}
