//! Helpers shared by the LLVM import/export tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

#[allow(unused_imports)] // not every test binary needs it
pub use rrstore_tests::fixtures;

/// Every file in `dir` whose name starts with `<stem>.`, name -> bytes
/// (`.replay_output` files excluded: they are not part of a recording).
pub fn files_of(dir: &Path, stem: &str) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if name.starts_with(&format!("{stem}.")) && !name.ends_with(".replay_output") {
            out.insert(name, fs::read(e.path()).unwrap());
        }
    }
    out
}

/// All files in a directory, name -> bytes.
pub fn all_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Copy a recording's files (by stem) into `to`, returning the new descriptor.
pub fn copy_recording(descriptor: &Path, to: &Path) -> PathBuf {
    let dir = descriptor.parent().unwrap();
    let stem = descriptor.file_stem().unwrap().to_str().unwrap();
    for (name, bytes) in files_of(dir, stem) {
        fs::write(to.join(name), bytes).unwrap();
    }
    to.join(descriptor.file_name().unwrap())
}

/// Descriptor paths of a fixture generation directory.
pub fn recordings(generation_dir: &str) -> Vec<PathBuf> {
    let v = rrstore_format::llvm::find_recordings(&fixtures().join(generation_dir)).unwrap();
    assert!(!v.is_empty(), "no recordings under {generation_dir}");
    v
}
