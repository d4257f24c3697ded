//! What each recording's runners print stays with that recording when
//! `check --jobs N` replays several at once: a real program with three
//! host kernels that each print many lines of their own (`K<n> line <i>`,
//! stdout and stderr), recorded by `rrstore record`, checked with
//! `--jobs 3`. Every printed line must sit under its own recording in the
//! text output, in its own row's `kernel_output` in `--json`, and in its
//! own case's `<system-out>` in `--junit`; none may be missing or doubled.

mod store_common;

use std::collections::BTreeMap;

use rrstore_tests::offload::{recording_runtime, Source, LLVM};
use store_common::{command, expect_ok};

/// Lines each kernel prints.
const LINES: usize = 120;

const PROGRAM: &str = r#"
#include <cstdio>
#include <cstdlib>
// A little work between lines, so that the kernels of different lanes
// print and end at different times.
#define KERNEL(N)                                                        \
  void k##N(long *acc) {                                                 \
    _Pragma("omp target map(tofrom : acc[0:1])") {                       \
      for (int i = 0; i < LINES; i++) {                                  \
        for (volatile int w = 0; w < 20000; w++) acc[0] += w;            \
        if (i % 2) printf("K" #N " line %d\n", i);                       \
        else fprintf(stderr, "K" #N " line %d\n", i);                    \
      }                                                                  \
      fflush(stdout);                                                    \
    }                                                                    \
  }
KERNEL(1)
KERNEL(2)
KERNEL(3)
int main() {
  long acc = 0;
  k1(&acc); k2(&acc); k3(&acc);
  printf("acc=%ld\n", acc);
  fflush(stdout);
  _Exit(0);
}
"#;

/// The kernel number a line of kernel `K<n>` belongs to.
fn kernel_of_line(line: &str) -> Option<u32> {
    let rest = line.strip_prefix('K')?;
    let (n, tail) = rest.split_once(' ')?;
    tail.starts_with("line ").then(|| n.parse().ok())?
}

/// Which kernel (1-3) a recording of `name` is, by its function.
fn kernel_of_name(name: &str) -> Option<u32> {
    (1..=3).find(|n| name.contains(&format!("Z2k{n}P")))
}

/// The `K<n> line <i>` lines of `text`, checked to be all `n`'s: each
/// line once, all of them there.
fn assert_own_lines(text: &str, n: u32, where_: &str) {
    let mut seen = Vec::new();
    for line in text.lines() {
        let Some(k) = kernel_of_line(line) else {
            continue;
        };
        assert_eq!(
            k, n,
            "{where_}: a line of kernel {k} under kernel {n}: {line:?}"
        );
        seen.push(line.to_string());
    }
    // The recorded replay prints each line once per launch: a whole
    // number of complete sets.
    assert!(
        !seen.is_empty() && seen.len() % LINES == 0,
        "{where_}: {} lines of kernel {n}",
        seen.len()
    );
}

#[test]
fn each_recordings_runner_output_stays_under_it_with_three_lanes() {
    let dir = tempfile::tempdir().unwrap();
    let code = PROGRAM.replace("LINES;", &format!("{LINES};"));
    let src = Source::new(&dir.path().join("src"), "print.cpp", &code);
    let app = dir.path().join("print");
    src.build(&app, &[]);
    let runtime = recording_runtime(dir.path());
    let lib = format!("{}:{LLVM}/lib", runtime.display());
    let store = dir.path().join("store");
    let o = command()
        .arg("--store")
        .arg(&store)
        .args(["record", "--json", "--"])
        .arg(&app)
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    let rec: serde_json::Value = serde_json::from_str(&expect_ok(o, &["record"])).unwrap();
    // Three printing kernels.
    assert_eq!(rec["recordings"].as_array().unwrap().len(), 3, "{rec}");

    let check = |extra: &[&str]| {
        command()
            .arg("--store")
            .arg(&store)
            .args(["check", "--jobs", "3", "--repetitions", "3"])
            .args(extra)
            .output()
            .unwrap()
    };

    // --json: each row's kernel_output holds its own kernel's lines only.
    let j: serde_json::Value =
        serde_json::from_str(&expect_ok(check(&["--json"]), &["check --json"])).unwrap();
    let mut kernel_of = BTreeMap::new();
    for row in j["rows"].as_array().unwrap() {
        let rec = row["recording"].as_str().unwrap().to_string();
        let out = row["kernel_output"].as_str().unwrap();
        match kernel_of_name(row["kernel"].as_str().unwrap()) {
            Some(n) => {
                assert_own_lines(out, n, &format!("--json row {rec}"));
                kernel_of.insert(rec, n);
            }
            None => assert!(
                out.lines().all(|l| kernel_of_line(l).is_none()),
                "--json row {rec}: a flush kernel's row holds kernel lines: {out:?}"
            ),
        }
    }
    assert_eq!(kernel_of.len(), 3, "{j}");

    // Text: every prefixed line sits under its own recording's heading.
    let junit = dir.path().join("check.xml");
    let o = check(&["--junit", junit.to_str().unwrap()]);
    let text = expect_ok(o, &["check"]);
    let mut under: BTreeMap<u32, String> = BTreeMap::new();
    let mut current: Option<u32> = None;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("kernel output of ") {
            // `NAME (RECORDING12):`
            let rec12 = h.rsplit_once('(').and_then(|(_, r)| r.strip_suffix("):"));
            current = rec12.and_then(|r| {
                kernel_of
                    .iter()
                    .find(|(id, _)| id.starts_with(r))
                    .map(|(_, n)| *n)
            });
            continue;
        }
        if let Some(body) = line.strip_prefix("  kernel| ") {
            if let Some(k) = kernel_of_line(body) {
                let n = current.unwrap_or_else(|| panic!("{line:?} under no heading:\n{text}"));
                under.entry(n).or_default().push_str(&format!("{body}\n"));
                assert_eq!(k, n, "{line:?} under kernel {n}:\n{text}");
            }
        }
    }
    for n in 1..=3 {
        assert_own_lines(&under.get(&n).cloned().unwrap_or_default(), n, "text");
    }

    // JUnit: each case's system-out, by its `recording` property.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let mut cases = 0;
    for case in xml.split("<testcase ").skip(1) {
        let case = case.split("</testcase>").next().unwrap();
        let Some(n) = kernel_of
            .iter()
            .find(|(id, _)| case.contains(&format!("name=\"recording\" value=\"{id}\"")))
            .map(|(_, n)| *n)
        else {
            continue;
        };
        let out = case
            .split_once("<system-out>")
            .and_then(|(_, r)| r.split_once("</system-out>"))
            .map(|(o, _)| o)
            .unwrap_or_else(|| panic!("no system-out in {case}"));
        assert_own_lines(out, n, "junit");
        cases += 1;
    }
    assert_eq!(cases, 3, "{xml}");
}
