//! `rrstore diff` through the real binary: two recordings (descriptor and
//! argument differences), a recording with itself, kept replay outputs
//! (`h:ROW`) with f32 error statistics, a plain replay's output (re-run),
//! and bad specs.

mod regress_common;
mod store_common;

use regress_common::*;

#[test]
fn diff_recordings_and_replay_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let scale = rec_id(&s, SCALE);
    let square = rec_id(&s, SQUARE);

    // Same recording: identical, exit 0.
    let out = ok(&s, &["diff", &scale, &scale]);
    assert!(out.contains("IDENTICAL"), "{out}");

    // Two recordings: kernel, argument and size differences, exit 1.
    let o = run(&s, &["diff", &scale, &square, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let fields: Vec<&str> = d["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    for f in ["kernel", "num_args", "arg[1]", "arena.size", "bytes"] {
        assert!(fields.contains(&f), "{f} missing from {fields:?}");
    }
    // Input snapshots can be compared too.
    let o = run(&s, &["diff", &scale, &square, "--part", "input"]);
    assert_eq!(o.status.code(), Some(1));

    // Kept outputs of check runs, with f32 statistics: build 5 differs from
    // the recorded image by at most 1 ULP.
    let c = json(
        &s,
        &["check", "--image", "build-5", "--kernel", SCALE, "--json"],
    );
    let bad_row = c["rows"][0]["run"]["row"].as_i64().unwrap();
    let base_row = c["rows"][0]["baseline"]["row"].as_i64().unwrap();
    let o = run(
        &s,
        &[
            "diff",
            &format!("h:{base_row}"),
            &format!("h:{bad_row}"),
            "--dtype",
            "f32",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &d["arena"]["tolerance"];
    assert!(t["differing"].as_u64().unwrap() > 0, "{d:#}");
    assert_eq!(t["max_ulp"], 1, "{d:#}");
    let image_field = d["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "image")
        .unwrap();
    assert_eq!(image_field["b"], image_hash(&s, 5)[..12]);
    let text = ok_or_mismatch(
        &s,
        &["diff", &format!("h:{base_row}"), &format!("h:{bad_row}")],
    );
    assert!(text.contains("in the buffer of argument 1"), "{text}");
    summary_agrees_with_listed_ranges(&d, &text);
    // History sides carry hex IDs, not arrays of integers.
    for side in ["a", "b"] {
        let id = d[side]["history"]["recording"].as_str().unwrap();
        assert_eq!(id, scale, "{d:#}");
    }

    // A plain replay keeps no output: diff re-runs it (same output hash).
    let r = json(&s, &["replay", &square, "--image", "build-3", "--json"]);
    let row = r["history_row"].as_i64().unwrap();
    let o = run(&s, &["diff", &square, &format!("h:{row}"), "--json"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(d["b"]["rerun_row"].as_i64().unwrap() > row);
    assert_eq!(d["arena"]["mismatch"]["differing_bytes"], 4, "{d:#}");

    // Bad specs.
    let (code, err) = fails(&s, &["diff", &scale, "h:9999"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no history row 9999"), "{err}");
    let (code, _) = fails(&s, &["diff", &scale, "ffff"]);
    assert_eq!(code, 3);
}

/// The summary's byte and range counts equal those of the listed ranges
/// plus the unlisted ones, in the JSON and in the text.
fn summary_agrees_with_listed_ranges(d: &serde_json::Value, text: &str) {
    let m = &d["arena"]["mismatch"];
    let listed = m["largest"].as_array().unwrap();
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let listed_bytes: u64 = listed.iter().map(|r| n(&r["differing_bytes"])).sum();
    assert_eq!(
        listed_bytes + n(&m["unlisted_differing_bytes"]),
        n(&m["differing_bytes"]),
        "{m:#}"
    );
    assert_eq!(
        listed.len() as u64 + n(&m["unlisted_ranges"]),
        n(&m["ranges"]),
        "{m:#}"
    );
    assert!(listed
        .iter()
        .all(|r| n(&r["span"]) >= n(&r["differing_bytes"])));
    // Text: "N bytes differ in R range(s)", one "K differing byte(s)" line
    // per listed range and "the other U range(s) hold B".
    let words: Vec<&str> = text.split_whitespace().collect();
    let before = |w: [&str; 2]| -> Vec<u64> {
        words
            .windows(3)
            .filter(|p| p[1..] == w)
            .filter_map(|p| p[0].parse().ok())
            .collect()
    };
    let total = before(["bytes", "differ"])[0];
    let per_range: u64 = before(["differing", "byte(s)"]).iter().sum();
    let rest = text
        .split("range(s) hold ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .map(|t| t.parse::<u64>().unwrap())
        .unwrap_or(0);
    assert_eq!(per_range + rest, total, "{text}");
    assert!(text.contains("merged into one range"), "{text}");
}

fn ok_or_mismatch(s: &std::path::Path, args: &[&str]) -> String {
    let o = run(s, args);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}
