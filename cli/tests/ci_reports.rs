//! `--junit FILE` and `--markdown FILE` of `check`, `bisect`, `replay` and
//! `tune` through the real binary on the 8 image builds of tests/fixtures/images
//! (build 3 changes `square`, build 5 `scale` too): the JUnit XML is parsed
//! back with quick-xml and its testcases, failures and times checked
//! against the command's JSON; the Markdown table has one row per case.

mod regress_common;
mod store_common;

use std::path::Path;

use quick_xml::events::Event;
use regress_common::*;

/// One `<testcase>` as read back.
#[derive(Debug, Default)]
struct TestCase {
    name: String,
    classname: String,
    time: f64,
    properties: Vec<(String, String)>,
    /// `failure` or `error`, with its message, type and text.
    failure: Option<(String, String, String, String)>,
}

impl TestCase {
    fn prop(&self, k: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// The top element's attributes and the testcases of a JUnit file.
struct JUnit {
    suite: Vec<(String, String)>,
    cases: Vec<TestCase>,
}

impl JUnit {
    fn attr(&self, k: &str) -> &str {
        &self.suite.iter().find(|(n, _)| n == k).unwrap().1
    }
}

fn attrs(e: &quick_xml::events::BytesStart) -> Vec<(String, String)> {
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
}

fn get(a: &[(String, String)], k: &str) -> String {
    a.iter()
        .find(|(n, _)| n == k)
        .unwrap_or_else(|| panic!("no attribute {k} in {a:?}"))
        .1
        .clone()
}

fn parse_junit(path: &Path) -> JUnit {
    let xml = std::fs::read_to_string(path).unwrap();
    let mut r = quick_xml::Reader::from_str(&xml);
    let mut out = JUnit {
        suite: Vec::new(),
        cases: Vec::new(),
    };
    // The open <failure>/<error> (tag, message, type) and its text so far;
    // the reader gives entity references (`&amp;`) as events of their own.
    let mut in_failure: Option<(String, String, String)> = None;
    let mut text = String::new();
    loop {
        match r.read_event().unwrap_or_else(|e| panic!("{e}: {xml}")) {
            Event::Start(e) | Event::Empty(e) => {
                let a = attrs(&e);
                match e.name().as_ref() {
                    b"testsuites" => out.suite = a,
                    b"testcase" => out.cases.push(TestCase {
                        name: get(&a, "name"),
                        classname: get(&a, "classname"),
                        time: get(&a, "time").parse().unwrap(),
                        ..TestCase::default()
                    }),
                    b"property" => out
                        .cases
                        .last_mut()
                        .unwrap()
                        .properties
                        .push((get(&a, "name"), get(&a, "value"))),
                    tag @ (b"failure" | b"error") => {
                        let tag = String::from_utf8(tag.to_vec()).unwrap();
                        in_failure = Some((tag, get(&a, "message"), get(&a, "type")));
                        text.clear();
                    }
                    _ => {}
                }
            }
            Event::Text(t) if in_failure.is_some() => text.push_str(&t.decode().unwrap()),
            Event::GeneralRef(g) if in_failure.is_some() => match g.resolve_char_ref().unwrap() {
                Some(c) => text.push(c),
                None => {
                    let name = g.decode().unwrap();
                    text.push_str(&quick_xml::escape::unescape(&format!("&{name};")).unwrap());
                }
            },
            Event::End(e) if matches!(e.name().as_ref(), b"failure" | b"error") => {
                if let Some((tag, msg, ty)) = in_failure.take() {
                    let body = std::mem::take(&mut text);
                    out.cases.last_mut().unwrap().failure = Some((tag, msg, ty, body));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

fn case<'a>(j: &'a JUnit, kernel_suffix: &str) -> &'a TestCase {
    j.cases
        .iter()
        .find(|c| c.name.contains(kernel_suffix))
        .unwrap_or_else(|| panic!("no testcase for {kernel_suffix}"))
}

#[test]
fn check_writes_junit_and_markdown_with_one_case_per_recording() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let (junit, md) = (tmp.path().join("check.xml"), tmp.path().join("check.md"));
    let o = run(
        &s,
        &[
            "check",
            "--image",
            "build-3",
            "--json",
            "--junit",
            junit.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "build 3 changes square");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let j = parse_junit(&junit);
    assert_eq!(j.attr("tests"), "2");
    assert_eq!(j.attr("failures"), "1");
    assert_eq!(j.attr("errors"), "0");
    assert_eq!(j.cases.len(), 2);
    for row in v["rows"].as_array().unwrap() {
        let kernel = row["kernel"].as_str().unwrap();
        let c = case(&j, kernel);
        assert_eq!(c.classname, "rrstore.check.regress");
        assert_eq!(c.prop("recording"), row["recording"].as_str());
        assert_eq!(c.prop("verdict"), row["run"]["verdict"].as_str());
        // The time is the run's kernel time, in seconds.
        let ns = row["run"]["kernel_ns"].as_u64().unwrap();
        assert!(ns > 0);
        assert!((c.time - ns as f64 / 1e9).abs() < 1e-6, "{c:?} vs {ns} ns");
        assert_eq!(row["regressed"].as_bool().unwrap(), c.failure.is_some());
    }
    let sq = case(&j, "_l16");
    let (tag, msg, ty, text) = sq.failure.as_ref().unwrap();
    assert_eq!((tag.as_str(), ty.as_str()), ("failure", "mismatch"));
    assert!(msg.starts_with("REGRESSED (mismatch)"), "{msg}");
    // The diff summary: what differs, and in which argument's buffer.
    assert!(text.contains("4 bytes differ in 1 range(s)"), "{text}");
    assert!(text.contains("in the buffer of argument 1"), "{text}");
    assert!(case(&j, "_l13").failure.is_none());

    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.starts_with("### rrstore check: ❌ 1 passed, 1 failed, 0 errors (2 cases)"),
        "{md}"
    );
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows.len(), 4, "header, separator and two cases:\n{md}");
    assert!(rows
        .iter()
        .any(|r| r.starts_with("| ✅ | `") && r.contains("_l13")));
    assert!(rows
        .iter()
        .any(|r| r.starts_with("| ❌ | `") && r.contains("_l16") && r.contains("| mismatch |")));
    assert!(md.contains("4 bytes differ in 1 range(s)"), "{md}");

    // An unchanged image: every case passes, and the files are replaced.
    ok(
        &s,
        &[
            "check",
            "--image",
            "build-2",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let j = parse_junit(&junit);
    assert_eq!((j.attr("tests"), j.attr("failures")), ("2", "0"));
    assert!(j.cases.iter().all(|c| c.failure.is_none()));
}

#[test]
fn bisect_writes_one_case_per_kernel_with_the_culprit() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let junit = tmp.path().join("bisect.xml");
    let md = tmp.path().join("bisect.md");
    let mut args = vec!["bisect", "--label", "regress", "--json", "--images"];
    let images = all_images();
    args.extend(images.iter().map(String::as_str));
    args.extend(["--junit", junit.to_str().unwrap()]);
    args.extend(["--markdown", md.to_str().unwrap()]);
    let v = json(&s, &args);
    let j = parse_junit(&junit);
    assert_eq!((j.attr("tests"), j.attr("failures")), ("2", "2"));
    for (suffix, culprit) in [("_l13", 5), ("_l16", 3)] {
        let c = case(&j, suffix);
        assert_eq!(c.classname, "rrstore.bisect.regress");
        assert_eq!(c.prop("culprit"), Some(culprit.to_string().as_str()));
        let (tag, msg, ty, text) = c.failure.as_ref().unwrap();
        assert_eq!((tag.as_str(), ty.as_str()), ("failure", "changed"));
        assert!(
            msg.starts_with(&format!("image {culprit} "))
                && msg.contains(&format!("(build-{culprit})")),
            "{msg}"
        );
        assert!(text.contains("step 1: image"), "{text}");
        // Time: the steps' kernel times added up.
        let r = v["recordings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kernel"].as_str().unwrap().ends_with(suffix))
            .unwrap();
        let ns: u64 = r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|st| st["run"]["kernel_ns"].as_u64())
            .sum();
        assert!(ns > 0);
        assert!((c.time - ns as f64 / 1e9).abs() < 1e-5, "{c:?} vs {ns}");
    }
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.starts_with("### rrstore bisect: ❌ 0 passed, 2 failed"),
        "{md}"
    );
    assert!(md.contains("(build-5)") && md.contains("(build-3)"), "{md}");
}

#[test]
fn replay_writes_a_case_and_a_failure_for_a_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let id = rec_id(&s, SQUARE);
    let junit = tmp.path().join("replay.xml");
    let md = tmp.path().join("replay.md");
    let j_arg = junit.to_str().unwrap();
    let m_arg = md.to_str().unwrap();
    let v = json(
        &s,
        &[
            "replay",
            &id,
            "--json",
            "--junit",
            j_arg,
            "--markdown",
            m_arg,
        ],
    );
    assert_eq!(v["verdict"], "verified");
    let j = parse_junit(&junit);
    assert_eq!((j.attr("tests"), j.attr("failures")), ("1", "0"));
    let c = &j.cases[0];
    assert!(c.name.ends_with(&format!("({})", &id[..12])), "{c:?}");
    assert_eq!(c.classname, "rrstore.replay.regress");
    assert_eq!(c.prop("backend"), Some("host"));
    assert_eq!(
        c.prop("history_row"),
        Some(v["history_row"].to_string().as_str())
    );
    let wall = v["timing"]["wall_ns"].as_u64().unwrap() as f64 / 1e9;
    assert!(
        c.time > 0.0 && (c.time - wall).abs() < 1e-6,
        "{c:?} vs {wall}"
    );
    assert!(std::fs::read_to_string(&md).unwrap().contains("| ✅ |"));

    let o = run(&s, &["replay", &id, "--image", "build-3", "--junit", j_arg]);
    assert_eq!(o.status.code(), Some(1));
    let j = parse_junit(&junit);
    assert_eq!((j.attr("tests"), j.attr("failures")), ("1", "1"));
    let (tag, msg, ty, text) = j.cases[0].failure.clone().unwrap();
    assert_eq!((tag.as_str(), ty.as_str()), ("failure", "mismatch"));
    assert!(msg.starts_with("MISMATCH"), "{msg}");
    assert!(text.contains("4 bytes differ"), "{text}");
}

#[test]
fn an_unwritable_report_path_fails_with_a_sentence_and_exit_3() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let id = rec_id(&s, SQUARE);
    let bad = tmp.path().join("no-such-dir/r.xml");
    let (code, err) = fails(&s, &["replay", &id, "--junit", bad.to_str().unwrap()]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("writing the --junit report"), "{err}");
    assert!(err.contains("no-such-dir/r.xml"), "{err}");
    assert!(!bad.parent().unwrap().exists());
}

#[test]
fn case_names_show_cpp_kernels_demangled_and_keep_the_raw_name() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    ok(
        &s,
        &[
            "import",
            fixtures().join("llvm22-host/multi").to_str().unwrap(),
            "--label",
            "multi",
        ],
    );
    let junit = tmp.path().join("multi.xml");
    ok(
        &s,
        &[
            "check",
            "--kernel",
            "*stepPfS*",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let j = parse_junit(&junit);
    assert!(!j.cases.is_empty());
    for c in &j.cases {
        assert!(
            c.name
                .starts_with("__omp_offloading_fe00_9ae059_step(float*, float*, int)_l7 ("),
            "{c:?}"
        );
        assert_eq!(
            c.prop("kernel"),
            Some("__omp_offloading_fe00_9ae059__ZL4stepPfS_i_l7")
        );
        assert_eq!(c.classname, "rrstore.check.multi");
        assert!(c.failure.is_none());
    }
}

/// `tune --junit`: one case per kernel. With build 3's image, which changes
/// `square` and not `scale`, `scale`'s variant verifies (passed, the best
/// variant and its speedup as properties) and `square`'s does not (failed,
/// naming the verdict; exit 1).
#[test]
fn tune_writes_one_case_per_kernel_passed_with_its_best_or_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let junit = tmp.path().join("tune.xml");
    let md = tmp.path().join("tune.md");
    let args = [
        "tune",
        "--label",
        "regress",
        "--image",
        "build-3",
        "--repetitions",
        "2",
        "--json",
        "--junit",
        junit.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ];
    let o = run(&s, &args);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let j = parse_junit(&junit);
    assert_eq!((j.attr("tests"), j.attr("failures")), ("2", "1"));
    let report = |suffix: &str| {
        v["recordings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kernel"].as_str().unwrap().ends_with(suffix))
            .unwrap()
            .clone()
    };

    let scale = case(&j, "_l13");
    let r = report("_l13");
    assert_eq!(scale.classname, "rrstore.tune.regress");
    assert!(scale.failure.is_none(), "{scale:?}");
    assert_eq!(scale.prop("best"), Some("recorded launch"));
    assert_eq!(scale.prop("best_variant"), Some("0"));
    let speedup: f64 = scale.prop("speedup").unwrap().parse().unwrap();
    assert!((speedup - r["best"]["speedup"].as_f64().unwrap()).abs() < 1e-3);
    assert_eq!(
        scale.prop("best_history_row"),
        Some(r["best"]["row"].to_string().as_str())
    );
    assert_eq!(
        scale.prop("best_median_ns"),
        Some(r["best"]["spread"]["median_ns"].to_string().as_str())
    );
    // Time: every launch of the search, the baseline's included.
    let ns: u64 = r["trials"]
        .as_array()
        .unwrap()
        .iter()
        .chain([&r["baseline"]])
        .flat_map(|t| t["run"]["kernel_times_ns"].as_array().unwrap().clone())
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert!(
        ns > 0 && (scale.time - ns as f64 / 1e9).abs() < 1e-5,
        "{scale:?} vs {ns}"
    );

    let square = case(&j, "_l16");
    assert!(square.prop("best").is_none(), "{square:?}");
    let (tag, msg, ty, text) = square.failure.as_ref().unwrap();
    assert_eq!(
        (tag.as_str(), ty.as_str()),
        ("failure", "unverified-variants")
    );
    assert!(
        msg.starts_with("NO VARIANT VERIFIED: 1 variant(s) tried, none verified (mismatch)"),
        "{msg}"
    );
    assert!(text.contains("round 1 recorded launch: mismatch"), "{text}");

    let md = std::fs::read_to_string(&md).unwrap();
    assert!(
        md.starts_with("### rrstore tune: ❌ 1 passed, 1 failed"),
        "{md}"
    );
}
