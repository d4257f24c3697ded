//! gc and the parts' recovery chunk lists (`meta/parts/`): gc removes the
//! lists of parts no recording names any more, keeps every list a
//! remaining recording needs (shared parts included), and `repair` still
//! rebuilds the remaining recordings from what is left.

mod common;

use std::collections::BTreeSet;

use common::*;
use rrstore_format::RecordingId;
use rrstore_store::gc::GcOptions;
use rrstore_store::Store;

fn part_lists(dir: &std::path::Path) -> BTreeSet<String> {
    rrstore_store::recovery::list(dir, rrstore_store::layout::META_PARTS)
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn parts_of(store: &Store, id: &RecordingId) -> BTreeSet<String> {
    store
        .recording(id)
        .unwrap()
        .parts
        .iter()
        .map(|p| rrstore_format::id::hex(&p.blake3))
        .collect()
}

#[test]
fn gc_removes_the_chunk_lists_no_recording_needs_and_repair_still_works() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let mut store = Store::open(&dir).unwrap();
    let saxpy: RecordingId = import_path(&mut store, &fixtures().join("llvm22-host/saxpy"))[0]
        .id
        .parse()
        .unwrap();
    let reduction: RecordingId = import_path(&mut store, &fixtures().join("llvm22-host/reduction"))
        [0]
    .id
    .parse()
    .unwrap();
    let (gone, kept) = (parts_of(&store, &saxpy), parts_of(&store, &reduction));
    let only_saxpy: BTreeSet<String> = gone.difference(&kept).cloned().collect();
    assert!(!only_saxpy.is_empty());
    let before = part_lists(&dir);
    assert!(gone.union(&kept).all(|h| before.contains(h)), "{before:?}");

    store.remove(&[saxpy]).unwrap();
    let plan = store
        .gc_with(&GcOptions {
            dry_run: true,
            ..GcOptions::default()
        })
        .unwrap();
    assert_eq!(plan.part_lists_removed, only_saxpy.len() as u64);
    assert_eq!(part_lists(&dir), before, "a dry run changes nothing");
    let report = store.gc().unwrap();
    assert_eq!(report.part_lists_removed, only_saxpy.len() as u64);
    let after = part_lists(&dir);
    assert!(only_saxpy.iter().all(|h| !after.contains(h)), "{after:?}");
    // Shared parts and the other recording's parts keep their lists.
    assert!(kept.iter().all(|h| after.contains(h)), "{after:?}");
    assert_eq!(store.gc().unwrap().part_lists_removed, 0);
    drop(store);

    // The index lost: the remaining recording comes back from meta/.
    std::fs::write(dir.join("index.sqlite"), b"").unwrap();
    for sfx in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.join(format!("index.sqlite{sfx}")));
    }
    let r = Store::repair(&dir).unwrap();
    assert_eq!(r.recordings, 1);
    assert!(r.lost.is_empty(), "{:?}", r.lost);
    let store = Store::open_existing(&dir).unwrap();
    assert!(store.verify(&[], true).unwrap().ok());
    assert_eq!(parts_of(&store, &reduction), kept);

    // Importing saxpy again writes its lists again.
    let mut store = store;
    import_path(&mut store, &fixtures().join("llvm22-host/saxpy"));
    let again = part_lists(&dir);
    assert!(gone.iter().all(|h| again.contains(h)), "{again:?}");
}
