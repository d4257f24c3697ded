//! The `--json` outputs of replays that ran an image compiled from LLVM IR,
//! checked against their schemas in `docs/json/` (json_schema.rs checks
//! them on native replays only, where every `compiled` is null): `replay`'s
//! compiled provenance, the `compiled` of `history` rows, of `check`'s and
//! `tune`'s runs, of `diff`'s history rows, `show`'s compiled images and
//! `image ls`'s compiled entries. A real program built ahead of time and recorded, with the
//! device IR of the same source file (clang-22) as its `.bc` part, the way
//! LLVM 23+ writes one.

mod schema_common;
mod store_common;

use std::path::Path;

use rrstore_tests::offload::{record_one, recording_runtime, Source, LLVM};
use schema_common::validate;
use serde_json::Value;

const SCALE: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 1024;
  double *a = (double *)malloc(n * sizeof(double));
  for (int i = 0; i < n; i++) a[i] = i * 0.25;
  #pragma omp target teams distribute parallel for map(tofrom : a[0:n])
  for (int i = 0; i < n; i++) a[i] = a[i] * 2.0 + 3.0;
  printf("a[5]=%.2f\n", a[5]);
  fflush(stdout);
  _Exit(0);
}
"#;

/// `rrstore --store STORE args` must succeed; its stdout checked against
/// schema `name`.
fn json_of(store: &Path, name: &str, args: &[&str]) -> Value {
    let o = store_common::command()
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap();
    validate(name, &store_common::expect_ok(o, args))
}

/// `v` is a compiled provenance of the IR whose blake3 is `ir`.
fn compiled_from(v: &Value, ir: &str) -> bool {
    v.is_object() && v["ir_blake3"] == ir
}

#[test]
fn compiled_replays_match_their_schemas() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let src = Source::new(&dir.join("src"), "scale.cpp", SCALE);
    let app = dir.join("scale");
    src.build(&app, &[]);
    let runtime = recording_runtime(dir);
    let (_, descriptor) = record_one(&app, &dir.join("rec"), &runtime, &[]);
    let stem = descriptor.file_stem().unwrap().to_str().unwrap();
    let bc = descriptor.with_file_name(format!("{stem}.bc"));
    src.device_ir(&format!("{LLVM}/bin/clang++"), &bc);
    let ir = blake3::hash(&std::fs::read(&bc).unwrap())
        .to_hex()
        .to_string();
    let s = dir.join("store");
    let rec = descriptor.parent().unwrap().to_str().unwrap();
    let imported = json_of(&s, "import", &["import", rec, "--json"]);
    let id = imported["recordings"][0]["id"].as_str().unwrap()[..12].to_string();

    // `replay`: compiled now, then from the cache of compiled images.
    for cached in [false, true] {
        let r = json_of(
            &s,
            "replay",
            &["replay", &id, "--toolchain", "clang-22", "--json"],
        );
        assert_eq!(r["verdict"], "verified", "{r}");
        assert!(compiled_from(&r["compiled"], &ir), "{r}");
        assert_eq!(r["compiled"]["cached"], cached, "{r}");
    }

    // `check`: the native baseline, then the `.bc` part compiled.
    json_of(&s, "check", &["check", "--json"]);
    let c = json_of(
        &s,
        "check",
        &[
            "check",
            "--toolchain",
            "clang-22",
            "--cflags",
            "-O1",
            "--json",
        ],
    );
    assert!(compiled_from(&c["rows"][0]["run"]["compiled"], &ir), "{c}");

    // `tune`: compile variants of the `.bc` part; the baseline is native.
    let tuned = json_of(
        &s,
        "tune",
        &[
            "tune",
            &id,
            "--variant-cflags=-O1",
            "--variant-cflags=-O3",
            "--repetitions",
            "2",
            "--json",
        ],
    );
    let r = &tuned["recordings"][0];
    assert!(r["baseline"]["run"]["compiled"].is_null(), "{r}");
    let trials = r["trials"].as_array().unwrap();
    assert!(!trials.is_empty(), "{r}");
    for tr in trials {
        assert!(compiled_from(&tr["run"]["compiled"], &ir), "{tr}");
    }

    // The history rows, all and the recording's; `show`; `image ls`.
    let mut compiled_rows = 0;
    for args in [&["history", "--json"][..], &["history", &id, "--json"][..]] {
        let rows = json_of(&s, "history", args);
        compiled_rows = rows
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| compiled_from(&row["compiled"], &ir))
            .count();
        assert!(compiled_rows >= 2 + 1 + trials.len(), "{rows}");
    }
    // `diff` of two history rows: the replays with and without --toolchain
    // (rows 1 and 3) name their compiled provenance.
    let d = json_of(&s, "diff", &["diff", "h:1", "h:3", "--json"]);
    let rows = [&d["a"], &d["b"]];
    assert!(
        rows.iter()
            .any(|r| compiled_from(&r["history"]["compiled"], &ir)),
        "{d}"
    );
    let shown = json_of(&s, "show", &["show", &id, "--json"]);
    let images = shown["store"]["compiled_images"].as_array().unwrap();
    // (This kernel's IR compiles to the same bytes at -O1, -O2 and -O3:
    // one image, whose entry counts every compiled replay.)
    assert!(!images.is_empty(), "{shown}");
    assert!(
        images.iter().all(|i| i["ir_blake3"] == ir.as_str()),
        "{shown}"
    );
    // Every compiled replay's row: at least the two replays, the check
    // and the trials; one more when the check confirmed a slowdown with a
    // second replay of the same compiled image (a busy machine).
    let replays: u64 = images.iter().filter_map(|i| i["replays"].as_u64()).sum();
    assert_eq!(replays as usize, compiled_rows, "{shown}");
    let ls = json_of(&s, "image-ls", &["image", "ls", "--json"]);
    assert!(
        ls.as_array()
            .unwrap()
            .iter()
            .any(|i| i["label"].as_str().unwrap().starts_with("compiled IR")),
        "{ls}"
    );
}
