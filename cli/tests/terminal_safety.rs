//! Strings from recordings others made never reach a terminal or a CI
//! report as markup or control: a recording whose kernel name carries a
//! screen clear, an OSC 52 clipboard write, a newline and a fake
//! `VERIFIED` line, a right-to-left override and Markdown/HTML, imported
//! with a label, tagged and replayed on a machine with such strings (all
//! through the real binary), then shown by every command that prints them:
//! no raw control or bidirectional character reaches stdout or stderr and
//! no line starts with a verdict; `check --junit` parses with a strict XML
//! parser with every test case there, and `--markdown` renders (CommonMark
//! with GFM tables) with no HTML, link or image coming from the name.

mod store_common;

use std::path::Path;
use std::process::Output;

use store_common::*;

/// Screen clear, OSC 52 (clipboard write), a newline and a fake verdict,
/// a right-to-left override, a C1 control, Markdown and HTML.
const NAME: &str =
    "k\x1b[2J\x1b]52;c;cHduZWQ=\x07 ``a`` <img src=x onerror=alert(1)>[l](http://evil.example)|\
                    \nVERIFIED (byte-identical to the recorded output)\u{202e}x\u{85}\x01";
const LABEL: &str = "lab\x1b[31m\r\nVERIFIED (byte-identical to the recorded output)\u{2066}";
const TAG_KEY: &str = "key\x1b[1A";
const TAG_VALUE: &str = "v\x1b]52;c;aGk=\x07\nMISMATCH\u{202d}\u{200f}";
const MACHINE: &str = "m\x1b[2J\nVERIFIED (byte-identical to the recorded output)\u{202e}";

/// What must never reach a terminal as it is.
fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Stdout and stderr of a run: no raw control or bidi character, no line
/// that begins with a verdict it did not earn (`real`: the verdict lines
/// this run may print itself).
fn assert_clean(what: &str, o: &Output, real: &[&str]) {
    for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        let text = String::from_utf8_lossy(bytes);
        if let Some(c) = text.chars().find(|&c| unsafe_char(c)) {
            panic!("{what}: {stream} holds U+{:04X}:\n{text}", c as u32);
        }
        for line in text.lines() {
            let fake = ["VERIFIED", "MISMATCH"].iter().any(|v| line.starts_with(v))
                && !real.contains(&line);
            assert!(
                !fake,
                "{what}: {stream} has a line posing as a verdict:\n{text}"
            );
        }
    }
}

fn run_env(store: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = command();
    c.arg("--store").arg(store).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The saxpy fixture with its kernel name replaced by [`NAME`] (the
/// descriptor as LLVM writes it; the files keep their stem).
fn hostile_recording(dir: &Path) -> std::path::PathBuf {
    let from = fixtures().join("llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json");
    let json = rrstore_tests::copy_recording(&from, dir);
    let mut d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    d["Name"] = NAME.into();
    std::fs::write(&json, serde_json::to_string(&d).unwrap()).unwrap();
    json
}

#[test]
fn hostile_names_labels_tags_and_machines_are_shown_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let json = hostile_recording(&tmp.path().join("hostile"));
    let dir = json.parent().unwrap().to_str().unwrap().to_string();
    let s = |p: &Path| p.to_str().unwrap().to_string();

    // An archive of it, as one would be handed over.
    let rra = tmp.path().join("hostile.rra");
    ok(&store, &["pack", &dir, "-o", &s(&rra)]);
    let o = run(&store, &["inspect", &s(&rra)]);
    assert!(o.status.success());
    assert_clean("inspect archive", &o, &[]);
    let o = run(&store, &["inspect", &dir]);
    assert_clean("inspect directory", &o, &[]);

    let o = run(&store, &["import", &s(&rra), "--label", LABEL]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_clean("import", &o, &[]);
    let o = run(&store, &["import", &dir]);
    assert_clean("import directory", &o, &[]);
    ok(
        &store,
        &["import", &s(&fixtures().join("llvm22-host/saxpy"))],
    );
    let ids = ls_ids(&store);
    let listed: serde_json::Value = serde_json::from_str(&ok(&store, &["ls", "--json"])).unwrap();
    let id = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kernel"] == NAME)
        .map(|r| r["id"].as_str().unwrap().to_string())
        .expect("the hostile recording is listed with its exact name in JSON");
    assert_eq!(ids.len(), 2);
    let short = &id[..12];

    let o = run(&store, &["tag", short, &format!("{TAG_KEY}={TAG_VALUE}")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_clean("tag", &o, &[]);

    for args in [
        vec!["ls"],
        vec!["ls", "--label", LABEL],
        vec!["show", short],
        vec!["stats"],
    ] {
        let o = run(&store, &args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_clean(&format!("{args:?}"), &o, &[]);
    }

    // Replays on a machine whose name is hostile: the rows carry it.
    let env = [("RRSTORE_MACHINE", MACHINE)];
    let o = run_env(&store, &env, &["replay", short]);
    assert_clean("replay", &o, &[]);
    let o = run_env(
        &store,
        &env,
        &["replay", &ids.iter().find(|i| **i != id).unwrap()[..12]],
    );
    assert_clean(
        "replay of the good recording",
        &o,
        &["VERIFIED (byte-identical to the recorded output)"],
    );
    let (junit, md) = (tmp.path().join("check.xml"), tmp.path().join("check.md"));
    let o = run_env(
        &store,
        &env,
        &["check", "--junit", &s(&junit), "--markdown", &s(&md)],
    );
    assert_clean("check", &o, &[]);
    for args in [
        vec!["history"],
        vec!["history", short],
        vec!["history", "--changes"],
    ] {
        let o = run(&store, &args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_clean(&format!("{args:?}"), &o, &[]);
    }

    // The same rows and names as a remote holds them, listed from there.
    let remote = tmp.path().join("remote");
    ok(
        &store,
        &[
            "remote",
            "add",
            "r",
            &format!("file://{}", remote.display()),
        ],
    );
    let o = run(&store, &["push", "r", "--all"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_clean("push", &o, &[]);
    for args in [vec!["ls", "r:"], vec!["history", "r:"]] {
        let o = run(&store, &args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_clean(&format!("{args:?}"), &o, &[]);
        let out = String::from_utf8_lossy(&o.stdout);
        let escaped = if args[0] == "ls" {
            "lab\\x1b[31m"
        } else {
            "m\\x1b[2J"
        };
        assert!(out.contains(escaped), "{args:?}: {out}");
    }

    // JSON keeps the exact strings.
    let shown: serde_json::Value =
        serde_json::from_str(&ok(&store, &["show", short, "--json"])).unwrap();
    assert_eq!(shown["kernel"], NAME);
    assert_eq!(shown["store"]["label"], LABEL);
    assert_eq!(shown["store"]["tags"][TAG_KEY], TAG_VALUE);
    let history: serde_json::Value =
        serde_json::from_str(&ok(&store, &["history", short, "--json"])).unwrap();
    assert!(
        history
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["machine"] == MACHINE),
        "{history}"
    );

    check_reports(&junit, &md);
}

/// The CI reports of the check above: both recordings are test cases.
fn check_reports(junit: &Path, md: &Path) {
    let xml = std::fs::read_to_string(junit).unwrap();
    let doc = roxmltree::Document::parse(&xml)
        .unwrap_or_else(|e| panic!("the JUnit report is not XML 1.0: {e}\n{xml}"));
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 2, "{xml}");
    let hostile = cases
        .iter()
        .find(|c| c.attribute("name").is_some_and(|n| n.contains("onerror")))
        .unwrap_or_else(|| panic!("no test case of the hostile recording:\n{xml}"));
    let name = hostile.attribute("name").unwrap();
    assert!(
        name.contains("\\x1b[2J") && name.contains("\\u{202e}"),
        "{name}"
    );
    assert!(!name.chars().any(unsafe_char), "{name}");

    let text = std::fs::read_to_string(md).unwrap();
    assert_markdown_inert(&text);
}

/// Rendered as CommonMark with GFM tables: the only HTML is the report's
/// own `<details>`/`<summary>` (with the name escaped inside), there is no
/// link or image, and the name is a code span of its own row.
fn assert_markdown_inert(text: &str) {
    use pulldown_cmark::{Event, Options, Parser, Tag};
    let mut code = Vec::new();
    for ev in Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
        match ev {
            Event::Html(h) | Event::InlineHtml(h) => {
                let h = h.trim();
                let ours = h == "</details>"
                    || (h.starts_with("<details><summary>")
                        && h.ends_with("</summary>")
                        && !h["<details><summary>".len()..h.len() - "</summary>".len()]
                            .contains(['<', '>']));
                assert!(ours, "raw HTML from a name: {h:?}\n{text}");
            }
            Event::Start(Tag::Link { .. } | Tag::Image { .. }) => {
                panic!("a link or image from a name:\n{text}")
            }
            Event::Code(c) => code.push(c.to_string()),
            _ => {}
        }
    }
    assert!(
        code.iter()
            .any(|c| c.contains("onerror") && c.contains("``a``") && c.contains('|')),
        "the name is not one whole code span: {code:?}\n{text}"
    );
    assert!(!text.chars().any(unsafe_char), "{text}");
}
