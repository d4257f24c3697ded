//! Puts the commit rrstore is built from into `rrstore --version`
//! (`RRSTORE_COMMIT`: 12 hex digits, `-dirty` when the tree had changes, or
//! `unknown` outside a git checkout, e.g. a source tarball).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
    let value = match commit {
        Some(c) if dirty => format!("{c}-dirty"),
        Some(c) => c,
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=RRSTORE_COMMIT={value}");
    // Rebuilt when HEAD moves (a commit, a checkout) or the index changes.
    if let (Some(dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
        if let Some(r) = git(&["rev-parse", "--symbolic-full-name", "HEAD"]) {
            println!("cargo:rerun-if-changed={common}/{r}");
        }
        println!("cargo:rerun-if-changed={common}/packed-refs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
