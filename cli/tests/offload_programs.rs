//! Real OpenMP offload programs, built here with clang-22 and recorded with
//! LLVM 22's runtime (`rrstore_tests::offload`), replay through rrstore:
//! the harness the tests of real programs' verdicts build on, tested once
//! on its own so that a broken toolchain reads as that, not as a verdict.

mod store_common;

use rrstore_tests::offload::{record_one, recording_runtime, Source};

const SCALE: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 4096;
  float *x = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) x[i] = i * 0.25f;
#pragma omp target teams distribute parallel for map(tofrom : x[0:n])
  for (int i = 0; i < n; i++) x[i] = 3.0f * x[i] + 1.0f;
  printf("x[7]=%.2f\n", x[7]);
  fflush(stdout);
  _Exit(0);
}
"#;

#[test]
fn a_program_built_and_recorded_here_replays_verified() {
    let dir = tempfile::tempdir().unwrap();
    let src = Source::new(&dir.path().join("src"), "scale.cpp", SCALE);
    let app = dir.path().join("scale");
    src.build(&app, &[]);
    let runtime = recording_runtime(dir.path());
    let (o, found) = record_one(&app, &dir.path().join("rec"), &runtime, &[]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "x[7]=6.25\n");
    let o = store_common::command()
        .arg("--store")
        .arg(dir.path().join("store"))
        .args(["replay", found.to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("VERIFIED"), "{out}");
}
