//! A recovery chunk list that a power failure left incomplete under its
//! name (the `meta/` files of a command become durable together, after the
//! last of them: spec/STORE.md, "Recovery metadata") is found by its
//! checksum and written again the next time its recording's metadata is
//! written, so `repair` can still rebuild the recording from it.

mod common;

use common::*;
use rrstore_format::RecordingId;
use rrstore_store::recovery;
use rrstore_store::Store;

#[test]
fn a_torn_chunk_list_is_rewritten_and_repair_uses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let mut store = Store::open(&dir).unwrap();
    let saxpy = fixtures().join("llvm22-host/saxpy");
    let id: RecordingId = import_path(&mut store, &saxpy)[0].id.parse().unwrap();
    store.sync_meta().unwrap();
    let part = store.recording(&id).unwrap().parts[0].blake3;
    let list = recovery::part_path(&dir, &part);
    let whole = std::fs::read(&list).unwrap();
    // What a power failure before the sync can leave: the name, a short body.
    std::fs::write(&list, &whole[..whole.len() / 2]).unwrap();
    std::fs::remove_file(recovery::recording_path(&dir, &id)).unwrap();

    // Importing the present recording writes its missing metadata, and
    // with it the chunk list that fails its checksum.
    import_path(&mut store, &saxpy);
    store.sync_meta().unwrap();
    assert_eq!(
        std::fs::read(&list).unwrap(),
        whole,
        "the list was rewritten"
    );
    drop(store);

    std::fs::remove_file(dir.join("index.sqlite")).unwrap();
    let report = Store::repair(&dir).unwrap();
    assert!(
        report.lost.is_empty(),
        "repair rebuilt the recording from its lists: {report:?}"
    );
    let store = Store::open(&dir).unwrap();
    assert!(store.contains(&id).unwrap());
}
