//! `image add` and `--image` on files that carry LLVM offload binaries
//! (issue 41 item 1): a real clang-22 application, its
//! `-fopenmp-target-jit` build, a shared library and an object, each
//! stored as the device images it embeds, and the right one picked for a
//! recording of the same source; IR recognised and refused for replay
//! (exit 9); forged offload binaries refused with their byte offset (exit
//! 4) leaving the store as it was; a file that is neither refused (exit 4).

mod store_common;

use std::path::{Path, PathBuf};

use rrstore_tests::offload::{record_one, recording_runtime, Source};
use store_common::{fails, ok, run};

const TWICE: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 2048;
  float *x = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) x[i] = i * 0.5f;
#pragma omp target teams distribute parallel for map(tofrom : x[0:n])
  for (int i = 0; i < n; i++) x[i] = 2.0f * x[i] - 1.0f;
  printf("x[3]=%.2f\n", x[3]);
  fflush(stdout);
  _Exit(0);
}
"#;

fn fixture(rel: &str) -> PathBuf {
    rrstore_tests::fixtures().join(rel)
}

fn images(store: &Path) -> Vec<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(&ok(store, &["image", "ls", "--json"])).unwrap();
    v.as_array().unwrap().clone()
}

#[test]
fn an_application_gives_its_device_images_and_each_recording_runs_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = Source::new(&d.join("src"), "twice.cpp", TWICE);
    let (app, jit, lib, obj) = (
        d.join("app"),
        d.join("app-jit"),
        d.join("libtwice.so"),
        d.join("twice.o"),
    );
    src.build(&app, &[]);
    src.build(&jit, &["-fopenmp-target-jit"]);
    src.build(&lib, &["-fPIC", "-shared"]);
    src.build(&obj, &["-c"]);
    let (_, found) = record_one(&app, &d.join("rec"), &recording_runtime(d), &[]);
    let rec = found.to_str().unwrap();
    let s = d.join("store");
    ok(&s, &["import", rec, "--label", "aot"]);

    // The executable: one x86-64 device image, not the whole program.
    let out = ok(
        &s,
        &["image", "add", app.to_str().unwrap(), "--label", "aot"],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].contains(" x86_64 "), "{out}");
    let list = images(&s);
    assert_eq!(list.len(), 1);
    let len = list[0]["len"].as_u64().unwrap();
    assert!(len < std::fs::metadata(&app).unwrap().len(), "{len}");
    let source = list[0]["source"].as_str().unwrap();
    assert!(
        source.ends_with("[offload image 0: x86_64-pc-linux-gnu, arch any, elf]"),
        "{source}"
    );
    let replay = |spec: &str| run(&s, &["replay", rec, "--image", spec]);
    let o = replay("aot");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("VERIFIED"));

    // The IR build: stored and labelled as IR; its entry is compiled for
    // the host and runs the ahead-of-time recording of the same source.
    let out = ok(
        &s,
        &["image", "add", jit.to_str().unwrap(), "--label", "jit"],
    );
    assert!(out.contains(" ir:x86_64-pc-linux-gnu "), "{out}");
    let o = run(&s, &["replay", rec, "--image", "jit", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{v}");
    assert_eq!(v["compiled"]["target"], "x86_64", "{v}");
    // ELF and IR of one target under one label: the ELF is run.
    ok(
        &s,
        &["image", "add", app.to_str().unwrap(), "--label", "both"],
    );
    ok(
        &s,
        &["image", "add", jit.to_str().unwrap(), "--label", "both"],
    );
    let o = replay("both");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The file itself as --image: its device image is added and run.
    let o = replay(lib.to_str().unwrap());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("added image"));

    // An object's device image is stored too (a relocatable ELF).
    let out = ok(
        &s,
        &["image", "add", obj.to_str().unwrap(), "--label", "obj"],
    );
    assert!(out.contains(" x86_64 "), "{out}");
    // check --image picks per recording as replay does.
    let o = run(&s, &["check", "--image", "both", "--label", "aot"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // bisect picks per recording too: both lists run the same device image.
    let ls: serde_json::Value = serde_json::from_str(&ok(&s, &["ls", "--json"])).unwrap();
    let id = ls[0]["id"].as_str().unwrap();
    let out = ok(
        &s,
        &["bisect", id, "--images", "both", lib.to_str().unwrap()],
    );
    assert!(
        out.contains("no image in 0..=1 changed the output"),
        "{out}"
    );
    // A label names all the images added under it.
    let n = images(&s).len();
    let out = ok(&s, &["image", "rm", "both", "--json"]);
    let removed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(removed["removed"].as_array().unwrap().len(), 2, "{out}");
    assert_eq!(images(&s).len(), n - 2);
}

#[test]
fn no_entry_for_the_target_ir_only_forged_and_non_images_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("store");
    let rec = fixture("llvm22-host/saxpy");
    ok(&s, &["import", rec.to_str().unwrap()]);
    let id = ok(&s, &["ls", "--json"]);
    let id: serde_json::Value = serde_json::from_str(&id).unwrap();
    let id = id[0]["id"].as_str().unwrap().to_string();
    let packaged = std::fs::read(fixture("offload/packaged.offbin")).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    };

    // GPU images only (the golden vector's sm_90 and gfx90a binaries).
    let gpu = write("gpu.offbin", &packaged[480..]);
    let (code, err) = fails(&s, &["replay", &id, "--image", &gpu]);
    assert_eq!(code, 9, "{err}");
    assert!(
        err.contains("no device image for the recording's target x86_64"),
        "{err}"
    );
    assert!(err.contains("sm_90") && err.contains("gfx90a"), "{err}");
    assert_eq!(images(&s).len(), 2, "both GPU images were stored");

    // IR only for x86-64 (the golden vector's second binary, whose
    // "IR" is a few bytes of text): picked, and refused as bitcode.
    let ir = write("ir.offbin", &packaged[280..480]);
    let (code, err) = fails(&s, &["replay", &id, "--image", &ir]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("IR image cannot be read"), "{err}");

    // Forged: the third binary's size says more than the file holds. The
    // first two are fine, yet nothing is stored.
    let before = images(&s);
    let mut forged = packaged.clone();
    forged[488..496].copy_from_slice(&4096u64.to_le_bytes());
    let forged = write("forged.offbin", &forged);
    let (code, err) = fails(&s, &["image", "add", &forged]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("at byte 488"), "{err}");
    let (code, _) = fails(&s, &["replay", &id, "--image", &forged]);
    assert_eq!(code, 4);
    assert_eq!(images(&s), before);

    // Neither an offload container nor a device image.
    let text = write("notes.txt", b"just some text, not a device image\n");
    let (code, err) = fails(&s, &["image", "add", &text]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("holds no offload image"), "{err}");
    assert_eq!(images(&s), before);
}
