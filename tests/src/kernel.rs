//! Kernels compiled here with the system C compiler (the Rust toolchain's
//! linker, so present wherever the tests build): host images whose body a
//! test chooses (a crash, a hang, a write).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compile `c_code` (written to `src`) into the shared object `out` with
/// `cc -shared -fPIC` and `extra` flags.
pub fn compile_shared(src: &Path, c_code: &str, out: &Path, extra: &[&str]) {
    std::fs::write(src, c_code).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(out)
        .arg(src)
        .args(extra)
        .status()
        .unwrap_or_else(|e| panic!("running cc: {e}"));
    assert!(st.success(), "cc failed for {}", src.display());
}

/// Replace the image of the host recording `descriptor` (its `.json`) with
/// `c_code` compiled, and its globals with none (the new image has none).
pub fn replace_kernel(descriptor: &Path, c_code: &str) {
    let dir = descriptor.parent().unwrap_or(Path::new("."));
    compile_shared(
        &dir.join("kernel.c"),
        c_code,
        &descriptor.with_extension("image"),
        &[],
    );
    let globals = descriptor.with_extension("globals");
    std::fs::write(&globals, b"").unwrap_or_else(|e| panic!("{}: {e}", globals.display()));
}

/// Copy the host recording `fixture` (its `.json`) into `dir` with its
/// image replaced by `c_code(kernel symbol)` compiled
/// ([`replace_kernel`]); the copy's descriptor.
pub fn recording_with_kernel(
    fixture: &Path,
    dir: &Path,
    c_code: impl FnOnce(&str) -> String,
) -> PathBuf {
    let j = crate::copy_recording(fixture, dir);
    let kernel = j
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_else(|| panic!("{}: no kernel name", j.display()))
        .to_string();
    replace_kernel(&j, &c_code(&kernel));
    j
}
