//! Issue 41 item 5, `rrstore tune`: real offload programs recorded with one
//! host thread (`OMP_NUM_THREADS=1`, kept with the recording by `rrstore
//! record`) and tuned over `--threads 1,2`.
//!
//! * An integer kernel whose output does not depend on the thread count:
//!   both variants verify, and two threads, which halve its work, are
//!   chosen, faster than the recorded launch.
//! * A float reduction whose sum differs at one and two threads: the
//!   two-thread variant runs (faster or not) but does not verify, so it is
//!   never the answer; one thread is.
//! * Compile variants of the IR of a JIT build: one whose flags the
//!   compiler rejects is dropped; compile variants of a native image are
//!   refused.

mod store_common;

use std::path::Path;
use std::sync::Mutex;

use rrstore_tests::offload::{extract_image, recording_runtime, Source, LLVM};
use store_common::{command, expect_ok};

/// Integer work whose output does not depend on the thread count. Its
/// cost does, by construction: each iteration spins `1500 /
/// omp_get_num_threads()` rounds (kept by an empty `asm`), so two threads
/// do half the work and are faster even when this shared machine's other
/// core is busy; about 50 ms per launch at one thread.
const HASH: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <omp.h>
int main() {
  const int n = 1 << 15;
  unsigned *y = (unsigned *)malloc(n * sizeof(unsigned));
  for (int i = 0; i < n; i++) y[i] = i;
#pragma omp target teams distribute parallel for map(tofrom : y[0:n])
  for (int i = 0; i < n; i++) {
    int spin = 1500 / omp_get_num_threads();
    unsigned h = y[i];
    for (int k = 0; k < spin; k++) h = (h * 1664525u + 1013904223u) ^ (h >> 13);
    __asm__ volatile("" : : "r"(h));
    y[i] = y[i] * 2654435761u;
  }
  printf("y[7]=%u\n", y[7]);
  fflush(stdout);
  _Exit(0);
}
"#;

/// A float sum whose value depends on the number of threads, and, like
/// [`HASH`], whose cost halves with two threads: the two-thread variant is
/// the faster one, and still must not be chosen.
const SUM: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <omp.h>
int main() {
  const int n = 1 << 20;
  float *x = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) x[i] = 1.0f / (float)(i % 1000 + 1) + (float)(i % 7) * 1e-3f;
  float s = 0.0f;
#pragma omp target teams distribute parallel for reduction(+ : s) map(to : x[0:n]) map(tofrom : s)
  for (int i = 0; i < n; i++) {
    int spin = 64 / omp_get_num_threads();
    unsigned h = i;
    for (int k = 0; k < spin; k++) h = (h * 1664525u + 1013904223u) ^ (h >> 13);
    __asm__ volatile("" : : "r"(h));
    s += x[i];
  }
  printf("s=%.9g\n", s);
  fflush(stdout);
  _Exit(0);
}
"#;

/// The tests time kernels: one at a time on this machine's few cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// Build `code`, record it with one thread into a new store; returns the
/// store and the recording ID. `ir`: also extract `dir/NAME.bc`.
fn recorded(dir: &Path, name: &str, code: &str, ir: bool) -> (std::path::PathBuf, String) {
    let src = Source::new(&dir.join("src"), &format!("{name}.cpp"), code);
    let app = dir.join(name);
    src.build(&app, &[]);
    if ir {
        // The device IR of a JIT build of the same file (same kernel name).
        let jit = dir.join(format!("{name}-jit"));
        src.build(&jit, &["-fopenmp-target-jit"]);
        extract_image(&jit, "x86_64-pc-linux-gnu", &dir.join(format!("{name}.bc")));
    }
    let runtime = recording_runtime(dir);
    let store = dir.join("store");
    let o = command()
        .arg("--store")
        .arg(&store)
        .args(["record", "--json", "--"])
        .arg(&app)
        .env(
            "LD_LIBRARY_PATH",
            format!("{}:{LLVM}/lib", runtime.display()),
        )
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    let rec: serde_json::Value = serde_json::from_str(&expect_ok(o, &["record"])).unwrap();
    let id = rec["recordings"][0]["id"].as_str().unwrap().to_string();
    (store, id)
}

fn tune(store: &Path, args: &[&str]) -> (i32, serde_json::Value, String) {
    let o = command()
        .arg("--store")
        .arg(store)
        .arg("tune")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let v = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{err}", String::from_utf8_lossy(&o.stdout)));
    (o.status.code().unwrap_or(-1), v, err)
}

/// The variant index whose thread count is `n`.
fn with_threads(r: &serde_json::Value, n: u64) -> u64 {
    r["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["threads"] == n)
        .unwrap_or_else(|| panic!("no threads={n} variant: {r}"))["index"]
        .as_u64()
        .unwrap()
}

#[test]
fn tune_finds_two_threads_faster_and_verified() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (store, id) = recorded(dir.path(), "hash", HASH, false);
    let (code, v, err) = tune(
        &store,
        &[&id[..12], "--threads", "1,2", "--repetitions", "8"],
    );
    assert_eq!(code, 0, "{v}{err}");
    let r = &v["recordings"][0];
    let two = with_threads(r, 2);
    // Both counts compute the same bytes: every replay verifies.
    for t in r["trials"].as_array().unwrap() {
        assert_eq!(t["verified"], true, "{t}");
    }
    let best = &r["best"];
    assert_eq!(best["variant"], two, "{r}");
    let speedup = best["speedup"].as_f64().unwrap();
    eprintln!("two threads: {speedup:.2}x the recorded launch");
    assert!(speedup > 1.2, "{r}");
    // Within half the grid's launches (2 variants x 8).
    assert!(r["launches"].as_u64().unwrap() <= 8, "{r}");
    // Every replay, the baseline's too, is a history row.
    let h = command()
        .arg("--store")
        .arg(&store)
        .args(["history", "--json"])
        .output()
        .unwrap();
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    assert_eq!(
        h.as_array().unwrap().len() as u64,
        r["replays"].as_u64().unwrap(),
        "{h}"
    );
    assert!(h
        .as_array()
        .unwrap()
        .iter()
        .any(|row| row["launch_overrides"] == "num_threads=2"));
}

#[test]
fn a_variant_that_changes_the_output_is_never_chosen() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (store, id) = recorded(dir.path(), "sum", SUM, false);
    for search in [&[][..], &["--full-grid"][..]] {
        let mut args = vec![&id[..12], "--threads", "1-2", "--repetitions", "4"];
        args.extend_from_slice(search);
        let (code, v, err) = tune(&store, &args);
        assert_eq!(code, 0, "{v}{err}");
        let r = &v["recordings"][0];
        let (one, two) = (with_threads(r, 1), with_threads(r, 2));
        let trials = r["trials"].as_array().unwrap();
        // The two-thread variant ran, and its sum differs.
        let t2: Vec<_> = trials.iter().filter(|t| t["variant"] == two).collect();
        assert!(!t2.is_empty(), "{r}");
        assert!(t2.iter().all(|t| t["verified"] == false), "{r}");
        assert_eq!(t2[0]["run"]["verdict"], "mismatch", "{r}");
        assert_eq!(r["best"]["variant"], one, "{r}");
    }
    // The report charts the configurations from the history rows; the
    // two-thread one is marked as never chosen.
    let html = dir.path().join("r.html");
    let o = command()
        .arg("--store")
        .arg(&store)
        .args(["report", "-o"])
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let page = std::fs::read_to_string(&html).unwrap();
    let tuning = &page[page.find("id=\"tuning\"").expect("no tuning section")..];
    assert!(tuning.contains("num_threads=2"), "{tuning}");
    assert!(tuning.contains("mismatch (never chosen)"), "{tuning}");
    assert!(tuning.contains("fastest verified: 1x1"), "{tuning}");
    // Nothing verifies: no answer, exit 1.
    let (code, v, _) = tune(&store, &[&id[..12], "--threads", "2", "--repetitions", "2"]);
    assert_eq!(code, 1, "{v}");
    assert!(v["recordings"][0]["best"].is_null(), "{v}");
}

#[test]
fn compile_variants_of_the_ir_and_one_the_compiler_rejects() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (store, id) = recorded(dir.path(), "hash", HASH, true);
    let ir = dir.path().join("hash.bc");
    let (code, v, err) = tune(
        &store,
        &[
            &id[..12],
            "--image",
            ir.to_str().unwrap(),
            "--variant-cflags=-O1",
            "--variant-cflags",
            "-O3 -mllvm -no-such-option",
            "--repetitions",
            "4",
        ],
    );
    assert_eq!(code, 0, "{v}{err}");
    let r = &v["recordings"][0];
    let variants = r["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2, "{r}");
    assert!(variants[1]["compile"]
        .as_str()
        .unwrap()
        .ends_with("-O3 -mllvm -no-such-option"));
    // The rejected flags: an error, dropped; the -O1 build is the answer.
    let bad: Vec<_> = r["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["variant"] == 1)
        .collect();
    assert_eq!(bad.len(), 1, "{r}");
    assert_eq!(bad[0]["verified"], false);
    assert_eq!(bad[0]["run"]["verdict"], "error", "{r}");
    assert_eq!(r["best"]["variant"], 0, "{r}");
    // Compile variants of a native image: refused (usage, exit 2).
    let o = command()
        .arg("--store")
        .arg(&store)
        .args(["tune", &id[..12], "--variant-cflags=-O1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("need an IR image"), "{err}");
}

#[test]
fn counts_outside_the_recorded_limits_are_left_out() {
    // LLVM's own saxpy recording: ThreadsLimits [1,1].
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let fx = rrstore_tests::fixtures().join("upstream-native/saxpy");
    let o = command()
        .arg("--store")
        .arg(&store)
        .args(["import", "--json"])
        .arg(&fx)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&expect_ok(o, &["import"])).unwrap();
    let id = v["recordings"][0]["id"].as_str().unwrap().to_string();
    let (code, v, err) = tune(
        &store,
        &[&id[..12], "--threads", "1-2", "--repetitions", "2"],
    );
    assert_eq!(code, 0, "{v}{err}");
    let r = &v["recordings"][0];
    assert_eq!(r["variants"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(
        r["excluded"],
        serde_json::json!(["threads=2 (recorded limits 1..1)"])
    );
    // Nothing left: a usage error.
    let o = command()
        .arg("--store")
        .arg(&store)
        .args(["tune", &id[..12], "--threads", "2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("outside the recorded limits"));
    // Bad lists: usage errors.
    for bad in ["0", "2-1", "x", "1,,2"] {
        let o = command()
            .arg("--store")
            .arg(&store)
            .args(["tune", &id[..12], "--threads", bad])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad}: {o:?}");
    }
    // --ignore-limits tries them.
    let (_, v, err) = tune(
        &store,
        &[
            &id[..12],
            "--threads",
            "1-2",
            "--repetitions",
            "2",
            "--ignore-limits",
        ],
    );
    let r = &v["recordings"][0];
    assert_eq!(r["variants"].as_array().unwrap().len(), 2, "{r}{err}");
    assert!(r["excluded"].as_array().unwrap().is_empty(), "{r}");
}
