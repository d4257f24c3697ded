//! The host call path (issue 44, item 2), on a real program compiled and
//! recorded here (`rrstore_tests::offload`) and replayed by the real
//! binary: a kernel that copies a stack array out before writing it finds
//! zeros in every replay (the runner clears the stack under the kernel, as
//! a program's rarely used stack under LLVM's host plugin mostly is), never
//! the runner's own data: its heap and stack addresses, which moved with
//! every runner process, and the names of its environment variables.

mod store_common;

use std::path::Path;
use std::process::Output;

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

/// `out[0..192]`: a team-local array that the team's threads fill with a
/// GPU stride (only `local[t]`, `local[t + 128]` of 192), copied out whole:
/// 188 words are whatever lay on the stack where libomp's teams fork put
/// the outlined function's frame.
const TEAM_LOCAL_READER: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <omp.h>
int main() {
  const int n = 256;
  long *out = (long *)calloc(n, sizeof(long));
#pragma omp target teams num_teams(1) thread_limit(256) map(tofrom : out[0:n])
  {
    long local[192];
#pragma omp parallel
    { for (int t = omp_get_thread_num(); t < 192; t += 128) local[t] = t + 1000; }
    for (int i = 0; i < 192; i++) out[i] = local[i];
  }
  printf("out[0]=%ld\n", out[0]);
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

/// Build `code`, record it at 2 threads and replay the recording twice
/// (`--confirm 0`, each in a fresh runner); each replay's output words
/// and the command's output.
fn two_replays(name: &str, code: &str) -> Vec<(Vec<u64>, Output)> {
    let dir = tempfile::tempdir().unwrap();
    let src = Source::new(&dir.path().join("src"), name, code);
    let app = dir.path().join("app");
    src.build(&app, &[]);
    let rec = dir.path().join("rec");
    let runtime = recording_runtime(dir.path());
    record_one(&app, &rec, &runtime, &[("OMP_NUM_THREADS", "2")]);
    let store = dir.path().join("store");
    (0..2)
        .map(|run| {
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
            (words(&saved), o)
        })
        .collect()
}

#[test]
fn a_kernel_reading_its_stack_first_finds_zeros_in_every_replay() {
    for (run, (w, o)) in two_replays("stack.cpp", STACK_READER).iter().enumerate() {
        // The recording's own stack held libomptarget's data there: the
        // verdict is a mismatch; what matters is what the replay read.
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

/// libomp's first fork (its middle initialisation: topology, affinity
/// masks, sorting; the hot team's workers) ran inside the kernel's own
/// teams fork, right where the outlined function's team-local array then
/// lay: ~140 of its 188 unwritten words held that work's pointers and
/// counts in every replay, where the recording (and LLVM's tool) found
/// zeros. The runner now runs libomp's first fork before the launch.
#[test]
fn a_team_local_array_is_not_filled_with_libomps_first_fork() {
    for (run, (w, o)) in two_replays("local.cpp", TEAM_LOCAL_READER)
        .iter()
        .enumerate()
    {
        assert_eq!(
            (w[0], w[1], w[128], w[129]),
            (1000, 1001, 1128, 1129),
            "{o:?}"
        );
        let dirty = w[..192]
            .iter()
            .enumerate()
            .filter(|&(i, &v)| v != 0 && ![0, 1, 128, 129].contains(&i))
            .count();
        // Measured: ~140 before, 3-9 after (the recording itself: 6).
        assert!(
            dirty < 48,
            "replay {run}: {dirty} of 188 unwritten words held data under the kernel: {:x?}",
            &w[..192]
        );
    }
}
