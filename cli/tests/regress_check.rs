//! `rrstore check` and the whole regression workflow through the real
//! binary: check flags the changed image (exit 1), passes unchanged ones,
//! honours --kernel/--label/--tolerance, and bisect + check + diff together
//! find and explain the change among 8 images in at most 4 replays per
//! kernel (history rows counted).

mod regress_common;
mod store_common;

use regress_common::*;

fn check(s: &std::path::Path, args: &[&str]) -> (i32, serde_json::Value) {
    let mut a = vec!["check", "--json"];
    a.extend_from_slice(args);
    let o = run(s, &a);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&o.stderr));
    });
    (o.status.code().unwrap(), v)
}

fn row<'a>(v: &'a serde_json::Value, kernel_suffix: &str) -> &'a serde_json::Value {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kernel"].as_str().unwrap().ends_with(kernel_suffix))
        .unwrap()
}

#[test]
fn check_flags_changed_images_and_passes_unchanged_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    // Recorded images: everything verifies.
    let (code, v) = check(&s, &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["regressed"], 0);
    assert_eq!(v["replays"], 2);
    // Build 2 changes nothing.
    let (code, v) = check(&s, &["--image", "build-2"]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(row(&v, "_l13")["changed_vs_recorded"], false);
    assert_eq!(row(&v, "_l13")["changed_vs_baseline"], false);
    // The baseline (recorded-image run) now comes from the history.
    assert_eq!(v["cached"], 2, "{v:#}");
    assert!(row(&v, "_l16")["time_ratio"].as_f64().unwrap() > 0.0);
    // Build 4 changes `square` only.
    let (code, v) = check(&s, &["--image", "build-4"]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["regressed"], 1);
    assert_eq!(row(&v, "_l16")["regressed"], true);
    assert_eq!(row(&v, "_l16")["run"]["verdict"], "mismatch");
    assert_eq!(row(&v, "_l16")["changed_vs_baseline"], true);
    assert_eq!(row(&v, "_l13")["regressed"], false);
    // --kernel narrows it.
    let (code, v) = check(&s, &["--image", "build-4", "--kernel", SCALE]);
    assert_eq!(code, 0);
    assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    // --label matches nothing: not found (3), so a typo cannot pass CI.
    let o = run(
        &s,
        &[
            "check", "--json", "--image", "build-4", "--label", "other-*",
        ],
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("other-*"));
    // Build 5's fused multiply-add is within a 1e-6 relative tolerance.
    let (code, v) = check(
        &s,
        &[
            "--image",
            "build-5",
            "--kernel",
            SCALE,
            "--tolerance",
            "--dtype",
            "f32",
            "--rtol",
            "1e-6",
        ],
    );
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(row(&v, "_l13")["run"]["verdict"], "within-tolerance");
    // ... but not byte-exact: exit 1 and a table naming it.
    let o = run(&s, &["check", "--image", "build-5", "--kernel", SCALE]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("REGRESSED (mismatch)"), "{out}");
    assert!(out.contains("vs recorded"), "{out}");
}

#[test]
fn bisect_check_and_diff_find_the_change_in_at_most_four_replays() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    for (glob, culprit) in [(SCALE, 5usize), (SQUARE, 3)] {
        let id = rec_id(&s, glob);
        let mut args = vec!["bisect", id.as_str(), "--json", "--images"];
        let imgs = all_images();
        args.extend(imgs.iter().map(String::as_str));
        let b = json(&s, &args);
        let r = &b["recordings"][0];
        assert_eq!(r["culprit"], culprit as u64);
        let culprit_step = r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|st| st["index"] == culprit as u64)
            .unwrap();
        let culprit_row = culprit_step["run"]["row"].as_i64().unwrap();
        assert_eq!(culprit_step["run"]["output_kept"], true);

        // check the culprit, reusing its bisect run: only the recorded-image
        // baseline is replayed.
        let label = format!("build-{culprit}");
        let (code, c) = check(&s, &["--image", &label, "--kernel", glob, "--use-cache"]);
        assert_eq!(code, 1, "{c:#}");
        assert_eq!(c["rows"][0]["run"]["row"], culprit_row);
        assert_eq!(c["rows"][0]["run"]["cached"], true);

        // diff the recorded output with the culprit's kept output: no replay.
        let o = run(&s, &["diff", &id, &format!("h:{culprit_row}"), "--json"]);
        assert_eq!(o.status.code(), Some(1));
        let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(d["b"]["rerun_row"], serde_json::Value::Null);
        let m = &d["arena"]["mismatch"];
        assert!(m["differing_bytes"].as_u64().unwrap() > 0);
        // The differences lie in the output buffer (argument 1 of both).
        assert_eq!(m["largest"][0]["arg"]["index"], 1, "{d:#}");

        let rows = history_rows(&s, &id).len();
        assert!(rows <= 4, "{rows} replays for {glob}");
    }
}
