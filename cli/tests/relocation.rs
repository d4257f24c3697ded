//! `--placement` and `--relocate-to` through the real binary (issue 19):
//! every bundled host fixture (LLVM 22, LLVM 23+ layout, LLVM 19), plus the pointer-chasing and Jacobi
//! recordings of `tests/fixtures/llvm22-relocation`, replays and verifies
//! relocated at an address the test chooses, and in `auto` mode with the
//! recorded range occupied (`RRSTORE_DEBUG_OCCUPY`); the pointer
//! recordings fail with stored-pointer rebasing switched off
//! (`RRSTORE_NO_POINTER_REBASE`); `show --pointers` lists their pointers;
//! the history row says which placement was used.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use rrstore_tests::output::{json, text};
use rrstore_tests::{descriptor_u64, descriptors};

fn rrstore(store: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    let mut c = store_common::command();
    c.arg("--store")
        .arg(store)
        .args(args)
        .env("OMP_NUM_THREADS", "2")
        .env_remove("RRSTORE_DIR")
        .env_remove("RRSTORE_DEBUG_OCCUPY")
        .env_remove("RRSTORE_NO_POINTER_REBASE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn all_fixtures() -> Vec<PathBuf> {
    let mut all = descriptors("llvm22-host");
    all.extend(descriptors("upstream-native"));
    all.extend(descriptors("llvm19-host"));
    all.extend(descriptors("llvm22-relocation"));
    all
}

/// Arena base and size recorded in `d` (LLVM 18-22 keys, or LLVM 23+:
/// `VAllocAddr` and the input snapshot's length).
fn arena(d: &Path) -> (u64, u64) {
    let t = std::fs::read_to_string(d).unwrap();
    if t.contains("\"VAllocAddr\"") {
        let input = d.with_extension("record_input");
        let len = std::fs::metadata(&input).unwrap().len();
        return (descriptor_u64(&t, "VAllocAddr"), len);
    }
    (
        descriptor_u64(&t, "BumpAllocVAStart"),
        descriptor_u64(&t, "DeviceMemorySize"),
    )
}

fn is_pointers(d: &Path) -> bool {
    d.to_string_lossy().contains("/pointers/")
}

#[test]
fn every_fixture_verifies_relocated_to_a_chosen_address() {
    let tmp = tempfile::tempdir().unwrap();
    let all = all_fixtures();
    assert_eq!(all.len(), 29);
    for d in &all {
        let (base, _) = arena(d);
        let to = 0x3000_0000_0000 + base % 4096;
        let o = rrstore(
            tmp.path(),
            &[
                "replay",
                d.to_str().unwrap(),
                "--placement",
                "relocate",
                "--relocate-to",
                &format!("{to:#x}"),
                "--verify",
                "--json",
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{d:?}: {}", text(&o));
        let v = json(&o);
        assert_eq!(v["verdict"], "verified", "{d:?}");
        let p = &v["placement"];
        assert_eq!(p["mode"], "relocated", "{d:?}");
        assert_eq!(p["address"], to, "{d:?}");
        assert_eq!(p["recorded_address"], base, "{d:?}");
        if is_pointers(d) {
            assert_eq!(p["rebased_pointers"], 4, "{d:?}");
        }
    }
    // From the store: the runner fills from pack chunks, whose boundaries
    // fall anywhere (words straddling two chunks), and from a .rra.
    let dir = rrstore_tests::fixtures().join("llvm22-relocation");
    let o = rrstore(
        tmp.path(),
        &["import", dir.to_str().unwrap(), "--json"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let imported = json(&o);
    for r in imported["recordings"].as_array().unwrap() {
        let id = r["id"].as_str().unwrap();
        let rra = tmp.path().join(format!("{}.rra", &id[..12]));
        let o = rrstore(
            tmp.path(),
            &["export", id, "-o", rra.to_str().unwrap()],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        for spec in [&id[..12], rra.to_str().unwrap()] {
            let args = ["replay", spec, "--placement", "relocate", "--json"];
            let o = rrstore(tmp.path(), &args, &[]);
            assert_eq!(o.status.code(), Some(0), "{spec}: {}", text(&o));
            let v = json(&o);
            assert_eq!(v["verdict"], "verified", "{spec}");
            assert_eq!(v["placement"]["mode"], "relocated", "{spec}");
        }
    }
}

#[test]
fn auto_relocates_when_the_recorded_range_is_occupied() {
    let tmp = tempfile::tempdir().unwrap();
    for d in &all_fixtures() {
        let (base, size) = arena(d);
        let occupy = [("RRSTORE_DEBUG_OCCUPY", format!("{base:#x}:{size}"))];
        let o = rrstore(
            tmp.path(),
            &["replay", d.to_str().unwrap(), "--json"],
            &occupy,
        );
        assert_eq!(o.status.code(), Some(0), "{d:?}: {}", text(&o));
        let v = json(&o);
        assert_eq!(v["verdict"], "verified", "{d:?}");
        assert_eq!(v["placement"]["mode"], "relocated", "{d:?}");
        assert_ne!(v["placement"]["address"], base, "{d:?}");
    }
    // --placement recorded keeps exit 10, naming the occupant.
    let d = &descriptors("llvm22-relocation")[0];
    let (base, size) = arena(d);
    let occupy = [("RRSTORE_DEBUG_OCCUPY", format!("{base:#x}:{size}"))];
    let args = ["replay", d.to_str().unwrap(), "--placement", "recorded"];
    let o = rrstore(tmp.path(), &args, &occupy);
    assert_eq!(o.status.code(), Some(10), "{}", text(&o));
    assert!(text(&o).contains("occupied by"), "{}", text(&o));
    // With the range free, auto keeps the recorded address.
    let o = rrstore(tmp.path(), &["replay", d.to_str().unwrap(), "--json"], &[]);
    let v = json(&o);
    assert_eq!(v["placement"]["mode"], "recorded", "{}", text(&o));
    assert_eq!(v["placement"]["address"], base);
}

#[test]
fn pointer_recordings_fail_relocated_without_stored_pointer_rebasing() {
    let tmp = tempfile::tempdir().unwrap();
    let pointers = descriptors("llvm22-relocation");
    let pointers: Vec<_> = pointers.iter().filter(|d| is_pointers(d)).collect();
    assert_eq!(pointers.len(), 2);
    for d in pointers {
        let args = ["replay", d.to_str().unwrap(), "--placement", "relocate"];
        let off = [("RRSTORE_NO_POINTER_REBASE", "1".to_string())];
        let o = rrstore(tmp.path(), &args, &off);
        // The kernels load their array pointers from the arena: the
        // recorded addresses are unmapped in the runner (a crash, exit
        // 12), or a mismatch (exit 1) where something else is mapped.
        assert!(
            matches!(o.status.code(), Some(12) | Some(1)),
            "{d:?}: {}",
            text(&o)
        );
        let o = rrstore(tmp.path(), &args, &[]);
        assert_eq!(o.status.code(), Some(0), "{d:?}: {}", text(&o));
    }
}

#[test]
fn history_rows_say_which_placement_was_used() {
    let tmp = tempfile::tempdir().unwrap();
    let d = &descriptors("llvm22-relocation")[0];
    let d = d.to_str().unwrap();
    let o = rrstore(tmp.path(), &["replay", d, "--placement", "relocate"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("placement relocated 0x"), "{}", text(&o));
    let o = rrstore(tmp.path(), &["replay", d], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = rrstore(tmp.path(), &["history", d, "--json"], &[]);
    let rows = json(&o);
    let placements: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["placement"].as_str().unwrap())
        .collect();
    assert_eq!(placements.len(), 2, "{placements:?}");
    assert!(placements[0].starts_with("relocated 0x"), "{placements:?}");
    assert!(placements[1].starts_with("recorded 0x"), "{placements:?}");
    let o = rrstore(tmp.path(), &["history", d], &[]);
    let t = text(&o);
    let lines: Vec<&str> = t.lines().filter(|l| l.contains(" verified ")).collect();
    assert_eq!(lines.len(), 2, "{t}");
    assert!(lines[0].contains("  relocated 0x"), "{t}");
    assert!(!lines[1].contains("relocated"), "{t}");
}

#[test]
fn show_pointers_lists_the_stored_pointers() {
    let tmp = tempfile::tempdir().unwrap();
    let nested = descriptors("llvm22-relocation")
        .into_iter()
        .find(|d| d.to_string_lossy().contains("01-nested"))
        .unwrap();
    let o = rrstore(
        tmp.path(),
        &["import", nested.to_str().unwrap(), "--json"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let id = json(&o)["recordings"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let o = rrstore(
        tmp.path(),
        &["show", &id[..12], "--pointers", "--json"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let p = &json(&o)["pointers"];
    assert_eq!(p["total"], 4);
    let got: Vec<(u64, u64)> = p["pointers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["offset"].as_u64().unwrap(), s["target"].as_u64().unwrap()))
        .collect();
    // Field{n, src*, dst*} at +0 (src, dst: the arrays at +0x20, +0x10020),
    // Outer{scale, Inner*} at +0x20020 -> Inner{n, data*} at +0x20030.
    assert_eq!(
        got,
        vec![
            (8, 0x20),
            (16, 0x10020),
            (0x20028, 0x20030),
            (0x20038, 0x20040)
        ]
    );
    let o = rrstore(tmp.path(), &["show", &id[..12], "--pointers"], &[]);
    let t = text(&o);
    assert!(t.contains("stored pointers: 4"), "{t}");
    assert!(t.contains("0x20028"), "{t}");
}

#[test]
fn an_arena_beyond_the_address_space_relocates_in_auto_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let d = descriptors("llvm22-host")
        .into_iter()
        .find(|d| d.to_string_lossy().contains("/globals/"))
        .unwrap();
    let j = rrstore_tests::copy_recording(&d, &tmp.path().join("far"));
    let desc = std::fs::read_to_string(&j).unwrap();
    let base = descriptor_u64(&desc, "BumpAllocVAStart").to_string();
    // The arena and the argument pointing into it, beyond any user address
    // space (LLVM 22 arguments are plain numbers in the descriptor).
    let far = (1u64 << 57) + (descriptor_u64(&desc, "BumpAllocVAStart") % 4096);
    std::fs::write(&j, desc.replace(&base, &far.to_string())).unwrap();
    let o = rrstore(tmp.path(), &["replay", j.to_str().unwrap(), "--json"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["verdict"], "verified");
    assert_eq!(v["placement"]["mode"], "relocated");
    assert_eq!(v["placement"]["rebased_args"], 1);
}

/// `--save-output` of a relocated replay: translated back to the recorded
/// addresses by default (then equal to the recorded output), or as the
/// device left it with `--save-output-form relocated` (then the stored
/// pointers hold relocated addresses); the report says which form.
#[test]
fn save_output_writes_the_recorded_or_the_relocated_form() {
    let tmp = tempfile::tempdir().unwrap();
    let d = descriptors("llvm22-relocation")
        .into_iter()
        .find(|d| is_pointers(d))
        .unwrap();
    let recorded_output = std::fs::read(d.with_extension("original.output")).unwrap();
    let (base, size) = arena(&d);
    let to = 0x3000_0000_0000 + base % 4096;
    let save = |form: Option<&str>| {
        let out = tmp
            .path()
            .join(format!("out-{}.bin", form.unwrap_or("default")));
        let mut args = vec![
            "replay".to_string(),
            d.to_str().unwrap().to_string(),
            "--placement".into(),
            "relocate".into(),
            "--relocate-to".into(),
            format!("{to:#x}"),
            "--verify".into(),
            "--json".into(),
            "--save-output".into(),
            out.to_str().unwrap().into(),
        ];
        if let Some(f) = form {
            args.extend(["--save-output-form".into(), f.into()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = rrstore(tmp.path(), &args, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v = json(&o);
        assert_eq!(v["verdict"], "verified");
        (v["saved_output_form"].clone(), std::fs::read(out).unwrap())
    };
    let (form, bytes) = save(None);
    assert_eq!(form, "recorded");
    assert!(
        bytes == recorded_output,
        "the default form is the recorded output"
    );
    let (form, bytes) = save(Some("relocated"));
    assert_eq!(form, "relocated");
    let in_new = |w: &[u8]| {
        let v = u64::from_le_bytes(w.try_into().unwrap());
        (to..to + size).contains(&v)
    };
    let relocated_words = bytes.chunks_exact(8).filter(|w| in_new(w)).count();
    assert!(
        relocated_words >= 4,
        "{relocated_words} words point into the relocated arena"
    );
    assert_eq!(bytes.len(), recorded_output.len());
}

/// A relocated replay whose kernel crashes still reports the arguments it
/// rebased (issue 44): they were rebased before the launch, whatever the
/// launch did.
#[test]
fn a_relocated_replay_that_crashes_reports_its_rebased_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let d = rrstore_tests::fixtures()
        .join("llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json");
    let j = rrstore_tests::recording_with_kernel(&d, &tmp.path().join("rec"), |kernel| {
        format!("void {kernel}(long a, long b, long c, long d, long e, long f) {{ *(volatile int *)8 = 1; }}\n")
    });
    let args = [
        "replay",
        j.to_str().unwrap(),
        "--placement",
        "relocate",
        "--json",
    ];
    let o = rrstore(tmp.path(), &args, &[]);
    assert_eq!(o.status.code(), Some(12), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["verdict"], "crashed", "{v}");
    assert_eq!(v["placement"]["mode"], "relocated", "{v}");
    let rebased = v["placement"]["rebased_args"].as_u64().unwrap();
    assert!(
        rebased >= 1,
        "the crashed replay reports {rebased} rebased arguments: {v}"
    );
}
