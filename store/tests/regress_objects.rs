//! Stand-alone objects of the regression workflow on a real store: images
//! are deduplicated against recordings' image parts, read back byte for
//! byte, survive gc with no recording referencing them, and saved outputs
//! (linked or stored) stay readable after gc.

mod common;

use std::io::Read;

use common::*;
use rrstore_format::PartRole;
use rrstore_store::Store;

#[test]
fn images_and_saved_outputs_are_kept_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path().join("s")).unwrap();
    let fx = fixtures().join("images");
    let reports = import_path(&mut store, &fx.join("recording"));
    assert_eq!(reports.len(), 2);
    let id = store.resolve(&reports[0].id).unwrap();
    let rec = store.recording(&id).unwrap();

    // Image 0 is the recorded image: adding it stores no new chunk.
    let a0 = store.add_image(&fx.join("img-0.so"), "b0").unwrap();
    assert!(a0.put.present);
    assert_eq!(a0.put.stored_bytes, 0);
    assert_eq!(
        a0.image.hash_bytes(),
        rec.part(PartRole::Image).unwrap().blake3
    );
    // Image 7 is new; its bytes come back exactly.
    let a7 = store.add_image(&fx.join("img-7.so"), "b7").unwrap();
    assert!(!a7.present && !a7.put.present && a7.put.stored_bytes > 0);
    let bytes = std::fs::read(fx.join("img-7.so")).unwrap();
    assert_eq!(store.read_object(&a7.image.hash_bytes()).unwrap(), bytes);
    // Again: present, label kept unless a new one is given.
    let again = store.add_image(&fx.join("img-7.so"), "").unwrap();
    assert!(again.present);
    assert_eq!(again.image.label, "b7");
    assert_eq!(store.resolve_image("b7").unwrap().hash, a7.image.hash);
    assert_eq!(
        store.resolve_image(&a7.image.hash[..8]).unwrap().label,
        "b7"
    );
    assert!(store.resolve_image("b9").is_err());

    // A saved output that differs from the recorded one, and a link.
    let out = tmp.path().join("out.bin");
    let mut arena = stream_part(&mut store.part_source(&id).unwrap(), PartRole::Output);
    arena[100] ^= 1;
    std::fs::write(&out, &arena).unwrap();
    let put = store.save_output_file(41, &out).unwrap();
    let recorded = rec.part(PartRole::Output).unwrap().blake3;
    store.link_output(42, &recorded).unwrap();

    // Remove every recording and collect: the objects stay.
    let all: Vec<_> = reports
        .iter()
        .map(|r| store.resolve(&r.id).unwrap())
        .collect();
    assert_eq!(store.remove(&all).unwrap(), 2);
    store.gc().unwrap();
    assert_eq!(store.read_object(&a7.image.hash_bytes()).unwrap(), bytes);
    let mut back = Vec::new();
    store
        .open_object(&store.saved_output(41).unwrap().unwrap())
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert_eq!(back, arena);
    assert_eq!(put.hash, *blake3::hash(&arena).as_bytes());
    assert_eq!(store.saved_output(42).unwrap(), Some(recorded));
    assert!(store.has_part(&recorded).unwrap());
}
