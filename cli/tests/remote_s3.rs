//! S3 remotes against a real S3-compatible server (moto) started on
//! loopback by the harness: round trip with the same IDs and byte-identical
//! exports, two processes pushing overlapping sets at once, and the bad
//! cases (unreachable endpoint, missing bucket, refused credentials,
//! corrupted object) with their exit codes and nothing imported.
//! Fails (does not skip) when moto_server is not installed:
//! `python3 -m pip install 'moto[server]'`.
#![cfg(feature = "s3")]

mod remote_common;

use remote_common::*;

fn add(store: &std::path::Path, name: &str, url: &str, endpoint: &str) {
    ok(
        store,
        &[
            "remote",
            "add",
            name,
            url,
            "--endpoint",
            endpoint,
            "--allow-http",
        ],
    );
}

#[test]
fn s3_push_ls_pull_round_trip() {
    let moto = Moto::start(false);
    moto.create_bucket("rr-test");
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    import(&a, &ELEVEN);
    let all = ids(&a, None);
    add(&a, "lab", "s3://rr-test/team/x", &moto.endpoint());
    let pushed = json(&a, &["push", "lab", "--all", "--json"]);
    assert_eq!(pushed["recordings"], 11);
    assert_eq!(
        moto.keys("rr-test", "team/x/packs/").len() as u64,
        pushed["packs"].as_u64().unwrap()
    );
    assert!(moto.keys("rr-test", "team/x/chunks/").is_empty());
    assert_eq!(ids(&a, Some("lab:")), all);
    let again = json(&a, &["push", "lab", "--all", "--json"]);
    assert_eq!(
        (again["present"].as_u64(), again["bytes"].as_u64()),
        (Some(11), Some(0))
    );
    // Store b reaches the same bucket through the AWS environment variables.
    ok(&b, &["remote", "add", "lab", "s3://rr-test/team/x"]);
    let out = rr(&b, &["pull", "lab", "--all", "--json"])
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pulled: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pulled["recordings"], 11);
    assert_eq!(ids(&b, None), all);
    same_exports(&a, &b, &all, t.path());
}

#[test]
fn s3_concurrent_pushes_of_overlapping_sets() {
    let moto = Moto::start(false);
    moto.create_bucket("rr-conc");
    let t = tempfile::tempdir().unwrap();
    let (a, b, c) = (t.path().join("a"), t.path().join("b"), t.path().join("c"));
    import(
        &a,
        &[
            "saxpy",
            "multi/00-scale",
            "multi/01-step-ab",
            "multi/02-step-ba",
            "multi/03-step-ab",
        ],
    );
    import(
        &b,
        &[
            "reduction",
            "multi/02-step-ba",
            "multi/03-step-ab",
            "multi/04-step-ba",
            "multi/05-step-ab",
            "multi/06-step-ba",
            "multi/07-sum",
        ],
    );
    for s in [&a, &b, &c] {
        add(s, "r", "s3://rr-conc", &moto.endpoint());
    }
    let mut union: Vec<String> = ids(&a, None).into_iter().chain(ids(&b, None)).collect();
    union.sort();
    union.dedup();
    for _round in 0..2 {
        let pa = rr(&a, &["push", "r", "--all"]).spawn().unwrap();
        let pb = rr(&b, &["push", "r", "--all"]).spawn().unwrap();
        for p in [pa, pb] {
            let o = p.wait_with_output().unwrap();
            assert!(o.status.success());
        }
    }
    assert_eq!(ids(&c, Some("r:")), union);
    let pulled = json(&c, &["pull", "r", "--all", "--json"]);
    assert_eq!(pulled["recordings"].as_u64().unwrap() as usize, union.len());
    assert_eq!(ids(&c, None), union);
    ok(&c, &["verify", "--full"]);
    let from_a = ids(&a, None);
    same_exports(&a, &c, &from_a, &t.path().join("xa"));
    let from_b = ids(&b, None);
    same_exports(&b, &c, &from_b, &t.path().join("xb"));
}

#[test]
fn s3_bad_endpoint_bucket_credentials_and_corrupt_objects() {
    let moto = Moto::start(false);
    moto.create_bucket("rr-bad");
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    import(&a, &["saxpy"]);
    // Unreachable endpoint: nothing listens on the port.
    let dead = format!("http://127.0.0.1:{}", free_port());
    add(&a, "down", "s3://rr-bad", &dead);
    let (code, err) = fails(&a, &["push", "down", "--all"]);
    assert_eq!(code, 14, "{err}");
    assert!(err.contains("cannot reach the endpoint"), "{err}");
    // Missing bucket.
    add(&a, "nob", "s3://no-such-bucket", &moto.endpoint());
    let (code, err) = fails(&a, &["push", "nob", "--all"]);
    assert_eq!(code, 14, "{err}");
    assert!(err.contains("bucket does not exist"), "{err}");
    assert_eq!(fails(&a, &["ls", "nob:"]).0, 14);
    // Refused credentials: a second server that checks access keys.
    let strict = Moto::start(true);
    add(&a, "strict", "s3://rr-bad", &strict.endpoint());
    let (code, err) = fails(&a, &["push", "strict", "--all"]);
    assert_eq!(code, 14, "{err}");
    assert!(err.contains("credentials were refused"), "{err}");
    // No credentials at all.
    let o = rr(&a, &["push", "nob", "--all"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(14));
    assert!(String::from_utf8_lossy(&o.stderr).contains("AWS_ACCESS_KEY_ID"));
    // A corrupted (truncated) pack: the pull fails with CORRUPT and
    // imports nothing.
    add(&a, "ok", "s3://rr-bad", &moto.endpoint());
    ok(&a, &["push", "ok", "--all"]);
    add(&b, "ok", "s3://rr-bad", &moto.endpoint());
    let keys = moto.keys("rr-bad", "packs/");
    assert_eq!(keys.len(), 1);
    moto.put_object("rr-bad", &keys[0], b"not a pack at all, sorry");
    let (code, err) = fails(&b, &["pull", "ok", "--all"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("corrupt") && err.contains("packs/"), "{err}");
    assert!(ids(&b, None).is_empty());
    ok(&b, &["verify", "--full"]);
    // The fix: delete the bad pack and what names it, push again.
    for prefix in ["packs/", "index/", "recordings/"] {
        for k in moto.keys("rr-bad", prefix) {
            moto.delete_object("rr-bad", &k);
        }
    }
    ok(&a, &["push", "ok", "--all"]);
    ok(&b, &["pull", "ok", "--all"]);
    ok(&b, &["verify", "--full"]);
    assert_eq!(ids(&b, None), ids(&a, None));
}

#[test]
fn s3_images_push_and_pull() {
    let moto = Moto::start(false);
    moto.create_bucket("rr-img");
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    import(&a, &["saxpy"]);
    let lib = add_images(&a, t.path());
    add(&a, "lab", "s3://rr-img/lib", &moto.endpoint());
    let pushed = json(&a, &["push", "lab", "--all", "--images", "--json"]);
    assert_eq!(
        (pushed["images"].as_u64(), pushed["recordings"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(moto.keys("rr-img", "lib/images/").len(), 2);
    add(&b, "lab", "s3://rr-img/lib", &moto.endpoint());
    let pulled = json(&b, &["pull", "lab", "--images", "--json"]);
    assert_eq!(pulled["images"], 2);
    assert_eq!(images(&b), lib);
    ok(&b, &["verify", "--full"]);
    // A tampered image entry is refused: CORRUPT (5).
    let c = t.path().join("c");
    add(&c, "lab", "s3://rr-img/lib", &moto.endpoint());
    let key = moto.keys("rr-img", "lib/images/")[0].clone();
    moto.put_object("rr-img", &key, b"RRG2 not zstd");
    let (code, err) = fails(&c, &["pull", "lab", "--images"]);
    assert_eq!(code, 5, "{err}");
    assert!(images(&c).is_empty());
}

#[test]
fn s3_prunes_while_two_pushes_run_lose_nothing_a_push_reported() {
    let moto = Moto::start(false);
    moto.create_bucket("rr-prune");
    let t = tempfile::tempdir().unwrap();
    let (a, b, c, d) = (
        t.path().join("a"),
        t.path().join("b"),
        t.path().join("c"),
        t.path().join("d"),
    );
    import(
        &a,
        &[
            "saxpy",
            "multi/00-scale",
            "multi/01-step-ab",
            "multi/02-step-ba",
        ],
    );
    import(
        &b,
        &[
            "reduction",
            "multi/02-step-ba",
            "multi/03-step-ab",
            "multi/04-step-ba",
        ],
    );
    import(&c, &["saxpy", "globals"]);
    for s in [&a, &b, &c, &d] {
        add(s, "r", "s3://rr-prune", &moto.endpoint());
    }
    // c pushes, then removes its recordings from the remote: their data is
    // garbage for a prune, while a pushes saxpy's again.
    ok(&c, &["push", "r", "--all"]);
    let specs: Vec<String> = ids(&c, None)
        .iter()
        .map(|i| format!("r:{}", &i[..12]))
        .collect();
    let mut args = vec!["rm"];
    args.extend(specs.iter().map(String::as_str));
    ok(&c, &args);
    assert!(ids(&c, Some("r:")).is_empty());
    let mut reported: Vec<String> = Vec::new();
    let (mut pruned, mut busy) = (0, 0);
    for _round in 0..2 {
        let spawn = |s: &std::path::Path| {
            rr(s, &["push", "r", "--all", "--json"])
                .env("RRSTORE_REMOTE_PACK_BYTES", "200000")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let mut pushes = vec![spawn(&a), spawn(&b)];
        // Prune over and over while they run.
        while pushes.iter_mut().any(|p| p.try_wait().unwrap().is_none()) {
            let o = run(&c, &["remote", "prune", "r"]);
            match o.status.code() {
                Some(0) => pruned += 1,
                Some(14) => {
                    assert!(String::from_utf8_lossy(&o.stderr).contains("busy"), "{o:?}");
                    busy += 1
                }
                _ => panic!("prune failed: {o:?}"),
            }
        }
        for p in pushes {
            let o = p.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            for k in ["ids", "present_ids"] {
                for id in j[k].as_array().unwrap() {
                    reported.push(id.as_str().unwrap().to_string());
                }
            }
        }
    }
    // With no push running, a prune goes ahead.
    ok(&c, &["remote", "prune", "r"]);
    eprintln!("prunes during the pushes: {pruned} done, {busy} busy");
    reported.sort();
    reported.dedup();
    let mut union: Vec<String> = ids(&a, None).into_iter().chain(ids(&b, None)).collect();
    union.sort();
    union.dedup();
    assert_eq!(reported, union);
    // Everything a push reported is on the remote, whole.
    ok(&d, &["verify", "r:", "--read-data"]);
    let pulled = json(&d, &["pull", "r", "--all", "--json"]);
    assert_eq!(pulled["recordings"].as_u64().unwrap() as usize, union.len());
    assert_eq!(ids(&d, None), union);
    ok(&d, &["verify", "--full"]);
    // globals (removed, pushed by nobody since) is gone, and its data too.
    let v = json(&d, &["verify", "r:", "--json"]);
    assert_eq!(v["unindexed_packs"], 0, "{v}");
}
