//! Issue 44 item 4: the launch environment is part of a recording made by
//! `rrstore record`. A real float reduction, whose sum differs at 1 and 2
//! host threads, recorded with `OMP_NUM_THREADS=2`: a replay under another
//! ambient `OMP_NUM_THREADS` applies the recorded one and verifies; an
//! explicit `--num-threads` still overrides it (and the history says so).

mod store_common;

use std::path::Path;

use rrstore_tests::offload::{record_env, recording_runtime, Source, LLVM};
use store_common::{command, expect_ok};

const SUM: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 1 << 20;
  float *x = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) x[i] = 1.0f / (float)(i % 1000 + 1) + (float)(i % 7) * 1e-3f;
  float s = 0.0f;
#pragma omp target teams distribute parallel for reduction(+ : s) map(to : x[0:n]) map(tofrom : s)
  for (int i = 0; i < n; i++) s += x[i];
  printf("s=%.9g\n", s);
  fflush(stdout);
  _Exit(0);
}
"#;

fn rr(store: &Path, threads: &str, args: &[&str]) -> std::process::Output {
    command()
        .arg("--store")
        .arg(store)
        .args(args)
        .env("OMP_NUM_THREADS", threads)
        .output()
        .unwrap()
}

fn json(o: std::process::Output, what: &str) -> serde_json::Value {
    serde_json::from_str(&expect_ok(o, &[what])).unwrap()
}

#[test]
fn a_recording_replays_under_the_omp_settings_it_was_recorded_with() {
    let dir = tempfile::tempdir().unwrap();
    let src = Source::new(&dir.path().join("src"), "sum.cpp", SUM);
    let app = dir.path().join("sum");
    src.build(&app, &[]);
    let runtime = recording_runtime(dir.path());
    let lib = format!("{}:{LLVM}/lib", runtime.display());
    // The sum depends on the thread count (or the test proves nothing).
    let sum = |threads: &str| {
        let o = std::process::Command::new(&app)
            .env("LD_LIBRARY_PATH", &lib)
            .env("OMP_NUM_THREADS", threads)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert_ne!(sum("1"), sum("2"));
    assert!(record_env(&runtime)
        .iter()
        .any(|(k, _)| k == "LD_LIBRARY_PATH"));

    let store = dir.path().join("store");
    let o = command()
        .arg("--store")
        .arg(&store)
        .args(["record", "--json", "--"])
        .arg(&app)
        .env("LD_LIBRARY_PATH", &lib)
        .env("OMP_NUM_THREADS", "2")
        .env("OMP_DISPLAY_ENV", "false")
        .output()
        .unwrap();
    let rec = json(o, "record");
    let id = rec["recordings"][0]["id"].as_str().unwrap().to_string();
    let id = &id[..12];

    // Stored with the recording (only the launch settings).
    let shown = json(rr(&store, "2", &["show", id, "--json"]), "show");
    assert_eq!(
        shown["environment"],
        serde_json::json!([["OMP_NUM_THREADS", "2"]])
    );

    // Another ambient thread count: the recorded one is applied.
    let o = rr(&store, "1", &["replay", id]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("VERIFIED"), "{out}");
    assert!(out.contains("environment OMP_NUM_THREADS=2"), "{out}");

    // An explicit override still applies: one thread, another sum.
    let o = rr(&store, "2", &["replay", id, "--num-threads", "1"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("MISMATCH"), "{out}");

    // The history: the ambient variable the recording set is no override;
    // the explicit one is.
    let h = json(rr(&store, "1", &["history", "--json"]), "history");
    let rows = h.as_array().unwrap();
    let overrides: Vec<&str> = rows
        .iter()
        .map(|r| r["launch_overrides"].as_str().unwrap())
        .collect();
    assert_eq!(overrides.len(), 2, "{h}");
    assert!(overrides.contains(&""), "{h}");
    assert!(overrides.contains(&"num_threads=1"), "{h}");
}
