//! `rrstore bisect` through the real binary on the 8 image builds of
//! tests/fixtures/images: finds build 5 for `scale` and build 3 for
//! `square` in at most ceil(log2(8)) + 1 = 4 replays (counted from the JSON
//! and from the history rows), re-runs nothing the history already has,
//! and `bisect --label` reports the culprit per kernel.

mod regress_common;
mod store_common;

use regress_common::*;

fn bisect_json(s: &std::path::Path, target: &[&str], images: &[String]) -> serde_json::Value {
    let mut args: Vec<&str> = vec!["bisect"];
    args.extend_from_slice(target);
    args.push("--images");
    args.extend(images.iter().map(String::as_str));
    args.push("--json");
    json(s, &args)
}

#[test]
fn bisect_finds_the_changed_image_in_at_most_four_replays() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    for (glob, culprit) in [(SCALE, 5u64), (SQUARE, 3)] {
        let id = rec_id(&s, glob);
        let v = bisect_json(&s, &[&id], &all_images());
        let r = &v["recordings"][0];
        assert_eq!(r["culprit"], culprit, "{v:#}");
        assert_eq!(r["last_good"], culprit - 1);
        assert_eq!(r["culprit_image"], image_hash(&s, culprit as usize));
        let replays = r["replays"].as_u64().unwrap();
        assert!(replays <= 4, "{replays} replays: {v:#}");
        // Each replay is one history row, and nothing else ran.
        assert_eq!(history_rows(&s, &id).len() as u64, replays);
        // Every step is printed with its verdict; the culprit's step is bad.
        let steps = r["steps"].as_array().unwrap();
        assert!(steps
            .iter()
            .any(|st| st["index"] == culprit && st["good"] == false));

        // Again: everything comes from the history, nothing is replayed.
        let again = bisect_json(&s, &[&id], &all_images());
        assert_eq!(again["recordings"][0]["culprit"], culprit);
        assert_eq!(again["recordings"][0]["replays"], 0, "{again:#}");
        assert_eq!(history_rows(&s, &id).len() as u64, replays);
    }
}

#[test]
fn bisect_by_label_reports_each_kernel_and_accepts_files() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    ok(
        &s,
        &[
            "import",
            images_dir().join("recording").to_str().unwrap(),
            "--label",
            "app-run-1",
        ],
    );
    // Images given as files are added to the store on the fly.
    let files: Vec<String> = (0..8).map(image).collect();
    let mut args: Vec<&str> = vec!["bisect", "--label", "app-*", "--images"];
    args.extend(files.iter().map(String::as_str));
    let out = ok(&s, &args);
    assert!(
        out.contains("first image that changed each kernel:"),
        "{out}"
    );
    let line = |k: &str| {
        out.lines()
            .find(|l| l.contains(k) && l.contains("image "))
            .unwrap()
            .to_string()
    };
    assert!(line("_l13 ").contains("image 5 (img-5.so)"), "{out}");
    assert!(line("_l16 ").contains("image 3 (img-3.so)"), "{out}");
    assert!(out.contains("step 1: image 4"), "{out}");
    let listed = json(&s, &["image", "ls", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 8);
    // The recorded image is the reference: no replay for the good side.
    assert!(out.contains("reference: the recorded output"), "{out}");
}

#[test]
fn bisect_range_options_and_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let id = rec_id(&s, SCALE);
    // --good 1 (not the recorded image): the reference is a replay of it.
    let v = bisect_json(&s, &[&id, "--good", "1", "--bad", "6"], &all_images());
    let r = &v["recordings"][0];
    assert_eq!(r["culprit"], 5, "{v:#}");
    assert!(r["reference"].as_str().unwrap().contains("run of image 1"));
    assert!(r["replays"].as_u64().unwrap() <= 4);
    // No change within 0..=4.
    let v = bisect_json(&s, &[&id, "--bad", "4"], &all_images());
    assert_eq!(v["recordings"][0]["culprit"], serde_json::Value::Null);
    // Bad ranges are usage errors.
    let mut args = vec![
        "bisect",
        id.as_str(),
        "--good",
        "6",
        "--bad",
        "2",
        "--images",
    ];
    let imgs = all_images();
    args.extend(imgs.iter().map(String::as_str));
    let (code, err) = fails(&s, &args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--good < --bad"), "{err}");
    // An unknown image is "not found".
    let (code, err) = fails(&s, &["bisect", &id, "--images", "build-0", "no-such-image"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("no stored image matches `no-such-image`"),
        "{err}"
    );
}
