//! Where the real recordings live: `tests/fixtures/` of this crate.

use std::path::{Path, PathBuf};

/// The `tests/fixtures` directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Every recording descriptor (`*.json`) under `tests/fixtures/<set>`,
/// sorted; `src` folders hold the fixtures' sources, not recordings.
pub fn descriptors(set: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![fixtures().join(set)];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading fixtures {}: {e}", dir.display()));
        for e in entries {
            let p = e
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path();
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

/// Copy the recording next to `descriptor` (every `<stem>.*` file) into
/// `dir`, created if missing; returns the copy's descriptor. `descriptor`
/// may leave out the `.json`.
pub fn copy_recording(descriptor: &Path, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let stem = descriptor
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_else(|| panic!("no recording stem in {}", descriptor.display()));
    let from = descriptor.parent().unwrap_or(Path::new("."));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("reading {}: {e}", from.display()));
    for e in entries {
        let p = e
            .unwrap_or_else(|e| panic!("{}: {e}", from.display()))
            .path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with(&format!("{stem}.")) {
            std::fs::copy(&p, dir.join(name))
                .unwrap_or_else(|e| panic!("copying {}: {e}", p.display()));
        }
    }
    dir.join(format!("{stem}.json"))
}

/// The number `key` holds in a recording descriptor's JSON text (the
/// descriptor as LLVM writes it, one flat object).
pub fn descriptor_u64(json_text: &str, key: &str) -> u64 {
    json_text
        .split(&format!("\"{key}\":"))
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no number {key} in {json_text}"))
}
