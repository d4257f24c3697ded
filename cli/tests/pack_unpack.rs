//! `rrstore pack` / `rrstore unpack` through the real binary: every fixture
//! comes back byte for byte, and bad input gives the documented exit codes.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::Output;

fn rrstore(args: &[&std::ffi::OsStr]) -> Output {
    store_common::command().args(args).output().unwrap()
}

fn run_ok(args: &[&std::ffi::OsStr]) -> String {
    let out = rrstore(args);
    assert!(
        out.status.success(),
        "rrstore {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// Every `.json` descriptor under the fixtures (recordings only).
fn descriptors(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            descriptors(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

/// The recording files next to `desc`: same stem, replay artefacts excluded.
fn recording_files(desc: &Path) -> Vec<(String, Vec<u8>)> {
    let stem = desc.file_stem().unwrap().to_str().unwrap();
    let mut v: Vec<_> = std::fs::read_dir(desc.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.strip_prefix(stem).is_some_and(|r| r.starts_with('.'))
                && !n.ends_with(".replay_output")
        })
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

fn dir_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn pack_and_unpack_reproduce_every_fixture_byte_for_byte() {
    let mut descs = Vec::new();
    descriptors(&fixtures_root(), &mut descs);
    descs.sort();
    assert!(descs.len() >= 20, "{descs:?}");
    let tmp = tempfile::tempdir().unwrap();
    for (i, desc) in descs.iter().enumerate() {
        let rra = tmp.path().join(format!("{i}.rra"));
        let out = run_ok(&[
            "pack".as_ref(),
            desc.as_os_str(),
            "-o".as_ref(),
            rra.as_os_str(),
        ]);
        let id = out.split_whitespace().next().unwrap().to_string();
        assert_eq!(id.len(), 64, "{out}");
        let dir = tmp.path().join(format!("{i}"));
        let out = run_ok(&[
            "unpack".as_ref(),
            rra.as_os_str(),
            "-o".as_ref(),
            dir.as_os_str(),
        ]);
        assert!(out.starts_with(&id), "{out}");
        assert_eq!(
            dir_files(&dir),
            recording_files(desc),
            "{} did not round-trip",
            desc.display()
        );
        // Packing again gives the same archive bytes.
        let again = tmp.path().join(format!("{i}-again.rra"));
        run_ok(&[
            "pack".as_ref(),
            desc.as_os_str(),
            "-o".as_ref(),
            again.as_os_str(),
        ]);
        assert!(std::fs::read(&rra).unwrap() == std::fs::read(&again).unwrap());
    }
}

#[test]
fn a_directory_with_one_recording_packs_and_layouts_convert() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixtures_root();
    let rra = tmp.path().join("saxpy.rra");
    run_ok(&[
        "pack".as_ref(),
        root.join("llvm22-host/saxpy").as_os_str(),
        "-o".as_ref(),
        rra.as_os_str(),
        "--level".as_ref(),
        "9".as_ref(),
    ]);
    // kernel-named -> native gives exactly the upstream-native fixture.
    let nat = tmp.path().join("native");
    run_ok(&[
        "unpack".as_ref(),
        rra.as_os_str(),
        "-o".as_ref(),
        nat.as_os_str(),
        "--layout".as_ref(),
        "native".as_ref(),
    ]);
    let mut want = Vec::new();
    descriptors(&root.join("upstream-native/saxpy"), &mut want);
    assert_eq!(dir_files(&nat), recording_files(&want[0]));
}

#[test]
fn bad_input_gives_clear_errors_and_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixtures_root();
    let code = |args: &[&std::ffi::OsStr]| {
        let o = rrstore(args);
        (
            o.status.code().unwrap(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let x = tmp.path().join("x.rra");

    // Several recordings: name the .json or use import.
    let (c, err) = code(&[
        "pack".as_ref(),
        root.join("llvm22-host/multi").as_os_str(),
        "-o".as_ref(),
        x.as_os_str(),
    ]);
    assert_eq!(c, 4, "{err}");
    assert!(
        err.contains("8 recordings") && err.contains("rrstore import"),
        "{err}"
    );
    assert!(!x.exists());

    let (c, err) = code(&[
        "pack".as_ref(),
        tmp.path().join("missing.json").as_os_str(),
        "-o".as_ref(),
        x.as_os_str(),
    ]);
    assert_eq!(c, 3, "{err}");
    let (c, _) = code(&[
        "pack".as_ref(),
        root.join("llvm22-host/saxpy").as_os_str(),
        "-o".as_ref(),
        x.as_os_str(),
        "--level".as_ref(),
        "99".as_ref(),
    ]);
    assert_eq!(c, 2);

    run_ok(&[
        "pack".as_ref(),
        root.join("llvm22-host/globals").as_os_str(),
        "-o".as_ref(),
        x.as_os_str(),
    ]);
    let good = std::fs::read(&x).unwrap();
    let out = tmp.path().join("out");
    let unpack = |bytes: &[u8]| {
        let p = tmp.path().join("bad.rra");
        std::fs::write(&p, bytes).unwrap();
        code(&[
            "unpack".as_ref(),
            p.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ])
    };
    let (c, err) = unpack(b"not an archive");
    assert_eq!(c, 4, "{err}");
    assert!(
        err.contains("bad.rra") && err.contains("not an rrstore archive"),
        "{err}"
    );
    let (c, err) = unpack(&good[..good.len() - 1]);
    assert_eq!(c, 5, "{err}");
    assert!(err.contains("truncated"), "{err}");
    let mut flipped = good.clone();
    flipped[40] ^= 0x10; // inside the first chunk
    let (c, err) = unpack(&flipped);
    assert_eq!(c, 5, "{err}");
    assert!(err.contains("at byte") && err.contains("corrupt"), "{err}");
    let mut v2 = good.clone();
    v2[8] = 2;
    let (c, err) = unpack(&v2);
    assert_eq!(c, 16, "{err}");
    assert!(err.contains("version 2"), "{err}");
}
