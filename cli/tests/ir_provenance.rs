//! Provenance of compiled images everywhere (issue 41, item 3): a replay
//! that ran an image compiled from LLVM IR leaves in its history row (the
//! `history` table and `--json`), in `show`, `report` and `check`'s JSON and
//! JUnit which IR, compiler (`--version` line), flags and target made it
//! and whether it came from the cache; and `--toolchain`/`--cflags` on
//! `check` (and `replay`) run a recording's `.bc` part compiled whenever
//! it has one, with no `--from-bitcode`. Real programs, built twice from
//! one source file (ahead of time, recorded; `-fopenmp-target-jit`, for
//! its IR), compiled by the installed LLVM 22.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use rrstore_tests::offload::{recorded_with_ir, Source};

const SCALE: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 2048;
  double *a = (double *)malloc(n * sizeof(double));
  for (int i = 0; i < n; i++) a[i] = i * 0.5;
#pragma omp target teams distribute parallel for map(tofrom : a[0:n])
  for (int i = 0; i < n; i++) a[i] = a[i] * 3.0 + 1.0;
  printf("a[9]=%.2f\n", a[9]);
  fflush(stdout);
  _Exit(0);
}
"#;

/// The recording of the ahead-of-time build and the IR of the JIT build of
/// the same source file, made once per test process.
struct Built {
    _dir: tempfile::TempDir,
    descriptor: PathBuf,
    ir: PathBuf,
}

fn built() -> &'static Built {
    static B: std::sync::OnceLock<Built> = std::sync::OnceLock::new();
    B.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let src = Source::new(&dir.path().join("src"), "scale.cpp", SCALE);
        let (descriptor, ir) = recorded_with_ir(dir.path(), &src, "scale");
        Built {
            descriptor,
            ir,
            _dir: dir,
        }
    })
}

/// `rrstore --store STORE args...`.
use store_common::run as rrstore;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

fn ir_hash() -> String {
    blake3::hash(&std::fs::read(&built().ir).unwrap())
        .to_hex()
        .to_string()
}

/// A copy of the recording with the JIT build's IR as its `.bc` part, the
/// way LLVM 23+ writes one beside the native image.
fn with_bc_part(dir: &Path) -> PathBuf {
    let b = built();
    let copy = rrstore_tests::copy_recording(&b.descriptor, dir);
    let stem = b.descriptor.file_stem().unwrap().to_str().unwrap();
    std::fs::copy(&b.ir, copy.with_file_name(format!("{stem}.bc"))).unwrap();
    copy
}

#[test]
fn history_and_report_name_the_compiled_image_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let b = built();
    // Stored, so that the report covers it.
    let o = rrstore(
        &store,
        &["import", b.descriptor.parent().unwrap().to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ls = json(&rrstore(&store, &["ls", "--json"]));
    let id = ls[0]["id"].as_str().unwrap()[..12].to_string();
    let replay = |extra: &[&str]| {
        let mut args = vec!["replay", &id, "--image", b.ir.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = rrstore(&store, &args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    };
    // A native replay, then the IR compiled with -O3 twice (compiled, then
    // from the cache).
    let o = rrstore(&store, &["replay", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    replay(&["--cflags", "-O3"]);
    replay(&["--cflags", "-O3"]);

    let rows = json(&rrstore(&store, &["history", "--json"]));
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(
        rows[0]["compiled"],
        serde_json::Value::Null,
        "{:?}",
        rows[0]
    );
    for (row, cached) in [(&rows[1], false), (&rows[2], true)] {
        let c = &row["compiled"];
        assert_eq!(c["ir_blake3"], ir_hash().as_str(), "{row}");
        assert_eq!(c["target"], "x86_64", "{row}");
        assert_eq!(c["cached"], cached, "{row}");
        assert!(
            c["compiler_version"]
                .as_str()
                .is_some_and(|v| v.contains("clang version 22")),
            "{row}"
        );
        assert!(
            c["compiler"]
                .as_str()
                .is_some_and(|p| p.contains("llvm-22")),
            "{row}"
        );
        assert!(
            c["flags"].as_array().unwrap().contains(&"-O3".into()),
            "{row}"
        );
    }
    // The table says it on a line under the row.
    let t = text(&rrstore(&store, &["history"]));
    let lines: Vec<&str> = t.lines().filter(|l| l.contains("compiled IR ")).collect();
    assert_eq!(lines.len(), 2, "{t}");
    assert!(
        lines[0].contains(&ir_hash()[..12])
            && lines[0].contains("for x86_64")
            && lines[0].contains("clang version 22")
            && lines[0].contains("-O3")
            && lines[1].ends_with("cached"),
        "{t}"
    );

    // `show` lists the compiled images the recording's replays ran.
    let v = json(&rrstore(&store, &["show", &id, "--json"]));
    let images = v["store"]["compiled_images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "{v}");
    assert_eq!(images[0]["ir_blake3"], ir_hash().as_str(), "{v}");
    assert_eq!(images[0]["image"], rows[1]["image_hash"], "{v}");
    assert_eq!(images[0]["replays"], 2, "{v}");
    let t = text(&rrstore(&store, &["show", &id]));
    assert!(
        t.lines()
            .any(|l| l.contains("compiled image") && l.contains("clang version 22")),
        "{t}"
    );

    // The HTML report lists the compiled image with its provenance.
    let html = dir.path().join("report.html");
    let o = rrstore(&store, &["report", "-o", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    let section = page
        .split("<section id=\"compiled-images\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no compiled-images section: {page}"));
    let section = section.split("</section>").next().unwrap();
    assert!(
        section.contains(&ir_hash()[..12])
            && section.contains("clang version 22")
            && section.contains("-O3")
            && section.contains("x86_64"),
        "{section}"
    );
}

#[test]
fn check_with_a_toolchain_compiles_a_bc_part_without_from_bitcode() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let rec = with_bc_part(&dir.path().join("with-bc"));
    let o = rrstore(&store, &["import", rec.parent().unwrap().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // Without a compiler named: the native image, nothing compiled (also
    // the row a later `--use-cache` must not take for a compiled run).
    let o = rrstore(&store, &["check", "--json", "--use-cache"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(
        v["rows"][0]["run"]["compiled"],
        serde_json::Value::Null,
        "{v}"
    );

    // --toolchain: the `.bc` part, compiled by it, verified.
    let junit = dir.path().join("check.xml");
    let o = rrstore(
        &store,
        &[
            "check",
            "--toolchain",
            "clang-22",
            "--use-cache",
            "--json",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    let run = &v["rows"][0]["run"];
    assert_eq!(run["verdict"], "verified", "{v}");
    assert_eq!(run["cached"], false, "{v}");
    assert_eq!(run["compiled"]["ir_blake3"], ir_hash().as_str(), "{v}");
    assert!(
        run["compiled"]["compiler_version"]
            .as_str()
            .is_some_and(|c| c.contains("clang version 22")),
        "{v}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(&format!(
            "name=\"compiled_from_ir\" value=\"{}\"",
            ir_hash()
        )) && xml.contains("clang version 22"),
        "{xml}"
    );

    // --cflags alone selects it too, and so does `replay`.
    let o = rrstore(&store, &["check", "--cflags", "-O1", "--json"]);
    let v = json(&o);
    assert!(
        v["rows"][0]["run"]["compiled"]["flags"]
            .as_array()
            .is_some_and(|f| f.contains(&"-O1".into())),
        "{v}"
    );
    let id = v["rows"][0]["recording"].as_str().unwrap().to_string();
    let o = rrstore(
        &store,
        &["replay", &id[..12], "--toolchain", "clang-22", "--json"],
    );
    let v = json(&o);
    assert_eq!(v["verdict"], "verified", "{v}");
    assert_eq!(v["compiled"]["ir_blake3"], ir_hash().as_str(), "{v}");
}

/// `tune`'s compile variants (`--variant-cflags`, `--toolchains`) name
/// flags or a compiler, so they run a recording's `.bc` part compiled, as
/// `--cflags`/`--toolchain` do on `check` and `replay`: no
/// `--from-bitcode`, no `--image`. The baseline stays the recorded
/// native image.
#[test]
fn tune_compile_variants_compile_a_bc_part_without_from_bitcode() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let rec = with_bc_part(&dir.path().join("with-bc"));
    let o = rrstore(&store, &["import", rec.parent().unwrap().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = rrstore(&store, &["ls", "--json"]);
    let id = json(&o)[0]["id"].as_str().unwrap()[..12].to_string();
    let junit = dir.path().join("tune.xml");
    let o = rrstore(
        &store,
        &[
            "tune",
            &id,
            "--variant-cflags=-O1",
            "--toolchains",
            "clang-22",
            "--repetitions",
            "2",
            "--json",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    let r = &v["recordings"][0];
    assert_eq!(r["variants"][0]["compile"], "clang-22 -O1", "{r}");
    // Its JUnit case names the best variant's compiled provenance.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(&format!(
            "name=\"best_compiled_from_ir\" value=\"{}\"",
            ir_hash()
        )) && xml.contains("name=\"best\" value=\"[clang-22 -O1]\""),
        "{xml}"
    );
    // Every variant ran the `.bc` part compiled with its flags, and
    // verified; the baseline is the recorded native image.
    let trials = r["trials"].as_array().unwrap();
    assert!(!trials.is_empty(), "{r}");
    for t in trials {
        assert_eq!(t["verified"], true, "{t}");
        let c = &t["run"]["compiled"];
        assert_eq!(c["ir_blake3"], ir_hash().as_str(), "{t}");
        assert!(
            c["flags"]
                .as_array()
                .is_some_and(|f| f.contains(&"-O1".into())),
            "{t}"
        );
    }
    assert_eq!(
        r["baseline"]["run"]["compiled"],
        serde_json::Value::Null,
        "{r}"
    );
    assert_eq!(r["best"]["variant"], 0, "{r}");

    // Flags the compiler rejects: no variant could run, exit 1, and the
    // JUnit case is an error (nothing ran), not a failure.
    let o = rrstore(
        &store,
        &[
            "tune",
            &id,
            "--variant-cflags",
            "-mllvm -no-such-option",
            "--repetitions",
            "1",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("errors=\"1\"")
            && xml.contains(
                "<error message=\"NO VARIANT VERIFIED: 1 variant(s) tried, none verified (error)"
            ),
        "{xml}"
    );
}
