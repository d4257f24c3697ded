//! Helpers for the regression tests: a store holding the two-kernel
//! fixture recording of tests/fixtures/images and its 8 image builds
//! (build 5 changes `scale` (l13), build 3 changes `square` (l16)).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub use crate::store_common::*;

pub const SCALE: &str = "*_l13";
pub const SQUARE: &str = "*_l16";

pub fn images_dir() -> PathBuf {
    fixtures().join("images")
}

pub fn image(n: usize) -> String {
    images_dir()
        .join(format!("img-{n}.so"))
        .to_string_lossy()
        .into_owned()
}

/// blake3 (hex) of image `n`, as `image ls` reports it.
pub fn image_hash(s: &Path, n: usize) -> String {
    let v = json(s, &["image", "ls", "--json"]);
    v.as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == format!("build-{n}"))
        .unwrap()["hash"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Import the fixture recording (label `regress`) and add the 8 images
/// (labels `build-N`).
pub fn setup(s: &Path) {
    ok(
        s,
        &[
            "import",
            images_dir().join("recording").to_str().unwrap(),
            "--label",
            "regress",
        ],
    );
    for n in 0..8 {
        ok(
            s,
            &["image", "add", &image(n), "--label", &format!("build-{n}")],
        );
    }
}

pub fn json(s: &Path, args: &[&str]) -> serde_json::Value {
    let o = run(s, args);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// ID of the recording whose kernel matches `glob` (`*_l13` / `*_l16`).
pub fn rec_id(s: &Path, glob: &str) -> String {
    let v = json(s, &["ls", "--kernel", glob, "--json"]);
    v[0]["id"].as_str().unwrap().to_string()
}

/// History rows of one recording.
pub fn history_rows(s: &Path, id: &str) -> Vec<serde_json::Value> {
    json(s, &["history", id, "--json"])
        .as_array()
        .unwrap()
        .clone()
}

pub fn all_images() -> Vec<String> {
    (0..8).map(|n| format!("build-{n}")).collect()
}
