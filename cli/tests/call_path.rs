//! The host call path (issue 44, item 2), on a real program compiled and
//! recorded here (`rrstore_tests::offload`) and replayed by the real
//! binary: a kernel that copies a stack array out before writing it finds
//! zeros in every replay (the runner clears the stack under the kernel, as
//! a program's rarely used stack under LLVM's host plugin mostly is), never
//! the runner's own data: its heap and stack addresses, which moved with
//! every runner process, and the names of its environment variables.

mod store_common;

use std::path::Path;

use rrstore_tests::offload::{record_one, recording_runtime, Source};

/// `out[0..96]`: a stack array read before anything wrote it; `out[100]`
/// a value the kernel computes. A plain `target` region: the kernel calls
/// no libomp, so what it reads was on the stack before the call.
const STACK_READER: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 128;
  long *out = (long *)calloc(n, sizeof(long));
#pragma omp target map(tofrom : out[0:n])
  {
    long local[96];
    __asm__ volatile("" : : "r"(local) : "memory");
    for (int i = 0; i < 96; i++) out[i] = local[i];
    out[100] = 7;
  }
  printf("out[100]=%ld\n", out[100]);
  fflush(stdout);
  _Exit(0);
}
"#;

fn words(path: &Path) -> Vec<u64> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn a_kernel_reading_its_stack_first_finds_zeros_in_every_replay() {
    let dir = tempfile::tempdir().unwrap();
    let src = Source::new(&dir.path().join("src"), "stack.cpp", STACK_READER);
    let app = dir.path().join("app");
    src.build(&app, &[]);
    let rec = dir.path().join("rec");
    let runtime = recording_runtime(dir.path());
    record_one(&app, &rec, &runtime, &[("OMP_NUM_THREADS", "2")]);
    let store = dir.path().join("store");
    for run in 0..2 {
        let saved = dir.path().join(format!("out{run}"));
        let o = store_common::command()
            .arg("--store")
            .arg(&store)
            .args(["replay", "--confirm", "0", "--save-output"])
            .arg(&saved)
            .arg(&rec)
            .env("OMP_NUM_THREADS", "2")
            .output()
            .unwrap();
        // The recording's own stack held libomptarget's data there: the
        // verdict is a mismatch; what matters is what the replay read.
        let w = words(&saved);
        assert_eq!(w[100], 7, "{o:?}");
        let dirty: Vec<(usize, u64)> = w[..96]
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, v)| v != 0)
            .collect();
        assert!(
            dirty.is_empty(),
            "replay {run}: the kernel read the runner's data below it: {dirty:x?}"
        );
    }
}
