//! A recording with a stored launch environment replays in the spare
//! runner (`prestart`, started before the recording was known) under that
//! environment: a real offload program whose kernel writes
//! `omp_get_num_threads()` of a parallel region into its output, recorded
//! with `OMP_NUM_THREADS=2`, replayed from this process whose own
//! `OMP_NUM_THREADS` is 1. The spare is taken (not left waiting while a
//! runner of its own starts), and the output holds 2; the same recording
//! stored with `OMP_NUM_THREADS=1` mismatches in the spare, so the setting
//! is what the replay applied.
//!
//! The spare and the environment are process-wide, so this file runs
//! without libtest (`harness = false`).

mod common;

use rrstore_replay::backend::host::spare_waiting;
use rrstore_replay::backend::BackendKind;
use rrstore_replay::{replay, ReplaySource, Verdict};
use rrstore_tests::offload::{record_one, recording_runtime, Source};

const THREADS: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <omp.h>
int main() {
  int n[1] = {0};
#pragma omp target map(tofrom : n[0:1])
  {
#pragma omp parallel
    if (omp_get_thread_num() == 0) n[0] = omp_get_num_threads();
  }
  printf("threads=%d\n", n[0]);
  fflush(stdout);
  _Exit(0);
}
"#;

fn main() {
    // This process' (and so a runner's ambient) thread count: not the
    // recorded one. Set while this process runs one thread.
    std::env::set_var("OMP_NUM_THREADS", "1");
    let dir = tempfile::tempdir().unwrap();
    let src = Source::new(&dir.path().join("src"), "threads.cpp", THREADS);
    let app = dir.path().join("threads");
    src.build(&app, &[]);
    let runtime = recording_runtime(dir.path());
    let (o, descriptor) = record_one(
        &app,
        &dir.path().join("rec"),
        &runtime,
        &[("OMP_NUM_THREADS", "2")],
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("threads=2"),
        "{o:?}"
    );

    let replay_with = |threads: &str| {
        let mut opts = common::options();
        // No thread count of the caller's over the recorded one.
        opts.backends.host.env.clear();
        let mut src = ReplaySource::llvm(&descriptor).unwrap();
        src.recording.environment = Some(vec![("OMP_NUM_THREADS".into(), threads.into())]);
        opts.backends.start_early(BackendKind::Host, &opts.launch());
        assert!(spare_waiting(), "no spare was started");
        let r = replay(&mut src, &opts);
        // The replay took the spare rather than starting its own runner.
        assert!(!spare_waiting(), "the spare was left unused");
        r
    };
    let r = replay_with("2");
    assert_eq!(r.verdict, Verdict::Verified, "{:?}", r.error);
    assert_eq!(
        r.recorded_environment,
        [("OMP_NUM_THREADS".to_string(), "2".to_string())]
    );
    let r = replay_with("1");
    assert_eq!(r.verdict, Verdict::Mismatch, "{:?}", r.error);
    println!("spare_environment: all checks passed");
}
