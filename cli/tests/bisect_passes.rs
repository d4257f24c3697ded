//! `bisect --passes` (issue 41, item 4) on a real kernel: a float sum
//! compiled with fast-math flags, whose IR (a `-fopenmp-target-jit` build
//! with clang's own optimizations held back) lets LLVM's passes reorder
//! the reduction. rrstore names the first pass whose run changes the
//! output, in at most ceil(log2(passes)) + 2 compiles; a kernel no pass
//! changes has no culprit. With `--toolchains 19 22`, two real LLVM
//! versions over IR that clang-19 emitted: LLVM 22's SLP vectorizer
//! reorders a twelve-float sum that LLVM 19 leaves in source order; the
//! same sum without fast-math is left alone by both, and the summary says
//! that no toolchain of the list changed it.

mod schema_common;
mod store_common;

use std::path::Path;

use rrstore_tests::offload::{extract_image, record, recording_runtime, Source};

const SUM: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 1 << 16;
  float *x = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) x[i] = 1.0f / (1 + (i % 977)) + (i % 7) * 1e4f;
  float s = 0;
  int k = 3;
#pragma omp target map(to : x[0:n]) map(tofrom : s, k)
  {
    float acc = 0;
    for (int i = 0; i < n; i++) acc += x[i];
    s = acc;
    k = k * 2 + 1;
  }
  printf("sum=%.9g k=%d\n", s, k);
  fflush(stdout);
  _Exit(0);
}
"#;

/// `rrstore --store STORE args...`.
use store_common::run as rrstore;

/// The recording of the ahead-of-time build, imported, and the JIT
/// build's IR; returns the store and the recording's ID prefix.
fn setup(dir: &Path) -> (std::path::PathBuf, String, std::path::PathBuf) {
    let src = Source::new(&dir.join("src"), "sum.cpp", SUM);
    let aot = dir.join("sum");
    let jit = dir.join("sum-jit");
    src.build(&aot, &["-ffast-math"]);
    // The device IR as the front end made it: the passes run in rrstore's
    // compile, where -opt-bisect-limit counts them.
    src.build(
        &jit,
        &[
            "-ffast-math",
            "-Xclang",
            "-disable-llvm-passes",
            "-fopenmp-target-jit",
        ],
    );
    let runtime = recording_runtime(dir);
    let (o, found) = record(&aot, &dir.join("rec"), &runtime, &[]);
    assert!(o.status.success(), "{o:?}");
    let ir = dir.join("sum.bc");
    extract_image(&jit, "x86_64-pc-linux-gnu", &ir);
    let store = dir.join("store");
    let o = rrstore(
        &store,
        &["import", found[0].parent().unwrap().to_str().unwrap()],
    );
    assert!(o.status.success(), "{o:?}");
    let ls = rrstore(&store, &["ls", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
    let id = v[0]["id"].as_str().unwrap()[..12].to_string();
    (store, id, ir)
}

#[test]
fn the_first_pass_that_reorders_a_fast_math_reduction_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (store, id, ir) = setup(dir.path());
    let o = rrstore(
        &store,
        &[
            "bisect",
            &id,
            "--passes",
            "--image",
            ir.to_str().unwrap(),
            "--json",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let all = schema_common::validate("bisect-passes", &String::from_utf8_lossy(&o.stdout));
    let r = &all["recordings"][0];
    let passes = r["passes"].as_u64().unwrap();
    assert!(passes > 50, "{r}");
    let culprit = &r["culprit"];
    let number = culprit["number"].as_u64().unwrap_or_else(|| panic!("{r}"));
    assert!(number >= 1 && number <= passes, "{r}");
    let name = culprit["name"].as_str().unwrap();
    // A pass that can reorder a reassociable reduction.
    assert!(
        [
            "loop-unroll",
            "loop-vectorize",
            "slp-vectorizer",
            "reassociate",
            "instcombine"
        ]
        .iter()
        .any(|p| name.contains(p)),
        "{name}: {r}"
    );
    let bound = 64 - (passes - 1).leading_zeros() as u64 + 2;
    assert!(r["compile_steps"].as_u64().unwrap() <= bound, "{r}");
    // The step below the culprit keeps the reference, the culprit's does not.
    let steps = r["steps"].as_array().unwrap();
    for s in steps {
        let limit = s["limit"].as_u64().unwrap();
        assert_eq!(s["good"].as_bool().unwrap(), limit < number, "{s}");
    }
    // The human form names it too, and a second run compiles nothing.
    let o = rrstore(
        &store,
        &["bisect", &id, "--passes", "--image", ir.to_str().unwrap()],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!("culprit: pass {number} {name}")),
        "{out}"
    );
    assert!(out.contains("0 replay(s)"), "{out}");
}

/// Twelve floats summed in source order: a straight line of additions that
/// LLVM's SLP vectorizer turns into a horizontal reduction. LLVM 19 makes
/// it an 8-wide and a 4-wide reduction, LLVM 22 one 12-wide reduction
/// (non-power-of-two SLP), whose code adds the lanes in another order. On
/// these values (floats near 2^24 are 2 apart) the source order and LLVM
/// 19's give -16777214 (1 + 0.5 - 2^24 rounds up), LLVM 22's -16777215
/// (0.5 - 2^24 rounds to even first, then + 1).
const SUM12: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  float *x = (float *)calloc(12, sizeof(float));
  x[0] = 1.0f;
  x[2] = 0.5f;
  x[7] = -16777216.0f;
  float s = 0;
#pragma omp target map(to : x[0:12]) map(tofrom : s)
  s = x[0] + x[1] + x[2] + x[3] + x[4] + x[5] + x[6] + x[7] + x[8] + x[9] +
      x[10] + x[11];
  printf("sum=%.9g\n", s);
  fflush(stdout);
  _Exit(0);
}
"#;

/// Two real compilers, LLVM 19 and LLVM 22, over IR that clang-19 emitted
/// (LLVM 19 cannot read LLVM 22's bitcode), passes held back so that each
/// toolchain runs its own pipeline. The recording is the application as
/// it was verified: clang-22 without SLP vectorization (Debian's clang-19
/// cannot link an offload application: no clang-offload-packager), which
/// adds in source order, as LLVM 19's pipeline does on these values.
/// rrstore names LLVM 22 as the first toolchain that changes the output,
/// then its slp-vectorizer run on the kernel.
#[test]
fn llvm_22_changes_the_output_of_llvm_19_and_its_slp_vectorizer_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let src = Source::new(&dir.join("src"), "sum12.cpp", SUM12);
    let aot = dir.join("sum12");
    src.build(&aot, &["-ffast-math", "-fno-slp-vectorize"]);
    let ir = dir.join("sum12-19.bc");
    src.device_ir_with(
        "/usr/lib/llvm-19/bin/clang++",
        &["-ffast-math", "-Xclang", "-disable-llvm-passes"],
        &ir,
    );
    let runtime = recording_runtime(dir);
    let (o, found) = record(&aot, &dir.join("rec"), &runtime, &[]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "sum=-16777214\n");
    assert_eq!(found.len(), 1, "{found:?}");
    let store = dir.join("store");
    let o = rrstore(
        &store,
        &["import", found[0].parent().unwrap().to_str().unwrap()],
    );
    assert!(o.status.success(), "{o:?}");
    let args = [
        "bisect",
        "--label",
        "*",
        "--passes",
        "--image",
        ir.to_str().unwrap(),
        "--toolchains",
        "19",
        "22",
    ];
    let o = rrstore(&store, &[&args[..], &["--json"]].concat());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let all = schema_common::validate("bisect-passes", &String::from_utf8_lossy(&o.stdout));
    let r = &all["recordings"][0];
    // Same source file, so the IR's kernel is the recorded one.
    assert_eq!(r["kernel"], found[0].file_stem().unwrap().to_str().unwrap());
    let steps = r["toolchain_steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{r}");
    // LLVM 19 reproduces the recording; LLVM 22 does not.
    assert_eq!(steps[0]["toolchain"], "19");
    assert!(steps[0]["compiler_version"]
        .as_str()
        .unwrap()
        .contains("clang version 19."));
    assert_eq!(steps[0]["good"], true, "{r}");
    assert_eq!(steps[0]["run"]["verdict"], "verified", "{r}");
    assert!(steps[1]["compiler_version"]
        .as_str()
        .unwrap()
        .contains("clang version 22."));
    assert_eq!(steps[1]["good"], false, "{r}");
    assert_eq!(steps[1]["run"]["verdict"], "mismatch", "{r}");
    assert_eq!(r["toolchain"], "22", "{r}");
    // Inside LLVM 22: no optional pass keeps LLVM 19's output, the SLP
    // vectorizer's run on the kernel changes it.
    assert_eq!(r["steps"][0]["limit"], 0, "{r}");
    assert_eq!(r["steps"][0]["good"], true, "{r}");
    let culprit = &r["culprit"];
    let number = culprit["number"].as_u64().unwrap_or_else(|| panic!("{r}"));
    assert!(number >= 1, "{r}");
    assert!(
        culprit["name"].as_str().unwrap().contains("slp-vectorizer"),
        "{r}"
    );
    assert!(
        culprit["on"]
            .as_str()
            .unwrap()
            .contains("__omp_offloading_"),
        "{r}"
    );
    for s in r["steps"].as_array().unwrap() {
        let limit = s["limit"].as_u64().unwrap();
        assert_eq!(s["good"].as_bool().unwrap(), limit < number, "{s}");
    }
    let passes = r["passes"].as_u64().unwrap();
    let bound = 64 - (passes - 1).leading_zeros() as u64 + 2;
    assert!(r["compile_steps"].as_u64().unwrap() <= bound + 2, "{r}");
    // The human form says the same, from the caches.
    let o = rrstore(&store, &args);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("first toolchain that changes the output: 22"),
        "{out}"
    );
    assert!(
        out.contains(&format!("culprit: pass {number} slp-vectorizer")),
        "{out}"
    );

    // The same sum without fast-math: its additions may not be reordered,
    // so LLVM 19 and LLVM 22 both keep the source order and the recorded
    // output. No toolchain changes it and no passes are bisected: the
    // summary names the toolchains tried, not an empty compiler.
    let strict = dir.join("sum12-19-strict.bc");
    src.device_ir_with(
        "/usr/lib/llvm-19/bin/clang++",
        &["-Xclang", "-disable-llvm-passes"],
        &strict,
    );
    let o = rrstore(
        &store,
        &[
            "bisect",
            "--label",
            "*",
            "--passes",
            "--image",
            strict.to_str().unwrap(),
            "--toolchains",
            "19",
            "22",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("no toolchain of the list changed the output"),
        "{out}"
    );
    assert!(
        out.contains(
            "no passes bisected: 2 toolchain(s) tried (19, 22), none changed the output; 2 compile(s)"
        ),
        "{out}"
    );
    assert!(!out.contains("passes by ;"), "{out}");
}
