//! Fleet replay (issue 21) through the real binary: `check --jobs 2` gives
//! the verdicts of `--jobs 1` in the same order, `--shard I/N` splits the
//! recordings into disjoint and complete subsets for N = 1..5, shards run
//! as separate processes write their results to a `file://` remote and to
//! an S3 server (moto) and `check --collect` gathers them (naming missing
//! shards), `bisect --label --jobs 2` finds the culprits of `--jobs 1`,
//! and `--device`/`--devices` refuse devices the machine lacks.

mod remote_common;

use std::path::Path;
use std::process::Child;

use remote_common::*;

/// Every LLVM 22 host fixture plus the two-kernel regression recording
/// (label `regress`) and its 8 image builds (`build-N`).
fn setup(s: &Path) {
    import(s, &["saxpy", "reduction", "globals", "multi"]);
    let images = rrstore_tests::fixtures().join("images");
    let rec = images.join("recording");
    ok(s, &["import", rec.to_str().unwrap(), "--label", "regress"]);
    for n in 0..8 {
        let img = images.join(format!("img-{n}.so"));
        ok(
            s,
            &[
                "image",
                "add",
                img.to_str().unwrap(),
                "--label",
                &format!("build-{n}"),
            ],
        );
    }
}

/// Exit code and JSON of `check --json ARGS`.
fn check(s: &Path, args: &[&str]) -> (i32, serde_json::Value) {
    let mut a = vec!["check", "--json"];
    a.extend_from_slice(args);
    let o = run(s, &a);
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("{a:?}: {e}: {}", String::from_utf8_lossy(&o.stderr));
    });
    (o.status.code().unwrap(), v)
}

/// (recording, verdict, regressed, changed vs recorded) of every row, in
/// the printed order.
fn verdicts(v: &serde_json::Value) -> Vec<(String, String, bool, String)> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["recording"].as_str().unwrap().to_string(),
                r["run"]["verdict"].as_str().unwrap().to_string(),
                r["regressed"].as_bool().unwrap(),
                r["changed_vs_recorded"].to_string(),
            )
        })
        .collect()
}

fn recordings(v: &serde_json::Value) -> Vec<String> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["recording"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn check_jobs_2_gives_the_verdicts_of_jobs_1_in_the_same_order() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    setup(&s);
    let (c1, one) = check(&s, &["--jobs", "1"]);
    let (c2, two) = check(&s, &["--jobs", "2"]);
    assert_eq!((c1, c2), (0, 0), "{one:#}\n{two:#}");
    assert_eq!(verdicts(&one).len(), 13);
    assert_eq!(verdicts(&one), verdicts(&two));
    // The order is the listing's.
    let listed: Vec<String> = json(&s, &["ls", "--sort", "name", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(recordings(&two), listed);
    // Every run kept its own output: recordings with the same image ran
    // side by side (per-replay scratch files).
    for r in two["rows"].as_array().unwrap() {
        assert_eq!(r["run"]["output_kept"], true, "{r:#}");
    }
    // A changed image: one regression, the other recording still checked.
    let (c1, one) = check(
        &s,
        &["--label", "regress", "--image", "build-4", "--jobs", "1"],
    );
    let (c2, two) = check(
        &s,
        &[
            "--label",
            "regress",
            "--image",
            "build-4",
            "--jobs",
            "2",
            "--use-cache",
        ],
    );
    assert_eq!((c1, c2), (1, 1), "{two:#}");
    assert_eq!(verdicts(&one), verdicts(&two));
    assert_eq!(two["regressed"], 1);
    assert_eq!(two["rows"].as_array().unwrap().len(), 2);
    let (c3, three) = check(
        &s,
        &["--label", "regress", "--image", "build-4", "--jobs", "2"],
    );
    assert_eq!(c3, 1);
    assert_eq!(verdicts(&one), verdicts(&three));
}

#[test]
fn shards_1_to_5_are_disjoint_and_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    import(&s, &["saxpy", "reduction", "globals", "multi"]);
    let all = ids(&s, None);
    assert_eq!(all.len(), 11);
    for n in 1..=5 {
        let mut seen: Vec<String> = Vec::new();
        for i in 0..n {
            let shard = format!("{i}/{n}");
            let (code, v) = check(&s, &["--shard", &shard, "--jobs", "2"]);
            assert_eq!(code, 0, "{shard}: {v:#}");
            seen.extend(recordings(&v));
        }
        seen.sort();
        assert_eq!(seen, all, "N={n}: every recording exactly once");
    }
    // The scheduler's environment, and clear errors without one.
    let o = rr(&s, &["check", "--json", "--shard", "auto"])
        .env("SLURM_ARRAY_TASK_ID", "4")
        .env("SLURM_ARRAY_TASK_MIN", "3")
        .env("SLURM_ARRAY_TASK_MAX", "4")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let slurm = recordings(&serde_json::from_slice(&o.stdout).unwrap());
    let (_, fixed) = check(&s, &["--shard", "1/2"]);
    assert_eq!(slurm, recordings(&fixed));
    let o = rr(&s, &["check", "--shard", "auto"])
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env("JOB_COMPLETION_INDEX", "0")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("auto/N"));
    // An empty shard passes; a glob that matches nothing at all does not.
    let (code, v) = check(&s, &["--kernel", "*main_l10", "--shard", "0/1"]);
    assert_eq!((code, v["rows"].as_array().unwrap().len()), (0, 1));
    let empty = (0..8)
        .map(|i| format!("{i}/8"))
        .find(|sh| {
            check(&s, &["--kernel", "*main_l10", "--shard", sh]).1["rows"] == serde_json::json!([])
        })
        .unwrap();
    assert_eq!(
        check(&s, &["--kernel", "*main_l10", "--shard", &empty]).0,
        0
    );
    let (code, _) = fails(&s, &["check", "--label", "nope", "--shard", "0/2"]);
    assert_eq!(code, 3);
    let (code, err) = fails(&s, &["check", "--shard", "3/3"]);
    assert_eq!(code, 2);
    assert!(err.contains("from 0 to 2"), "{err}");
}

/// Run shard `i` of `n` of run `name` in its own store: pull everything
/// from remote `lab`, check the shard, write the results to `lab:`.
fn shard_process(dir: &Path, i: usize, n: usize, name: &str, add: &dyn Fn(&Path)) -> Child {
    let s = dir.join(format!("{name}-node{i}"));
    add(&s);
    // Each node pulls only what its shard replays.
    let shard = format!("{i}/{n}");
    ok(&s, &["pull", "lab", "--all", "--shard", &shard]);
    rr(
        &s,
        &[
            "check",
            "--shard",
            &shard,
            "--run",
            name,
            "--results",
            "lab:",
            "--json",
        ],
    )
    .stdout(std::process::Stdio::null())
    .spawn()
    .unwrap()
}

/// Push the fixtures, run `n` shard processes at once, collect.
fn shard_and_collect(tmp: &Path, n: usize, add: &dyn Fn(&Path)) {
    let origin = tmp.join("origin");
    import(&origin, &["saxpy", "reduction", "globals", "multi"]);
    add(&origin);
    ok(&origin, &["push", "lab", "--all"]);
    let all = ids(&origin, None);
    let children: Vec<Child> = (0..n)
        .map(|i| shard_process(tmp, i, n, "nightly", add))
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    // The nodes pulled disjoint shards that together are every recording.
    let mut pulled: Vec<String> = (0..n)
        .flat_map(|i| ids(&tmp.join(format!("nightly-node{i}")), None))
        .collect();
    assert!((0..n).all(|i| ids(&tmp.join(format!("nightly-node{i}")), None).len() < all.len()));
    pulled.sort();
    let mut every = all.clone();
    every.sort();
    assert_eq!(pulled, every, "pull --shard: disjoint and complete");
    let collector = tmp.join("collector");
    add(&collector);
    let v = json(
        &collector,
        &["check", "--collect", "lab:", "--run", "nightly", "--json"],
    );
    assert_eq!(v["shards"], n);
    assert_eq!(v["missing"], serde_json::json!([]));
    let mut got = recordings(&v);
    got.sort();
    assert_eq!(got, all, "{v:#}");
    assert_eq!(v["regressed"], 0);
    // Each shard pushed its replays' history rows (spec/REMOTE.md, "Shared
    // history"): the remote's history covers every recording, without a pull.
    let rows = json(&collector, &["history", "lab:", "--json"]);
    let mut replayed: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["recording"].as_str().unwrap().to_string())
        .collect();
    replayed.sort();
    replayed.dedup();
    assert_eq!(replayed, all, "{rows:#}");
    // A shard that never reported: named, exit 3; an unknown run: exit 3.
    let c = shard_process(tmp, 1, n + 1, "partial", add);
    assert!(c.wait_with_output().unwrap().status.success());
    let (code, err) = fails(
        &collector,
        &["check", "--collect", "lab:", "--run", "partial"],
    );
    assert_eq!(code, 3, "{err}");
    let missing: Vec<String> = (0..=n).filter(|&i| i != 1).map(|i| i.to_string()).collect();
    assert!(
        err.contains(&format!("shard(s) {} of {}", missing.join(", "), n + 1)),
        "{err}"
    );
    let (code, err) = fails(
        &collector,
        &["check", "--collect", "lab:", "--run", "never"],
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no shard results for run `never`"), "{err}");
}

#[test]
fn shards_in_separate_processes_collect_through_a_file_remote() {
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("file://{}", tmp.path().join("remote").display());
    shard_and_collect(tmp.path(), 3, &|s| {
        ok(s, &["remote", "add", "lab", &url]);
    });
    // The objects are where spec/REMOTE.md says.
    let runs = tmp.path().join("remote/runs/nightly");
    let mut names: Vec<String> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "shard-0-of-3.json",
            "shard-1-of-3.json",
            "shard-2-of-3.json"
        ]
    );
}

#[cfg(feature = "s3")]
#[test]
fn shards_in_separate_processes_collect_through_s3() {
    let moto = Moto::start(false);
    moto.create_bucket("rr-fleet");
    let tmp = tempfile::tempdir().unwrap();
    let endpoint = moto.endpoint();
    shard_and_collect(tmp.path(), 2, &|s| {
        ok(
            s,
            &[
                "remote",
                "add",
                "lab",
                "s3://rr-fleet/ci",
                "--endpoint",
                &endpoint,
                "--allow-http",
            ],
        );
    });
    let keys = moto.keys("rr-fleet", "ci/runs/nightly/");
    assert_eq!(keys.len(), 2, "{keys:?}");
}

#[test]
fn results_to_a_directory_and_a_damaged_shard_file() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    import(&s, &["saxpy", "reduction"]);
    let dir = tmp.path().join("results");
    let d = dir.to_str().unwrap();
    for i in 0..2 {
        let shard = format!("{i}/2");
        ok(
            &s,
            &["check", "--shard", &shard, "--run", "r1", "--results", d],
        );
    }
    let out = ok(&s, &["check", "--collect", d, "--run", "r1"]);
    assert!(
        out.contains("run r1: 2 of 2 shard(s) reported; 2 recording(s), 0 regressed"),
        "{out}"
    );
    std::fs::write(dir.join("runs/r1/shard-1-of-2.json"), "{").unwrap();
    let (code, err) = fails(&s, &["check", "--collect", d, "--run", "r1"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("shard-1-of-2.json"), "{err}");
    let (code, _) = fails(&s, &["check", "--run", "../x", "--results", d]);
    assert_eq!(code, 4);
}

#[test]
fn bisect_label_jobs_2_finds_the_culprits_of_jobs_1() {
    let tmp = tempfile::tempdir().unwrap();
    let culprits = |jobs: &str| {
        let s = tmp.path().join(format!("s{jobs}"));
        setup(&s);
        let builds: Vec<String> = (0..8).map(|n| format!("build-{n}")).collect();
        let mut a = vec![
            "bisect", "--label", "regress", "--json", "--jobs", jobs, "--images",
        ];
        a.extend(builds.iter().map(String::as_str));
        let v = json(&s, &a);
        v["recordings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["kernel"].as_str().unwrap().to_string(),
                    r["culprit"].clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let one = culprits("1");
    assert_eq!(one.len(), 2);
    assert!(one.iter().any(|(_, c)| !c.is_null()), "{one:?}");
    assert_eq!(culprits("2"), one);
}

#[test]
fn devices_the_machine_lacks_are_refused_with_its_devices() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    import(&s, &["saxpy"]);
    let gpus = json(&s, &["devices", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["backend"] != "host" && b["available"] == true);
    if gpus {
        eprintln!("a GPU backend is usable here: the host-only refusals are not exercised");
        return;
    }
    let id = ids(&s, None).remove(0);
    for args in [
        &["check", "--device", "1"][..],
        &["check", "--devices", "0-1"],
        &["replay", "--device", "3", &id],
    ] {
        let (code, err) = fails(&s, args);
        assert_eq!(code, 8, "{args:?}: {err}");
        assert!(
            err.contains("host has no device") && err.contains("0 "),
            "{args:?}: {err}"
        );
    }
    let (code, _) = fails(&s, &["check", "--device", "0", "--devices", "all"]);
    assert_eq!(code, 2);
    let (code, v) = check(&s, &["--devices", "all"]);
    assert_eq!(code, 0, "{v:#}");
    let host = &json(&s, &["devices", "--json"])[0]["devices"][0];
    assert!(
        host["uuid"].as_str().unwrap().starts_with("host-"),
        "{host:#}"
    );
    assert!(host["memory_bytes"].as_u64().unwrap() > 0);
}
