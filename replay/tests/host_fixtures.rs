//! Every real LLVM 22 host recording in tests/fixtures (both layouts)
//! replays on the host backend and verifies byte-exactly: straight from its
//! `.json`, from a `.rra` archive, and from a store (by ID prefix), with a
//! history row per replay.

mod common;

use rrstore_format::{PartRole, RecordingId};
use rrstore_replay::backend::host::fills_from_files;
use rrstore_replay::{replay, RehydratePath, ReplayReport, ReplaySource, Verdict};
use rrstore_store::{ImportOptions, Store};

fn check(label: &str, src: &mut ReplaySource) -> ReplayReport {
    let r = replay(src, &common::options());
    assert_eq!(
        r.verdict,
        Verdict::Verified,
        "{label}: {:?} {:?}",
        r.error,
        r.mismatch
    );
    let size = src.recording.arena.size;
    let expected = if fills_from_files(size) {
        RehydratePath::Files
    } else {
        RehydratePath::Engine
    };
    assert_eq!(
        r.timing.rehydrate_path,
        Some(expected),
        "{label}: {size} bytes"
    );
    assert_eq!(r.backend, "host");
    assert_eq!(r.timing.kernel_ns.len(), 1);
    let out = src.recording.part(PartRole::Output).unwrap();
    assert_eq!(r.output_blake3, Some(out.blake3), "{label}");
    let img = src.recording.part(PartRole::Image).unwrap();
    assert_eq!(
        r.image_blake3,
        Some(img.blake3),
        "{label}: the image run is the recorded one"
    );
    assert!(
        r.runtime_libraries
            .iter()
            .any(|l| l.contains("libomptarget.so.22")),
        "{:?}",
        r.runtime_libraries
    );
    r
}

fn all() -> Vec<std::path::PathBuf> {
    let mut v = common::descriptors("llvm22-host");
    v.extend(common::descriptors("upstream-native"));
    assert_eq!(v.len(), 22, "11 recordings in each layout");
    v
}

#[test]
fn every_fixture_verifies_from_its_json() {
    for d in all() {
        let mut src = ReplaySource::llvm(&d).unwrap();
        check(&d.display().to_string(), &mut src);
    }
}

#[test]
fn every_fixture_verifies_from_a_rra_archive() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, d) in all().iter().enumerate() {
        let mut rec = rrstore_format::llvm::load(d).unwrap();
        let path = tmp.path().join(format!("{i}.rra"));
        let r = rec.recording.clone();
        rrstore_format::archive::write_path(&r, &mut rec, &path, &Default::default()).unwrap();
        let mut src = ReplaySource::archive(&path).unwrap();
        assert_eq!(src.id, r.id());
        check(&path.display().to_string(), &mut src);
    }
}

#[test]
fn every_fixture_verifies_from_a_store_and_gets_a_history_row() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path()).unwrap();
    let mut ids: Vec<RecordingId> = Vec::new();
    for d in all() {
        let mut rec = rrstore_format::llvm::load(&d).unwrap();
        let r = rec.recording.clone();
        store
            .import(&r, &mut rec, &ImportOptions::default(), &mut |_| {})
            .unwrap();
        ids.push(r.id());
    }
    let packs_before = dir_listing(tmp.path());
    for id in &ids {
        let mut src = ReplaySource::open(&id.to_hex()[..16], false, || {
            Ok(Store::open(tmp.path()).unwrap())
        })
        .unwrap();
        assert_eq!(src.id, *id);
        let report = check(&id.to_hex(), &mut src);
        rrstore_replay::history::record(&store, *id, &report).unwrap();
    }
    let rows = store.history(None).unwrap();
    assert_eq!(rows.len(), ids.len());
    for (row, id) in rows.iter().zip(&ids) {
        assert_eq!(row.recording, *id);
        assert_eq!(row.verdict, "verified");
        assert_eq!(row.backend, "host");
        assert_eq!(row.kernel_ns.len(), 1);
        assert!(row.device.starts_with("host x86_64"));
        assert!(row.runtime_versions.contains("libomp"));
        let rec = store.recording(id).unwrap();
        assert_eq!(
            row.output_blake3,
            Some(rec.part(PartRole::Output).unwrap().blake3)
        );
    }
    // A replay writes nothing to the store but its history rows.
    let packs_after = dir_listing(tmp.path());
    assert_eq!(packs_before.0, packs_after.0, "pack files unchanged");
}

/// (pack files with sizes, other files)
fn dir_listing(root: &std::path::Path) -> (Vec<(String, u64)>, Vec<String>) {
    let mut packs = Vec::new();
    let mut other = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                if rel.contains("pack") {
                    packs.push((rel, e.metadata().unwrap().len()));
                } else {
                    other.push(rel);
                }
            }
        }
    }
    packs.sort();
    other.sort();
    (packs, other)
}

/// A part source that refuses to read the output part.
struct NoOutputReads(rrstore_format::llvm::LlvmRecording);

impl rrstore_format::PartSource for NoOutputReads {
    fn open_part(&mut self, role: PartRole) -> std::io::Result<Box<dyn std::io::Read + '_>> {
        if role == PartRole::Output {
            return Err(std::io::Error::other("the output part was read"));
        }
        self.0.open_part(role)
    }

    fn extents(
        &mut self,
        role: PartRole,
    ) -> std::io::Result<Option<rrstore_format::extents::PartExtents>> {
        if role == PartRole::Output {
            return Err(std::io::Error::other(
                "the output part's files were asked for",
            ));
        }
        self.0.extents(role)
    }
}

#[test]
fn an_identical_arena_is_verified_by_its_hash_without_reading_the_output_part() {
    let d = common::saxpy_fixture();
    let rec = rrstore_format::llvm::load(&d).unwrap();
    let recording = rec.recording.clone();
    let mut src = ReplaySource {
        id: recording.id(),
        recording,
        origin: rrstore_replay::Origin::Llvm(d.clone()),
        parts: Box::new(NoOutputReads(rec)),
    };
    check("saxpy", &mut src);
}
