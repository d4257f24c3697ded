//! Nondeterminism as a verdict of its own (issue 44, item 1) and the
//! thread-count hint (item 4), on real programs compiled and recorded
//! here (`rrstore_tests::offload`) and replayed by the real binary:
//!
//! * a kernel that reads team-local memory before writing it: its output
//!   varies between replays, `replay` says `nondeterministic` (exit 23)
//!   with the varying ranges mapped to the argument, `--confirm 0` says
//!   MISMATCH (exit 1), `history` keeps the verdict, `check` passes it as
//!   skipped in its JUnit, and a changed image that also changes the
//!   stable bytes is a regression;
//! * a kernel whose garbage is mostly the same zeros: its checks in a row,
//!   each `mismatch` or `nondeterministic` as its three replays happen to
//!   fall, are no regression after the first (run profiles,
//!   docs/regress.md "Kernels whose output varies");
//! * a deterministic kernel run with a changed image stays MISMATCH /
//!   REGRESSED (all confirmation replays agree);
//! * a reduction recorded at 2 threads, replayed at 1: MISMATCH with the
//!   hint that it verifies at 2, and `check` calls the difference known
//!   (its baseline already differed alike), not a regression.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use quick_xml::events::Event;
use rrstore_tests::offload::{record_one, recording_runtime, Source};
use rrstore_tests::output::json;

/// `out[0..64]` is computed; `out[80..208]` is a team-local array copied
/// out before anything wrote it; `WORKERS` is where [`WORKER_ARRAYS`] go
/// (or nothing); `out[64..80]` stays as it was, a gap.
const TEAM_LOCAL: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <omp.h>
int main() {
  const int n = 384;
  long *out = (long *)calloc(n, sizeof(long));
  for (int i = 0; i < 64; i++) out[i] = i;
#pragma omp target teams num_teams(1) map(tofrom : out[0:n])
  {
    long local[128];
    __asm__ volatile("" : : "r"(local) : "memory");
    for (int i = 0; i < 128; i++) out[80 + i] = local[i];
WORKERS
    for (int i = 0; i < 64; i++) out[i] = out[i] * FACTOR;
  }
  printf("out[1]=%ld\n", out[1]);
  fflush(stdout);
  _Exit(0);
}
"#;

/// `out[208..336]`: an array of each of the team's two threads, copied
/// out before anything wrote it.
const WORKER_ARRAYS: &str = r#"
#pragma omp parallel num_threads(2)
    {
      long mine[64];
      __asm__ volatile("" : : "r"(mine) : "memory");
      int t = omp_get_thread_num();
      for (int i = 0; i < 64; i++) out[208 + 64 * t + i] = mine[i];
    }
"#;

/// The team-local and the worker arrays, the computed part multiplied by
/// `factor`: stack garbage (return addresses and pointers, which ASLR
/// moves in every runner process, and the stack guard) that differs in
/// every replay.
fn uninit(factor: &str) -> String {
    TEAM_LOCAL
        .replace("WORKERS", WORKER_ARRAYS)
        .replace("FACTOR", factor)
}

/// Only the team-local array: under rrstore's call path (libomp's first
/// fork done before the launch, the stack below the call cleared) most of
/// its words are the same zeros in every replay, and a few hold a pointer
/// in some replays only: three replays agree now and then (`mismatch`),
/// and the next three do not (`nondeterministic`).
fn mostly_zero() -> String {
    TEAM_LOCAL.replace("WORKERS", "").replace("FACTOR", "2")
}

const SCALE: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 4096;
  float *x = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) x[i] = i * 0.25f;
#pragma omp target teams distribute parallel for map(tofrom : x[0:n])
  for (int i = 0; i < n; i++) x[i] = FACTOR * x[i] + 1.0f;
  printf("x[7]=%.2f\n", x[7]);
  fflush(stdout);
  _Exit(0);
}
"#;

/// A sum whose rounding follows the number of threads that share it.
const REDUCE: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 100000;
  double *x = (double *)malloc(n * sizeof(double));
  for (int i = 0; i < n; i++) x[i] = 1.0 / (i + 1.0) * ((i % 3) ? 1.0 : -0.3);
  double *out = (double *)calloc(4, sizeof(double));
#pragma omp target teams distribute parallel for reduction(+ : out[0:1]) map(to : x[0:n]) map(tofrom : out[0:4])
  for (int i = 0; i < n; i++) out[0] += x[i];
  printf("sum=%.17g\n", out[0]);
  fflush(stdout);
  _Exit(0);
}
"#;

struct Program {
    dir: PathBuf,
    runtime: PathBuf,
    src: Source,
}

impl Program {
    fn new(dir: &Path, name: &str, code: &str) -> Program {
        Program {
            dir: dir.to_path_buf(),
            runtime: recording_runtime(dir),
            src: Source::new(&dir.join("src"), &format!("{name}.cpp"), code),
        }
    }

    /// Build with `code` and record it at 2 threads in `dir/<tag>`; the
    /// recording's directory.
    fn record(&self, code: &str, tag: &str) -> PathBuf {
        self.src.rewrite(code);
        let app = self.dir.join(format!("app-{tag}"));
        self.src.build(&app, &[]);
        let rec = self.dir.join(tag);
        record_one(&app, &rec, &self.runtime, &[("OMP_NUM_THREADS", "2")]);
        rec
    }
}

/// The `.image` file a recording run wrote.
fn image_of(rec: &Path) -> PathBuf {
    std::fs::read_dir(rec)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "image"))
        .unwrap()
}

fn rr(store: &Path, args: &[&str], threads: Option<&str>) -> Output {
    let mut c = store_common::command();
    c.arg("--store").arg(store).args(args);
    match threads {
        Some(t) => c.env("OMP_NUM_THREADS", t),
        None => c.env_remove("OMP_NUM_THREADS"),
    };
    c.output().unwrap()
}

fn import(store: &Path, rec: &Path, label: &str) -> String {
    let o = rr(
        store,
        &["import", rec.to_str().unwrap(), "--label", label],
        None,
    );
    assert!(o.status.success(), "{o:?}");
    let o = rr(store, &["ls", "--label", label, "--json"], None);
    json(&o)[0]["id"].as_str().unwrap().to_string()
}

/// A JUnit file read back: the `<testsuite>` attributes and, per
/// testcase, the child element that says how it ended (`skipped`,
/// `failure`, `error`; empty when it passed) and its message.
/// Name-value pairs: attributes, or a case's (element, message).
type Pairs = Vec<(String, String)>;

fn junit(path: &Path) -> (Pairs, Pairs) {
    let xml = std::fs::read_to_string(path).unwrap();
    let mut r = quick_xml::Reader::from_str(&xml);
    let (mut suite, mut cases) = (Vec::new(), Vec::new());
    let attrs = |e: &quick_xml::events::BytesStart| -> Vec<(String, String)> {
        e.attributes()
            .map(|a| {
                let a = a.unwrap();
                let raw = std::str::from_utf8(&a.value).unwrap();
                (
                    String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                    quick_xml::escape::unescape(raw).unwrap().into_owned(),
                )
            })
            .collect()
    };
    loop {
        match r.read_event().unwrap() {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => {
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                match name.as_str() {
                    "testsuite" => suite = attrs(&e),
                    "testcase" => cases.push((String::new(), String::new())),
                    "skipped" | "failure" | "error" => {
                        let msg = attrs(&e)
                            .into_iter()
                            .find(|(k, _)| k == "message")
                            .map(|(_, v)| v)
                            .unwrap_or_default();
                        *cases.last_mut().unwrap() = (name, msg);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    (suite, cases)
}

fn attr<'a>(a: &'a [(String, String)], k: &str) -> &'a str {
    &a.iter().find(|(n, _)| n == k).unwrap().1
}

#[test]
fn a_kernel_reading_team_local_memory_before_writing_it_is_nondeterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let p = Program::new(tmp.path(), "uninit", &uninit("2"));
    let rec = p.record(&uninit("2"), "rec");
    let id = import(&store, &rec, "uninit");

    // Five replays, each confirmed by two more: nondeterministic, exit 23,
    // the varying bytes in the team-local copy (argument 1 at +0x280..),
    // none that differ alike in every replay.
    for _ in 0..5 {
        let o = rr(&store, &["replay", &id, "--json"], None);
        let v = json(&o);
        assert_eq!(o.status.code(), Some(23), "{v:#}");
        assert_eq!(v["verdict"], "nondeterministic", "{v:#}");
        let c = &v["confirmation"];
        assert_eq!(c["replays"], 3, "{c:#}");
        assert!(c["distinct_outputs"].as_u64().unwrap() >= 2, "{c:#}");
        let varying = &c["varying"];
        let first = varying["first_offset"].as_u64().unwrap();
        assert!((80 * 8..336 * 8).contains(&first), "{c:#}");
        assert_eq!(varying["largest"][0]["arg"]["index"], 1, "{c:#}");
        // Garbage that is the same in every replay (the cleared stack's
        // zeros where the recording process had its own frames) differs
        // alike: in the copied arrays too, never in the computed part.
        if !c["stable"].is_null() {
            assert!(
                c["stable"]["first_offset"].as_u64().unwrap() >= 80 * 8,
                "{c:#}"
            );
        }
    }
    // The text says so, and which bytes vary.
    let o = rr(&store, &["replay", &id], None);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(23), "{out}");
    assert!(out.contains("NONDETERMINISTIC"), "{out}");
    assert!(out.contains("varying between replays:"), "{out}");
    assert!(out.contains("in the buffer of argument 1"), "{out}");
    // --confirm 0: one replay, a plain mismatch.
    let o = rr(&store, &["replay", &id, "--confirm", "0", "--json"], None);
    let v = json(&o);
    assert_eq!(o.status.code(), Some(1), "{v:#}");
    assert_eq!(v["verdict"], "mismatch");
    assert!(v["confirmation"].is_null(), "{v:#}");
    // The history keeps the verdict and what varied.
    let h = json(&rr(&store, &["history", &id, "--json"], None));
    let rows = h.as_array().unwrap();
    let nondet: Vec<_> = rows
        .iter()
        .filter(|r| r["verdict"] == "nondeterministic")
        .collect();
    assert_eq!(nondet.len(), 6, "{h:#}");
    assert!(nondet[0]["detail"]
        .as_str()
        .unwrap()
        .starts_with("nondeterministic: "));
    // Outputs that vary between identical replays are no change; the
    // HTML report says why they differ.
    let changes = json(&rr(&store, &["history", "--changes", "--json"], None));
    assert_eq!(changes, serde_json::json!([]), "{changes:#}");
    let html = tmp.path().join("report.html");
    let o = rr(&store, &["report", "-o", html.to_str().unwrap()], None);
    assert!(o.status.success(), "{o:?}");
    let html = std::fs::read_to_string(html).unwrap();
    assert!(
        html.contains(
            "nondeterministic</span>: its output varies between identical replays (6 run(s)"
        ),
        "{html}"
    );

    // check: not a regression (exit 0), said in the table, the JSON and
    // the JUnit (skipped).
    let xml = tmp.path().join("check.xml");
    let o = rr(
        &store,
        &[
            "check",
            "--label",
            "uninit",
            "--repetitions",
            "1",
            "--json",
            "--junit",
            xml.to_str().unwrap(),
        ],
        None,
    );
    let v = json(&o);
    assert_eq!(o.status.code(), Some(0), "{v:#}");
    assert_eq!(v["regressed"], 0);
    assert_eq!(v["nondeterministic"], 1, "{v:#}");
    assert_eq!(v["rows"][0]["status"], "nondeterministic");
    assert_eq!(v["rows"][0]["run"]["verdict"], "nondeterministic");
    let (suite, cases) = junit(&xml);
    assert_eq!(attr(&suite, "skipped"), "1");
    assert_eq!(attr(&suite, "failures"), "0");
    assert_eq!(attr(&suite, "tests"), "1");
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0].0, "skipped", "{cases:?}");
    assert!(cases[0].1.starts_with("NONDETERMINISTIC"), "{cases:?}");
    let md = tmp.path().join("check.md");
    let o = rr(
        &store,
        &[
            "check",
            "--label",
            "uninit",
            "--repetitions",
            "1",
            "--markdown",
            md.to_str().unwrap(),
        ],
        None,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("1 skipped"), "{md}");
    assert!(md.contains("| ➖ |"), "{md}");
    assert!(
        out.contains("nondeterministic (stable ranges unchanged)"),
        "{out}"
    );

    // A build that also changes the computed part: the bytes that differ
    // in every replay changed since the baseline: a regression.
    let changed = p.record(&uninit("3"), "rec3");
    let img = image_of(&changed);
    let o = rr(
        &store,
        &[
            "check",
            "--label",
            "uninit",
            "--repetitions",
            "1",
            "--image",
            img.to_str().unwrap(),
            "--json",
            "--junit",
            xml.to_str().unwrap(),
        ],
        None,
    );
    let v = json(&o);
    assert_eq!(o.status.code(), Some(1), "{v:#}");
    let row = &v["rows"][0];
    assert_eq!(row["status"], "regressed", "{v:#}");
    assert_eq!(row["run"]["verdict"], "nondeterministic", "{v:#}");
    assert_eq!(row["changed_vs_baseline"], true, "{v:#}");
    let (suite, cases) = junit(&xml);
    assert_eq!(attr(&suite, "failures"), "1");
    assert_eq!(cases[0].0, "failure", "{cases:?}");
}

/// Checks in a row of a kernel whose replays agree in some runs and not
/// in others: the first check has no baseline (the recording's own
/// output is the reference, and the cleared stack's zeros differ from
/// it: exit 1); none after it is a regression, whatever each run's
/// verdict. Before run profiles a `mismatch` run after a
/// `nondeterministic` one (or the reverse) was REGRESSED.
#[test]
fn checks_of_a_kernel_that_varies_now_and_then_are_no_regression() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let p = Program::new(tmp.path(), "zero", &mostly_zero());
    let rec = p.record(&mostly_zero(), "rec");
    let id = import(&store, &rec, "zero");
    let check = |xml: &Path| {
        let o = rr(
            &store,
            &[
                "check",
                "--label",
                "zero",
                "--repetitions",
                "1",
                "--json",
                "--junit",
                xml.to_str().unwrap(),
            ],
            None,
        );
        (o.status.code(), json(&o))
    };
    let xml = tmp.path().join("check.xml");
    let (code, v) = check(&xml);
    let first = v["rows"][0]["run"]["verdict"].as_str().unwrap().to_string();
    assert!(
        ["mismatch", "nondeterministic"].contains(&first.as_str()),
        "{v:#}"
    );
    assert_eq!(code, Some(1), "{v:#}");
    let mut verdicts = vec![first];
    for _ in 0..10 {
        let (code, v) = check(&xml);
        let row = &v["rows"][0];
        verdicts.push(row["run"]["verdict"].as_str().unwrap().to_string());
        assert_eq!(code, Some(0), "{verdicts:?}: {v:#}");
        assert_eq!(row["changed_vs_baseline"], false, "{v:#}");
        assert!(
            ["nondeterministic", "known"].contains(&row["status"].as_str().unwrap()),
            "{v:#}"
        );
        let (suite, cases) = junit(&xml);
        assert_eq!(attr(&suite, "failures"), "0", "{v:#}");
        assert_eq!(cases[0].0, "skipped", "{cases:?}");
    }
    eprintln!("verdicts of the checks: {verdicts:?}");
    // Its runs' outputs, `mismatch` rows included, are no change.
    let changes = json(&rr(&store, &["history", "--changes", "--json"], None));
    assert_eq!(changes, serde_json::json!([]), "{verdicts:?}: {changes:#}");
    // The table says so too.
    let out = String::from_utf8_lossy(&rr(&store, &["check", "--label", "zero"], None).stdout)
        .into_owned();
    assert!(!out.contains("REGRESSED"), "{out}");
    let _ = id;
}

#[test]
fn a_deterministic_mismatch_stays_a_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let p = Program::new(tmp.path(), "scale", SCALE);
    let rec = p.record(&SCALE.replace("FACTOR", "3.0f"), "rec");
    let id = import(&store, &rec, "scale");
    let changed = p.record(&SCALE.replace("FACTOR", "3.5f"), "rec2");
    let img = image_of(&changed);
    let o = rr(
        &store,
        &["replay", &id, "--image", img.to_str().unwrap(), "--json"],
        None,
    );
    let v = json(&o);
    assert_eq!(o.status.code(), Some(1), "{v:#}");
    assert_eq!(v["verdict"], "mismatch");
    assert_eq!(v["confirmation"]["replays"], 3, "{v:#}");
    assert_eq!(v["confirmation"]["distinct_outputs"], 1, "{v:#}");
    let o = rr(
        &store,
        &[
            "check",
            "--label",
            "scale",
            "--repetitions",
            "1",
            "--image",
            img.to_str().unwrap(),
        ],
        None,
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("REGRESSED (mismatch)"), "{out}");
}

#[test]
fn a_reduction_recorded_at_2_threads_says_so_and_its_known_difference_is_no_regression() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let p = Program::new(tmp.path(), "reduce", REDUCE);
    let rec = p.record(REDUCE, "rec");
    let id = import(&store, &rec, "reduce");
    // At its own thread count it verifies.
    let o = rr(&store, &["replay", &id], Some("2"));
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // At 1 thread: a deterministic mismatch, and the hint names 2.
    let o = rr(&store, &["replay", &id, "--json"], Some("1"));
    let v = json(&o);
    assert_eq!(o.status.code(), Some(1), "{v:#}");
    assert_eq!(v["verdict"], "mismatch");
    assert_eq!(v["confirmation"]["distinct_outputs"], 1, "{v:#}");
    assert_eq!(v["thread_hint"]["verifies_at"], 2, "{v:#}");
    assert_eq!(v["thread_hint"]["current"], "1", "{v:#}");
    let o = rr(&store, &["replay", &id], Some("1"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("hint: the output verifies with OMP_NUM_THREADS=2"),
        "{out}"
    );
    // check at 1 thread: the previous replay (the baseline) already
    // differed the same way: known, not a regression of this run.
    let xml = tmp.path().join("check.xml");
    let o = rr(
        &store,
        &[
            "check",
            "--label",
            "reduce",
            "--repetitions",
            "1",
            "--json",
            "--junit",
            xml.to_str().unwrap(),
        ],
        Some("1"),
    );
    let v = json(&o);
    assert_eq!(o.status.code(), Some(0), "{v:#}");
    let row = &v["rows"][0];
    assert_eq!(row["status"], "known", "{v:#}");
    assert_eq!(row["changed_vs_recorded"], true);
    assert_eq!(row["changed_vs_baseline"], false);
    assert_eq!(v["known"], 1);
    let (suite, cases) = junit(&xml);
    assert_eq!(attr(&suite, "skipped"), "1");
    assert_eq!(cases[0].0, "skipped", "{cases:?}");
    assert!(cases[0].1.contains("known"), "{cases:?}");
    let o = rr(
        &store,
        &["check", "--label", "reduce", "--repetitions", "1"],
        Some("1"),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("differs from recording (known)"), "{out}");
    assert!(
        out.contains("hint: the output verifies with OMP_NUM_THREADS=2"),
        "{out}"
    );
    assert_eq!(o.status.code(), Some(0), "{out}");
}
