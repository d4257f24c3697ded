//! Images as store objects and `replay --image` through the real binary:
//! add (twice), ls, the hash actually run recorded in the history, clear
//! errors for an image without the kernel or for another target, gc keeps
//! images, and `history --changes`.

mod regress_common;
mod store_common;

use regress_common::*;

#[test]
fn images_are_content_addressed_and_replayable() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    // Adding again: present, label updated only when given.
    let out = ok(&s, &["image", "add", &image(3)]);
    assert!(out.starts_with("present "), "{out}");
    let v = json(&s, &["image", "ls", "--json"]);
    let list = v.as_array().unwrap();
    assert_eq!(list.len(), 8);
    assert!(list.iter().all(|i| i["target"] == "x86_64"));
    assert!(list.iter().any(|i| i["label"] == "build-3"));
    let text = ok(&s, &["image", "ls"]);
    assert!(text.contains("build-7"), "{text}");

    // replay --image: by label, by hash prefix, by file.
    let id = rec_id(&s, SQUARE);
    let h3 = image_hash(&s, 3);
    for spec in ["build-3".to_string(), h3[..10].to_string(), image(3)] {
        let o = run(&s, &["replay", &id, "--image", &spec, "--json"]);
        assert_eq!(o.status.code(), Some(1), "{spec}: build 3 changes square");
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["image_blake3"], h3);
    }
    let hist = history_rows(&s, &id);
    assert!(hist.iter().all(|e| e["image_hash"] == h3));
    // The recorded image still verifies.
    ok(&s, &["replay", &id]);

    // gc keeps stored images (no recording references build 7).
    ok(&s, &["gc"]);
    ok(&s, &["verify", "--full"]);
    let o = run(&s, &["replay", &rec_id(&s, SCALE), "--image", "build-7"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // history --changes: square had two outputs (recorded and build 3).
    let c = json(&s, &["history", "--changes", "--json"]);
    let sq = c
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["recording"] == id)
        .unwrap();
    let outputs = sq["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 2);
    assert!(outputs.iter().any(|g| g["recorded"] == true));
    let changed = outputs.iter().find(|g| g["recorded"] == false).unwrap();
    assert_eq!(changed["images"][0][0], h3);
    assert_eq!(changed["images"][0][1], "build-3");
    assert_eq!(changed["backends"][0], "host");
    let text = ok(&s, &["history", "--changes"]);
    assert!(text.contains("2 different outputs"), "{text}");
}

#[test]
fn wrong_images_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    setup(&s);
    let id = rec_id(&s, SCALE);
    // An image of another program: the kernel symbol is missing.
    let other = fixtures().join("llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.image");
    let (code, err) = fails(&s, &["replay", &id, "--image", other.to_str().unwrap()]);
    assert_eq!(code, 11, "{err}");
    assert!(err.contains("does not export the kernel symbol"), "{err}");
    assert!(
        err.contains("__omp_offloading_fe00_9ae056_main_l13"),
        "{err}"
    );
    // A cubin on the host backend: target mismatch naming both.
    let cubin = tmp.path().join("kernel.cubin");
    let h = rrstore_tests::elf_header(rrstore_tests::elf::EM_CUDA, 90, 0);
    std::fs::write(&cubin, &h).unwrap();
    let (code, err) = fails(
        &s,
        &[
            "replay",
            &id,
            "--backend",
            "host",
            "--image",
            cubin.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 9, "{err}");
    assert!(err.contains("sm_90") && err.contains("host"), "{err}");
    // Unknown image names.
    let (code, err) = fails(&s, &["replay", &id, "--image", "nope"]);
    assert_eq!(code, 3, "{err}");
    // Failed replays are history rows with the image they tried.
    let hist = history_rows(&s, &id);
    assert!(hist.iter().any(|e| e["verdict"] == "error"));
}
