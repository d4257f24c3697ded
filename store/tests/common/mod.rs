//! Helpers shared by the store tests (real fixtures, real stores on disk).
#![allow(dead_code)]

use std::path::Path;

use rrstore_format::{PartRole, PartSource};
use rrstore_store::{find_sources, ImportOptions, ImportReport, Store};

#[allow(unused_imports)] // not every test binary needs it
pub use rrstore_tests::fixtures;

pub fn import_path(store: &mut Store, path: &Path) -> Vec<ImportReport> {
    let sources = find_sources(&[path.to_path_buf()]).unwrap();
    sources
        .iter()
        .map(|s| {
            store
                .import_source(s, &ImportOptions::default(), &mut |_| {})
                .unwrap()
                .0
        })
        .collect()
}

/// Read a part fully through `open_part`.
pub fn stream_part(src: &mut dyn PartSource, role: PartRole) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::copy(&mut src.open_part(role).unwrap(), &mut out).unwrap();
    out
}
