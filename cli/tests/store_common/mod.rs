//! Helpers for the store tests that drive the real `rrstore` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[allow(unused_imports)] // not every test binary needs it
pub use rrstore_tests::fixtures;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_rrstore")
}

/// The home directory every test's `rrstore` runs with: empty, one per test
/// process, so no user configuration (`~/.config/rrstore/config.toml`,
/// `$XDG_CONFIG_HOME`, `$RRSTORE_CONFIG`) or default store
/// (`~/.local/share/rrstore`, `$XDG_DATA_HOME`) of whoever runs the tests
/// can change what a command does.
pub fn isolated_home() -> &'static Path {
    static HOME: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    HOME.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("rrstore-test-home")
            .tempdir()
            .unwrap()
    })
    .path()
}

/// `rrstore` as every test runs it: [`isolated_home`] as `HOME`, its
/// `config/` as `XDG_CONFIG_HOME`, and none of the variables that point
/// at a user's store or configuration. A test that needs a configuration
/// sets `HOME`/`XDG_CONFIG_HOME` itself after this.
pub fn command() -> Command {
    let home = isolated_home();
    let mut c = Command::new(bin());
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("RRSTORE_CONFIG")
        .env_remove("RRSTORE_DIR");
    c
}

/// Run `rrstore --store STORE args...`.
pub fn run(store: &Path, args: &[&str]) -> Output {
    command()
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("RRSTORE_DIR")
        .output()
        .unwrap()
}

pub fn ok(store: &Path, args: &[&str]) -> String {
    expect_ok(run(store, args), args)
}

/// Exit code and stderr of a command expected to fail.
pub fn fails(store: &Path, args: &[&str]) -> (i32, String) {
    expect_failure(run(store, args), args)
}

/// The stdout of `rrstore args...`, which must have succeeded.
pub fn expect_ok(o: Output, args: &[&str]) -> String {
    assert!(
        o.status.success(),
        "{args:?} failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Exit code and stderr of `rrstore args...`, which must have failed.
pub fn expect_failure(o: Output, args: &[&str]) -> (i32, String) {
    assert!(
        !o.status.success(),
        "{args:?} unexpectedly succeeded: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

pub fn ls_ids(store: &Path) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(&ok(store, &["ls", "--json"])).unwrap();
    let mut ids: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// Copy a directory tree (fixtures into a scratch dir).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// Snapshot of every file under a directory (path -> bytes), to show a
/// failed command left the store unchanged.
pub fn tree_bytes(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    fn walk(d: &Path, out: &mut std::collections::BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if !p.to_string_lossy().contains("index.sqlite") {
                out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    walk(dir, &mut out);
    out
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}
