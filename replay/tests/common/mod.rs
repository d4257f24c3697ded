//! Shared helpers of the replay crate's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rrstore_replay::backend::host::Runner;
use rrstore_replay::ReplayOptions;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// Every recording descriptor under `tests/fixtures/<set>`, sorted.
pub fn descriptors(set: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![fixtures().join(set)];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "src") {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Options using this crate's stand-alone runner. OMP_NUM_THREADS=2: the
/// fixtures were recorded with two OpenMP threads and their float
/// reductions are bit-reproducible only with the same count.
pub fn options() -> ReplayOptions {
    ReplayOptions {
        host_runner: Some(Runner {
            program: env!("CARGO_BIN_EXE_rrstore-host-runner").into(),
            args: vec![],
        }),
        host_env: vec![("OMP_NUM_THREADS".into(), "2".into())],
        ..ReplayOptions::default()
    }
}
