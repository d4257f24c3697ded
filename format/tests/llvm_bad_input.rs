//! Bad input: specific validation errors name the file, key or byte offset;
//! and a sweep of mutated recordings (truncated, flipped, keys deleted,
//! integers replaced by floats, strings, negatives, huge values) never
//! panics, whether it loads or not.

mod llvm_common;

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use llvm_common::*;
use rrstore_format::llvm::{self, Layout};
use rrstore_format::FormatError;

const KN: &str = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13.json";
const NAT: &str = "upstream-native/globals/8213343555634104159_9883226215827474840.json";
const LEGACY: &str = "legacy/globals/__omp_offloading_fe00_9ae057_main_l13.json";

/// A private copy of a fixture recording.
fn copy(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let desc = copy_recording(&fixtures().join(rel), tmp.path());
    (tmp, desc)
}

fn set_json(desc: &Path, f: impl FnOnce(&str) -> String) {
    let s = fs::read_to_string(desc).unwrap();
    fs::write(desc, f(&s)).unwrap();
}

fn load_err(desc: &Path) -> FormatError {
    llvm::load(desc).unwrap_err()
}

#[test]
fn num_args_must_match_the_arrays() {
    let (_t, d) = copy(KN);
    set_json(&d, |s| s.replace("\"NumArgs\":2", "\"NumArgs\":3"));
    let e = load_err(&d);
    assert!(
        matches!(&e, FormatError::Key { key, .. } if key == "NumArgs"),
        "{e}"
    );
    assert!(e.to_string().contains("ArgPtrs has 2 elements"), "{e}");
}

#[test]
fn floats_strings_negatives_and_missing_keys_name_file_and_key() {
    for (from, to, key, says) in [
        (
            "\"LoopTripCount\":0",
            "\"LoopTripCount\":0.0",
            "LoopTripCount",
            "floats",
        ),
        ("\"DeviceId\":3", "\"DeviceId\":\"3\"", "DeviceId", "string"),
        (
            "\"NumTeamsClause\":1",
            "\"NumTeamsClause\":-1",
            "NumTeamsClause",
            "-1",
        ),
        (
            "\"ArgPtrs\":[-1,",
            "\"ArgPtrs\":[-1.5,",
            "ArgPtrs[0]",
            "floats",
        ),
        (
            "\"ArgPtrs\":[-1,",
            "\"ArgPtrs\":[1e300,",
            "ArgPtrs[0]",
            "floats",
        ),
        ("\"ArgOffsets\":[0,0],", "", "ArgOffsets", "missing"),
        (
            "\"DeviceMemorySize\":64",
            "\"DeviceMemorySize\":18446744073709551616",
            "DeviceMemorySize",
            "non-integer",
        ),
    ] {
        let (_t, d) = copy(KN);
        set_json(&d, |s| s.replace(from, to));
        let e = load_err(&d);
        let msg = e.to_string();
        assert!(
            matches!(&e, FormatError::Key { key: k, .. } if k == key),
            "{msg}"
        );
        assert!(msg.contains(says), "{msg}");
        assert!(msg.contains(d.to_str().unwrap()), "{msg}");
    }
}

#[test]
fn snapshot_sizes_are_checked() {
    let (_t, d) = copy(KN);
    set_json(&d, |s| {
        s.replace(
            "\"DeviceMemorySize\":64",
            "\"DeviceMemorySize\":4611686018427387904",
        )
    });
    let e = load_err(&d);
    assert!(e.to_string().contains("is 4611686018427387904 but"), "{e}");

    let (_t, d) = copy(KN);
    let out = d.with_extension("original.output");
    fs::write(&out, [0u8; 60]).unwrap();
    let e = load_err(&d);
    assert!(
        e.to_string().contains("output snapshot has 60 bytes"),
        "{e}"
    );

    let (_t, d) = copy(NAT);
    set_json(&d, |s| {
        s.replace("\"VAllocSize\":1073741824", "\"VAllocSize\":8")
    });
    let e = load_err(&d);
    assert!(
        matches!(&e, FormatError::Key { key, .. } if key == "VAllocSize"),
        "{e}"
    );

    let (_t, d) = copy(KN);
    fs::remove_file(d.with_extension("memory")).unwrap();
    assert!(load_err(&d).to_string().contains("input snapshot"));
}

#[test]
fn globals_overrun_and_absurd_sizes_give_byte_offsets() {
    let (_t, d) = copy(KN);
    let g = d.with_extension("globals");
    let mut bytes = fs::read(&g).unwrap();
    bytes.pop();
    fs::write(&g, &bytes).unwrap();
    match load_err(&d) {
        FormatError::At {
            offset, message, ..
        } => {
            assert_eq!(offset, 2090, "{message}");
            assert!(message.contains("g_scale"), "{message}");
        }
        e => panic!("{e}"),
    }

    let (_t, d) = copy(NAT);
    let g = d.with_extension("globals");
    let mut bytes = fs::read(&g).unwrap();
    // First entry's u64 size -> 2^62.
    bytes[8..16].copy_from_slice(&(1u64 << 62).to_le_bytes());
    fs::write(&g, &bytes).unwrap();
    let e = load_err(&d);
    assert!(matches!(e, FormatError::At { .. }), "{e}");
    assert!(e.to_string().contains("4611686018427387904"), "{e}");

    let (_t, d) = copy(NAT);
    let g = d.with_extension("globals");
    let mut bytes = fs::read(&g).unwrap();
    bytes.extend_from_slice(b"junk");
    fs::write(&g, &bytes).unwrap();
    match load_err(&d) {
        FormatError::At { offset, .. } => assert_eq!(offset, 2122),
        e => panic!("{e}"),
    }
}

#[test]
fn not_a_descriptor_is_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, body) in [
        ("a.json", "[]"),
        ("b.json", "{\"Foo\":1}"),
        ("c.json", "{"),
        ("d.json", ""),
        ("e.json", "{\"NumTeams\":1,\"NumTeamsClause\":1}"),
    ] {
        let p = tmp.path().join(name);
        fs::write(&p, body).unwrap();
        assert!(llvm::load(&p).is_err(), "{name}");
    }
    assert!(llvm::load(&tmp.path().join("missing.json")).is_err());
    assert!(llvm::load(tmp.path()).is_err());
}

// ---------------------------------------------------------------------
// Mutation sweep

/// Load, and if that works, export in every layout: none may panic.
fn exercise(desc: &Path, label: &str) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        if let Ok(mut l) = llvm::load(desc) {
            let rec = l.recording.clone();
            for layout in [None, Some(Layout::KernelNamed), Some(Layout::Native)] {
                let out = tempfile::tempdir().unwrap();
                let _ = llvm::export(&rec, &mut l, out.path(), layout);
            }
        }
    }));
    assert!(r.is_ok(), "panic on mutation: {label}");
}

fn json_mutations(orig: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let b = orig.as_bytes();
    for n in 0..b.len() {
        v.push((
            format!("truncate json at {n}"),
            String::from_utf8_lossy(&b[..n]).into(),
        ));
    }
    for i in 0..b.len() {
        for x in [b'"', b'-', b'9', b'.', b'e', b'{', b']', 0xff] {
            let mut m = b.to_vec();
            m[i] = x;
            v.push((
                format!("json byte {i} -> {x:#x}"),
                String::from_utf8_lossy(&m).into(),
            ));
        }
    }
    // Per key: delete it, or replace its value.
    let value: serde_json::Value = serde_json::from_str(orig).unwrap();
    let obj = value.as_object().unwrap();
    for key in obj.keys() {
        let mut del = obj.clone();
        del.remove(key);
        v.push((
            format!("delete {key}"),
            serde_json::Value::Object(del).to_string(),
        ));
        for repl in [
            "1.5",
            "\"7\"",
            "-1",
            "-9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "4611686018427387904",
            "1e19",
            "null",
            "true",
            "[]",
            "[1,2]",
            "[-1,-1]",
            "{}",
            "\"\"",
            "\"../../etc/x\"",
        ] {
            let mut m = obj.clone();
            m.insert(key.clone(), serde_json::from_str(repl).unwrap());
            v.push((
                format!("{key} = {repl}"),
                serde_json::Value::Object(m).to_string(),
            ));
        }
    }
    v
}

fn sweep(rel: &str) -> usize {
    let (tmp, desc) = copy(rel);
    let pristine = files_of(tmp.path(), desc.file_stem().unwrap().to_str().unwrap());
    let restore = || {
        for (n, b) in &pristine {
            fs::write(tmp.path().join(n), b).unwrap();
        }
    };
    let mut count = 0;
    let orig = fs::read_to_string(&desc).unwrap();
    for (label, body) in json_mutations(&orig) {
        fs::write(&desc, body).unwrap();
        exercise(&desc, &format!("{rel}: {label}"));
        count += 1;
    }
    restore();
    // Binary parts: truncate and flip.
    for (name, bytes) in &pristine {
        if name.ends_with(".json") {
            continue;
        }
        let path = tmp.path().join(name);
        let step = (bytes.len() / 64).max(1);
        let mut cuts: Vec<usize> = (0..bytes.len()).step_by(step).collect();
        cuts.extend((bytes.len().saturating_sub(20))..bytes.len());
        for n in cuts {
            fs::write(&path, &bytes[..n]).unwrap();
            exercise(&desc, &format!("{rel}: truncate {name} at {n}"));
            count += 1;
        }
        let flips: Vec<usize> = if name.ends_with(".globals") {
            (0..bytes.len().min(64))
                .chain((0..bytes.len()).step_by(97))
                .collect()
        } else {
            (0..bytes.len()).step_by(step).collect()
        };
        for i in flips {
            for x in [0x00, 0xff, 0x80, 0x01] {
                let mut m = bytes.clone();
                m[i] = x;
                fs::write(&path, &m).unwrap();
                exercise(&desc, &format!("{rel}: {name} byte {i} -> {x:#x}"));
                count += 1;
            }
        }
        fs::write(&path, bytes).unwrap();
        fs::remove_file(&path).unwrap();
        exercise(&desc, &format!("{rel}: without {name}"));
        fs::write(&path, bytes).unwrap();
    }
    count
}

#[test]
fn mutated_recordings_never_panic() {
    let mut total = 0;
    for rel in [KN, NAT, LEGACY] {
        total += sweep(rel);
    }
    assert!(total > 5000, "only {total} mutations");
}
