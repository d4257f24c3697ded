//! `rrstore report` through the real binary, from the real history of the
//! fixtures: the two-kernel recording of tests/fixtures/images checked and
//! bisected against its 8 builds (build 3 changes `square` (l16), build 5
//! `scale` (l13)) and the LLVM 22 host recordings checked with their own
//! images. The HTML is self-contained (nothing fetched), holds a chart per
//! kernel, the output matrix with the first changing build framed, arena
//! maps of the kept differing outputs and the store charts, honours
//! --label/--kernel/--since, and writing it neither replays nor changes the
//! store.

mod regress_common;
mod report_common;
mod store_common;

use std::path::Path;

use regress_common::*;
use report_common::history_store;

fn report(s: &Path, out: &Path, extra: &[&str]) -> (String, String) {
    let mut args = vec!["report", "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let stdout = ok(s, &args);
    (stdout, std::fs::read_to_string(out).unwrap())
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn report_is_self_contained_and_charts_the_history() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    history_store(&s);
    let rows_before = json(&s, &["history", "--json"]).as_array().unwrap().len();
    let before = tree_bytes(&s);
    let out = tmp.path().join("report.html");
    let (stdout, html) = report(&s, &out, &[]);
    assert!(
        stdout.starts_with(&format!("wrote {}", out.display())),
        "{stdout}"
    );

    // Nothing to fetch: no script, stylesheet, image or link to anything.
    for banned in [
        "<script", "<link", "<img", "src=", "href=", "url(", "@import", "https:",
    ] {
        assert!(!html.contains(banned), "the report contains {banned}");
    }
    // The only http: is the SVG namespace (an identifier, never fetched).
    assert_eq!(
        count(&html, "http:"),
        count(&html, "xmlns=\"http://www.w3.org/2000/svg\"")
    );
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));

    // One kernel-time chart per kernel with a timed replay: the 2 regress
    // kernels and the 6 distinct kernels of the host fixtures.
    let kernels = count(&html, "data-chart=\"kernel\"");
    assert_eq!(kernels, 8, "{stdout}");
    assert!(stdout.contains(" 8 kernel(s)"), "{stdout}");
    assert!(html.contains("kernel time: main_l13") && html.contains("kernel time: main_l16"));
    // The spread of the 5 repetitions is drawn and tabulated.
    assert!(html.contains("mean ± sd"));

    // The output matrix: build-3 is the first to change l16, build-5 l13.
    assert_eq!(count(&html, "data-chart=\"outputs\""), 1);
    for b in ["build-3", "build-4", "build-5", "own image"] {
        assert!(html.contains(&format!(">\n{b}\n</text>")), "no column {b}");
    }
    let row = |suffix: &str| {
        let glob = format!("*_{suffix}");
        let v = json(
            &s,
            &["ls", "--label", "regress", "--kernel", &glob, "--json"],
        );
        let id = v[0]["id"].as_str().unwrap()[..12].to_string();
        html.lines()
            .find(|l| l.starts_with(&format!("<tr><td><code>{suffix}</code></td><td><code>{id}")))
            .unwrap_or_else(|| panic!("no output row for {suffix}"))
            .to_string()
    };
    let l16 = row("main_l16");
    assert!(
        l16.contains(">build-3</span> (last same: build-2)"),
        "{l16}"
    );
    let l13 = row("main_l13");
    assert!(
        l13.contains(">build-5</span> (last same: build-4)"),
        "{l13}"
    );

    // Arena maps of the kept differing outputs, labelled with the argument
    // buffer the differing bytes fall in (square: 4 bytes in argument 1).
    let maps = count(&html, "data-chart=\"arena\"");
    assert!(maps >= 2, "{maps} arena maps");
    assert!(
        html.contains("4 B at +0x2ffc (arg 1 +0xffc)"),
        "no labelled range"
    );
    assert!(html.contains("arg 1 @ +0x2000"));

    // The store by label: both labels, charts and table.
    assert_eq!(count(&html, "data-chart=\"store\""), 2);
    assert!(html.contains("<tr><td>regress</td><td class=\"num\">2</td>"));
    assert!(html.contains("<tr><td>run1</td><td class=\"num\">11</td>"));

    // C++ kernels are shown demangled (raw names stay in JSON).
    assert!(html.contains(
        "<h3><code>__omp_offloading_fe00_9ae059_step(float*, float*, int)_l7</code></h3>"
    ));
    assert!(html.contains("kernel time: step(float*, float*, int)_l7"));
    assert!(!html.contains("_ZL4stepPfS_i"));
    let ls = json(&s, &["ls", "--kernel", "*stepPfS*", "--json"]);
    assert_eq!(
        ls[0]["kernel"],
        "__omp_offloading_fe00_9ae059__ZL4stepPfS_i_l7"
    );

    // Light, dark and print styles.
    assert!(html.contains("@media (prefers-color-scheme: dark)") && html.contains("@media print"));

    // Reading the store only: no replay, no file changed.
    assert_eq!(
        json(&s, &["history", "--json"]).as_array().unwrap().len(),
        rows_before
    );
    assert_eq!(tree_bytes(&s), before);
}

#[test]
fn report_filters_by_label_kernel_and_since() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    history_store(&s);
    let out = tmp.path().join("r.html");
    let (_, html) = report(&s, &out, &["--label", "regress"]);
    assert_eq!(count(&html, "data-chart=\"kernel\""), 2);
    assert!(!html.contains("<tr><td>run1</td>"));
    assert!(html.contains("label regress"));

    let (_, html) = report(&s, &out, &["--kernel", "*_l16"]);
    assert_eq!(count(&html, "data-chart=\"kernel\""), 1);
    assert!(html.contains("kernel time: main_l16") && !html.contains("kernel time: main_l13"));

    // Nothing since tomorrow: the sections say so instead of charting.
    let (stdout, html) = report(&s, &out, &["--since", "2999-01-01"]);
    assert!(stdout.contains(" 0 replay(s)"), "{stdout}");
    assert_eq!(count(&html, "data-chart=\"kernel\""), 0);
    assert!(html.contains("No replay with a kernel time yet"));

    let (code, err) = fails(
        &s,
        &["report", "-o", out.to_str().unwrap(), "--since", "soon"],
    );
    assert_eq!(code, 4, "{err}");
}

#[test]
fn report_of_an_empty_store_and_an_unwritable_path() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let out = tmp.path().join("empty.html");
    // A store with nothing in it (`report` only reads: it does not create one).
    let saxpy = fixtures().join("llvm22-host/saxpy");
    ok(&s, &["import", saxpy.to_str().unwrap()]);
    let id = ls_ids(&s).remove(0);
    ok(&s, &["rm", &id]);
    let (stdout, html) = report(&s, &out, &[]);
    assert!(stdout.contains("0 recording(s)"), "{stdout}");
    assert!(html.contains("No replay yet."));
    assert!(html.contains("No recording."));

    let bad = tmp.path().join("missing-dir/r.html");
    let (code, err) = fails(&s, &["report", "-o", bad.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("missing-dir/r.html"), "{err}");
}
