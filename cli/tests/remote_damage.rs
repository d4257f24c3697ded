//! Remotes that were damaged or left half-written, through the real binary:
//! a corrupt manifest costs only its own recording in `pull --all`,
//! `pull --kernel/--label` and `ls NAME:` (exit 5 after the rest), temporary files of interrupted pushes are never
//! taken for objects and the next push removes them, and an `http://` S3
//! endpoint the remote does not allow names `--allow-http`.

mod remote_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use remote_common::*;

/// Every file under `dir`, as paths relative to it.
fn files(dir: &Path) -> Vec<PathBuf> {
    tree(dir).into_keys().collect()
}

#[test]
fn pull_all_pulls_every_intact_recording_and_names_the_damaged_one() {
    let FileRemote {
        t,
        a,
        b,
        rdir,
        url,
        all,
    } = file_remote(&ELEVEN);
    assert_eq!(all.len(), 11);
    ok(&a, &["push", "r", "--all"]);
    // Damage the manifest of one recording in the middle of the list.
    let bad = all[5].clone();
    let man = corrupt_manifest(&rdir, &bad);

    ok(&b, &["remote", "add", "r", &url]);
    let o = run(&b, &["pull", "r", "--all", "--json"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("recording {bad} was not pulled")) && err.contains("corrupt"),
        "{err}"
    );
    assert!(
        err.contains("1 recording(s) on remote `r` are damaged"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["recordings"], 10, "{report}");
    assert_eq!(report["damaged"][0]["id"], bad.as_str(), "{report}");
    let intact: Vec<String> = all.iter().filter(|id| **id != bad).cloned().collect();
    assert_eq!(ids(&b, None), intact);
    same_exports(&a, &b, &intact, t.path());

    // Once repaired (pushed again from a store that has it), it comes too.
    std::fs::remove_file(&man).unwrap();
    ok(&a, &["push", "r", "--all"]);
    let again = json(&b, &["pull", "r", "--all", "--json"]);
    assert_eq!(
        (again["recordings"].as_u64(), again["present"].as_u64()),
        (Some(1), Some(10))
    );
    assert!(again.get("damaged").is_none(), "{again}");
}

#[test]
fn ls_and_filtered_pulls_skip_a_corrupt_manifest_and_name_it() {
    let FileRemote {
        t,
        a,
        rdir,
        url,
        all,
        ..
    } = file_remote(&ELEVEN);
    ok(&a, &["push", "r", "--all"]);
    let bad = all[5].clone();
    corrupt_manifest(&rdir, &bad);
    let intact: Vec<String> = all.iter().filter(|id| **id != bad).cloned().collect();
    let names_bad = |err: &str| {
        err.contains(&bad)
            && err.contains("corrupt")
            && err.contains("1 recording(s) on remote `r` are damaged")
    };

    // `ls r:`: every intact recording, in JSON and as text, then exit 5.
    let o = run(&a, &["ls", "r:", "--json"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(names_bad(&err), "{err}");
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut listed: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    listed.sort();
    assert_eq!(listed, intact);
    let o = run(&a, &["ls", "r:"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.lines().count(), 1 + intact.len(), "{text}");
    assert!(names_bad(&String::from_utf8_lossy(&o.stderr)), "{o:?}");

    // `pull --kernel` / `--label`: every intact match is pulled, then exit 5.
    for (store, flag, glob) in [
        ("b", "--kernel", "__omp_offloading_*"),
        ("c", "--label", "fix*"),
    ] {
        let s = t.path().join(store);
        ok(&s, &["remote", "add", "r", &url]);
        let o = run(&s, &["pull", "r", flag, glob, "--json"]);
        assert_eq!(o.status.code(), Some(5), "{flag}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            names_bad(&err) && err.contains(&format!("recording {bad} was not pulled")),
            "{flag}: {err}"
        );
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["recordings"], 10, "{flag}: {report}");
        assert_eq!(report["damaged"][0]["id"], bad.as_str(), "{flag}: {report}");
        assert_eq!(ids(&s, None), intact, "{flag}");
    }
}

use rrstore_tests::temp_name_host as host;

fn plant(path: &Path, age: Duration) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, b"half an object").unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

#[test]
fn temporary_files_of_interrupted_pushes_are_ignored_and_removed() {
    // `_t` keeps the scratch directory for the test's length.
    let FileRemote {
        t: _t,
        a,
        b,
        rdir,
        url,
        ..
    } = file_remote(&["saxpy", "globals"]);
    ok(&a, &["push", "r", "--all"]);
    // A push leaves only objects: nothing under tmp/, no staging names.
    let pushed = files(&rdir);
    assert!(
        pushed
            .iter()
            .all(|p| !p.starts_with("tmp") && !p.to_string_lossy().contains('#')),
        "{pushed:?}"
    );

    // What killed pushes leave: this rrstore's temporary file of a process
    // that is gone (pid above any pid_max), another machine's, old and
    // recent, and an older rrstore's `<key>#1` beside a real pack.
    let chunk = pushed
        .iter()
        .find(|p| p.starts_with("packs"))
        .unwrap()
        .clone();
    let legacy = rdir.join(format!("{}#1", chunk.display()));
    let dead = rdir.join("tmp").join(format!("{}.4194999.3", host()));
    let old = rdir.join("tmp/elsewhere.77.0");
    let recent = rdir.join("tmp/elsewhere.78.0");
    let hour = Duration::from_secs(3600);
    plant(&legacy, 2 * hour);
    plant(&dead, Duration::ZERO);
    plant(&old, 2 * hour);
    plant(&recent, Duration::from_secs(60));

    // Readers never see them.
    let before = ids(&a, None);
    assert_eq!(ids(&a, Some("r:")), before);
    ok(&b, &["remote", "add", "r", &url]);
    let pulled = json(&b, &["pull", "r", "--all", "--json"]);
    assert_eq!(pulled["recordings"], 2);
    ok(&b, &["verify", "--full"]);

    // The next push (with nothing to send) removes the stale ones and keeps
    // the one another machine may still be writing.
    let o = ok(&a, &["push", "r", "--all"]);
    assert!(
        o.contains("removed 3 stale temporary file(s) left by interrupted pushes"),
        "{o}"
    );
    assert!(!legacy.exists() && !dead.exists() && !old.exists());
    assert!(recent.exists());
    assert!(rdir.join(&chunk).exists());
    let again = json(&a, &["push", "r", "--all", "--json"]);
    assert_eq!(again["temporaries_removed"], 0);
    assert_eq!(ids(&a, Some("r:")), before);
}

#[test]
fn an_http_endpoint_without_allow_http_names_the_flag() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    ok(
        &s,
        &[
            "remote",
            "add",
            "lab",
            "s3://rr-bucket",
            "--endpoint",
            &endpoint,
        ],
    );
    for args in [
        vec!["ls", "lab:"],
        vec!["pull", "lab", "--all"],
        vec!["push", "lab", "--all"],
    ] {
        let o = rr(&s, &args).env_remove("AWS_ALLOW_HTTP").output().unwrap();
        assert_eq!(o.status.code(), Some(14), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--allow-http") && err.contains(&endpoint),
            "{args:?}: {err}"
        );
    }
    // Allowed (flag or variable): the request is made (and finds nothing
    // listening), so the error is about reaching the endpoint.
    let o = rr(&s, &["ls", "lab:"])
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(14));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("--allow-http"),
        "{o:?}"
    );
}

#[test]
fn a_part_object_naming_another_parts_tree_is_found_by_the_part_check() {
    let FileRemote {
        t: _t,
        a,
        b,
        rdir,
        url,
        all,
    } = file_remote(&["saxpy"]);
    let id = all[0].clone();
    let mut push = rr(&a, &["push", "r", "--all"]);
    let o = push.env("RRSTORE_REMOTE_LAYOUT", "2").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The arena before and after the launch: same length, other bytes.
    let show = json(&a, &["show", &id, "--json"]);
    let part = |role: &str| {
        let p = show["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["role"] == role)
            .unwrap();
        let h = p["blake3"].as_str().unwrap().to_string();
        (rdir.join("parts").join(&h[..2]).join(&h), p["len"].as_u64())
    };
    let ((input, n_in), (output, n_out)) = (part("input"), part("output"));
    assert_eq!(n_in, n_out);
    // Swapped: each part object describes a well-formed tree of intact
    // nodes and chunks, of the right length, that assembles the other part.
    let (bi, bo) = (
        std::fs::read(&input).unwrap(),
        std::fs::read(&output).unwrap(),
    );
    assert_ne!(bi, bo);
    std::fs::write(&input, &bo).unwrap();
    std::fs::write(&output, &bi).unwrap();
    ok(&b, &["remote", "add", "r", &url]);
    let o = run(&b, &["pull", "r", "--all"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("recording {id} was not pulled")) && err.contains("do not hash"),
        "{err}"
    );
    assert!(ids(&b, None).is_empty());
    ok(&b, &["verify", "--full"]);
}
