//! `bisect --passes` (issue 41, item 4) on a real kernel: a float sum
//! compiled with fast-math flags, whose IR (a `-fopenmp-target-jit` build
//! with clang's own optimizations held back) lets LLVM's passes reorder
//! the reduction. rrstore names the first pass whose run changes the
//! output, in at most ceil(log2(passes)) + 2 compiles; a kernel no pass
//! changes has no culprit.

mod store_common;

use std::path::Path;
use std::process::Output;

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

fn rrstore(store: &Path, args: &[&str]) -> Output {
    store_common::command()
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap()
}

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
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
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

/// A "nightly compiler" that changes the output: the same clang-22 is the
/// older toolchain with vectorization and unrolling off (what an older
/// compiler did not do), the newer as it is. rrstore names the newer one,
/// then the pass inside it, against the older one's output.
#[test]
fn the_first_toolchain_that_changes_the_output_then_its_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (store, id, ir) = setup(dir.path());
    let old = dir.path().join("old-clang");
    rrstore_tests::write_script(
        &old,
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'clang version 22.0.0 (older)'; exit 0; fi\n\
         exec /usr/lib/llvm-22/bin/clang \"$@\" -fno-vectorize -fno-slp-vectorize -fno-unroll-loops\n",
    );
    let o = rrstore(
        &store,
        &[
            "bisect",
            "--label",
            "*",
            "--passes",
            "--image",
            ir.to_str().unwrap(),
            "--toolchains",
            old.to_str().unwrap(),
            "22",
            "--json",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let all: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &all["recordings"][0];
    assert_eq!(
        r["recording"].as_str().unwrap().get(..12),
        Some(id.as_str())
    );
    let steps = r["toolchain_steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{r}");
    assert_eq!(steps[0]["good"], true);
    assert_eq!(steps[1]["good"], false);
    assert_eq!(r["toolchain"], "22", "{r}");
    // Its passes against the older toolchain's output: limit 0 keeps it
    // (no optional pass reorders anything), a later pass does not.
    let culprit = &r["culprit"];
    assert!(culprit["number"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["steps"][0]["good"].as_bool().unwrap(), "{r}");
}
