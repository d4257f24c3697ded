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

#[test]
fn check_times_repetitions_and_compares_medians_with_the_baseline() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    // First check: five launches per replay by default, no earlier run to
    // compare the time with.
    let (code, v) = check(&s, &["--kernel", SCALE]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["repetitions"], 5);
    let r = row(&v, "_l13");
    assert_eq!(r["run"]["kernel_times_ns"].as_array().unwrap().len(), 5);
    assert!(r["time"].is_null(), "{v:#}");
    let first_row = r["run"]["row"].clone();
    // The history row keeps every launch's time.
    let id = rec_id(&s, SCALE);
    let h = history_rows(&s, &id);
    assert_eq!(h[0]["kernel_ns"].as_array().unwrap().len(), 5);

    // Second check, three launches: compared with the first run's five.
    let (code, v) = check(&s, &["--kernel", SCALE, "--repetitions", "3"]);
    assert_eq!(code, 0, "{v:#}");
    let r = row(&v, "_l13");
    assert_eq!(r["baseline"]["row"], first_row);
    let t = &r["time"];
    assert_eq!(t["baseline_rows"], serde_json::json!([first_row]), "{v:#}");
    assert_eq!(t["run"]["samples"], 3, "{v:#}");
    assert_eq!(t["baseline"]["samples"], 5, "{v:#}");
    assert_eq!(t["enough_samples"], true);
    let n = |x: &serde_json::Value| x.as_u64().unwrap();
    for side in ["run", "baseline"] {
        let sp = &t[side];
        assert!(n(&sp["min_ns"]) <= n(&sp["q1_ns"]), "{sp:#}");
        assert!(n(&sp["q1_ns"]) <= n(&sp["median_ns"]), "{sp:#}");
        assert!(n(&sp["median_ns"]) <= n(&sp["q3_ns"]), "{sp:#}");
        assert!(n(&sp["q3_ns"]) <= n(&sp["max_ns"]), "{sp:#}");
    }
    let ratio = n(&t["run"]["median_ns"]) as f64 / n(&t["baseline"]["median_ns"]) as f64;
    assert!((t["ratio"].as_f64().unwrap() - ratio).abs() < 1e-9, "{t:#}");
    assert_eq!(r["time_ratio"], t["ratio"]);
    // Flagged only when outside the noise (the rule of docs/regress.md;
    // with one baseline run its spread is the baseline's), and then only
    // when a second replay right after confirms it.
    let slower = t["slower"].as_bool().unwrap();
    let outside = ratio > 1.10 && n(&t["run"]["q1_ns"]) > n(&t["baseline"]["q3_ns"]);
    assert_eq!(t["confirmed_by"].is_null(), !outside, "{t:#}");
    assert!(outside || !slower, "{t:#}");
    assert_eq!(v["slower"], u64::from(slower));
    assert_eq!(v["replays"], if outside { 2 } else { 1 }, "{v:#}");
    // The next check's baseline is every earlier recorded-image run (not
    // its own run, nor the replay that checked a slowdown it found: on a
    // busy machine it may find one).
    let (_, v) = check(&s, &["--kernel", SCALE]);
    let t = &row(&v, "_l13")["time"];
    let earlier: Vec<serde_json::Value> = history_rows(&s, &id)
        .iter()
        .filter(|h| h["id"] != row(&v, "_l13")["run"]["row"] && h["id"] != t["confirmed_by"])
        .map(|h| h["id"].clone())
        .collect();
    assert!(earlier.len() >= 2);
    assert_eq!(t["baseline_rows"], serde_json::json!(earlier), "{v:#}");

    // The table shows both spreads; a bad count is a usage error.
    let out = ok(&s, &["check", "--kernel", SCALE]);
    assert!(out.contains("ms x5 vs "), "{out}");
    assert!(out.contains("slower beyond the noise"), "{out}");
    let (code, err) = fails(&s, &["check", "--repetitions", "0"]);
    assert_eq!(code, 2, "{err}");
}

/// `check --json ARGS` with `OMP_NUM_THREADS` set for the host runner.
fn check_threads(s: &std::path::Path, threads: &str, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["--store", s.to_str().unwrap(), "check", "--json"];
    a.extend_from_slice(args);
    let o = store_common::command()
        .args(&a)
        .env_remove("RRSTORE_DIR")
        .env("OMP_NUM_THREADS", threads)
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn the_replay_cache_reuses_only_runs_with_the_same_launch() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let args = ["--image", "build-2", "--kernel", SCALE, "--use-cache"];
    // (A run found slower is confirmed by one more replay of the recorded
    // image: counts of replays are not asserted.)
    let first = check_threads(&s, "1", &args);
    assert!(row(&first, "_l13")["run"]["launch"]
        .as_str()
        .unwrap()
        .contains("OMP_NUM_THREADS=1"));
    // Another OMP_NUM_THREADS is another launch: both runs are replayed.
    let v = check_threads(&s, "2", &args);
    let r = row(&v, "_l13");
    for side in ["run", "baseline"] {
        assert_eq!(r[side]["cached"], false, "{side}: {v:#}");
        let launch = r[side]["launch"].as_str().unwrap();
        assert!(launch.contains("OMP_NUM_THREADS=2"), "{side}: {v:#}");
    }
    // The same launch again: both come from the history.
    let again = check_threads(&s, "2", &args);
    let ra = row(&again, "_l13");
    assert_eq!(ra["run"]["row"], r["run"]["row"], "{again:#}");
    for side in ["run", "baseline"] {
        assert_eq!(ra[side]["cached"], true, "{side}: {again:#}");
        let launch = ra[side]["launch"].as_str().unwrap();
        assert!(launch.contains("OMP_NUM_THREADS=2"), "{side}: {again:#}");
    }

    // A replay of the recorded image with --num-threads is the newest row
    // of (recording, image), but not the launch check gives it.
    let id = rec_id(&s, SCALE);
    let o = store_common::command()
        .args([
            "--store",
            s.to_str().unwrap(),
            "replay",
            &id,
            "--num-threads",
            "3",
        ])
        .env_remove("RRSTORE_DIR")
        .env("OMP_NUM_THREADS", "2")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let h = history_rows(&s, &id);
    let newest = h.iter().map(|e| e["id"].as_i64().unwrap()).max().unwrap();
    let replayed = h.iter().find(|e| e["id"] == newest).unwrap();
    assert_eq!(replayed["launch_overrides"], "num_threads=3", "{h:#?}");
    let v = check_threads(&s, "2", &args);
    let b = &row(&v, "_l13")["baseline"];
    assert_eq!(b["cached"], true, "{v:#}");
    assert_ne!(b["row"], newest, "{v:#}");
    assert!(
        b["launch"].as_str().unwrap().contains("OMP_NUM_THREADS=2"),
        "{v:#}"
    );
}

#[test]
fn the_replay_cache_reuses_only_runs_with_the_same_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let base = ["--image", "build-2", "--kernel", SCALE, "--use-cache"];
    let sides = |v: &serde_json::Value| {
        let r = row(v, "_l13");
        (r["run"]["cached"].clone(), r["baseline"]["cached"].clone())
    };
    let (_, v) = check(&s, &base);
    assert_eq!(sides(&v), (false.into(), false.into()), "{v:#}");
    let (_, v) = check(&s, &base);
    assert_eq!(sides(&v), (true.into(), true.into()), "{v:#}");
    // Each setting a verdict depends on is another key: replayed the first
    // time, reused the second.
    let settings: [&[&str]; 4] = [
        &[
            "--tolerance",
            "--dtype",
            "f32",
            "--rtol",
            "1e-3",
            "--atol",
            "0",
        ],
        &["--timeout", "30"],
        &["--sandbox", "off"],
        &["--placement", "recorded"],
    ];
    for extra in settings {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let (_, v) = check(&s, &args);
        assert_eq!(sides(&v), (false.into(), false.into()), "{extra:?}: {v:#}");
        let (_, v) = check(&s, &args);
        assert_eq!(sides(&v), (true.into(), true.into()), "{extra:?}: {v:#}");
    }
    // A plain `replay` row keeps no settings key: never reused.
    let id = rec_id(&s, SCALE);
    ok(&s, &["replay", &id, "--timeout", "45"]);
    let mut args = base.to_vec();
    args.extend_from_slice(&["--timeout", "45"]);
    let (_, v) = check(&s, &args);
    assert_eq!(row(&v, "_l13")["baseline"]["cached"], false, "{v:#}");
}
