//! Shared history (spec/REMOTE.md, "Shared history") through the real
//! binary: two stores on two "machines" (`RRSTORE_MACHINE`) replay the same
//! recording and push; a third store sees both rows with `history NAME:`
//! without pulling, pulls them (and pulling again adds none), rows going
//! A -> remote -> B -> remote -> A are never duplicated, and `history
//! --changes` names the machine among what differs. On a file:// remote
//! and on the moto S3 server; then a damaged batch, prune, and a layout 2
//! remote with its migration.

mod remote_common;

use std::path::Path;
use std::process::Output;

use remote_common::*;
use serde_json::Value;

const REDUCTION: &str = "reduction/__omp_offloading_fe00_9ae058_main_l10.json";

/// `rrstore` as machine `machine`, with `OMP_NUM_THREADS` = `threads`
/// (the reduction recording was made with 2: 1 gives another output).
fn on(machine: &str, threads: &str, store: &Path, args: &[&str]) -> Output {
    let mut c = rr(store, args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("OMP_") {
            c.env_remove(k);
        }
    }
    c.env("RRSTORE_MACHINE", machine)
        .env("OMP_NUM_THREADS", threads);
    c.output().unwrap()
}

fn ok_on(machine: &str, store: &Path, args: &[&str]) -> String {
    let o = on(machine, "2", store, args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json_on(machine: &str, store: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&ok_on(machine, store, args)).unwrap()
}

/// Import the reduction recording; its ID.
fn import_reduction(store: &Path) -> String {
    let p = fixtures().join(REDUCTION);
    ok(store, &["import", &p.to_string_lossy()]);
    ids(store, None).remove(0)
}

/// (machine, uid) of every row, sorted.
fn machines_and_uids(rows: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["machine"].as_str().unwrap().to_string(),
                r["uid"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The whole story on remote `r`, which `add` configures in a store.
fn two_machines_share_their_history(dir: &Path, add: &dyn Fn(&Path)) {
    let (a, b, c) = (dir.join("a"), dir.join("b"), dir.join("c"));
    let id = import_reduction(&a);
    add(&a);
    // Machine A: the recorded thread count, verified.
    let o = on("node-a", "2", &a, &["replay", &id[..12]]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let p = json_on("node-a", &a, &["push", "r", &id[..12], "--json"]);
    assert_eq!(
        (p["history_rows"].as_u64(), p["history_batches"].as_u64()),
        (Some(1), Some(1)),
        "{p}"
    );
    // Machine B pulls (A's row comes along), replays with one thread
    // (another output), pushes: only its own row is new to the remote.
    add(&b);
    let q = json_on("node-b", &b, &["pull", "r", "--all", "--json"]);
    assert_eq!(q["history_rows"], 1, "{q}");
    let o = on("node-b", "1", &b, &["replay", &id[..12]]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let p = json_on("node-b", &b, &["push", "r", "--all", "--json"]);
    assert_eq!(
        (p["present"].as_u64(), p["history_rows"].as_u64()),
        (Some(1), Some(1)),
        "{p}"
    );
    // A third store reads both rows on the remote without pulling.
    add(&c);
    let remote_rows = json(&c, &["history", "r:", "--json"]);
    let shared = machines_and_uids(&remote_rows);
    assert_eq!(shared.len(), 2, "{remote_rows:#}");
    assert_eq!(
        (shared[0].0.as_str(), shared[1].0.as_str()),
        ("node-a", "node-b")
    );
    assert_eq!(json(&c, &["history", "--json"]), Value::Array(vec![]));
    let text = ok(&c, &["history", &format!("r:{}", &id[..8])]);
    assert!(text.contains("node-a") && text.contains("node-b"), "{text}");
    // Pulled: the same rows, same identities; pulled again: nothing new.
    let q = json(&c, &["pull", "r", "--all", "--json"]);
    assert_eq!(q["history_rows"], 2, "{q}");
    assert_eq!(machines_and_uids(&json(&c, &["history", "--json"])), shared);
    let q = json(&c, &["pull", "r", "--all", "--json"]);
    assert_eq!(q["history_rows"], 0, "{q}");
    assert_eq!(machines_and_uids(&json(&c, &["history", "--json"])), shared);
    // A -> remote -> B -> remote -> A: A gets B's row once, and pushing
    // again sends nothing.
    let q = json_on("node-a", &a, &["pull", "r", "--all", "--json"]);
    assert_eq!(q["history_rows"], 1, "{q}");
    let p = json_on("node-a", &a, &["push", "r", "--all", "--json"]);
    assert_eq!(p["history_rows"], 0, "{p}");
    assert_eq!(machines_and_uids(&json(&a, &["history", "--json"])), shared);
    assert_eq!(
        machines_and_uids(&json(&c, &["history", "r:", "--json"])),
        shared
    );
    // --changes, of the remote and of a store: the outputs differ, and so
    // do the machines (and the launches).
    for args in [
        vec!["history", "r:", "--changes", "--json"],
        vec!["history", "--changes", "--json"],
    ] {
        let ch = json(&c, &args);
        let ch = &ch.as_array().unwrap()[0];
        assert_eq!(ch["recording"], id.as_str());
        let differs: Vec<&str> = ch["differs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap())
            .collect();
        assert!(differs.contains(&"machine"), "{args:?}: {ch:#}");
        let outputs = ch["outputs"].as_array().unwrap();
        assert_eq!(outputs.len(), 2, "{ch:#}");
        // Both replays may fall in the same second: their order is not
        // the point, that each output names its machine is.
        let mut machines: Vec<&str> = outputs
            .iter()
            .map(|o| o["machines"][0].as_str().unwrap())
            .collect();
        machines.sort();
        assert_eq!(machines, ["node-a", "node-b"], "{ch:#}");
    }
    let t = ok(&c, &["history", "r:", "--changes"]);
    assert!(
        t.contains("the runs differ in") && t.contains("machine"),
        "{t}"
    );
    assert!(
        t.contains("machines node-a") && t.contains("machines node-b"),
        "{t}"
    );
}

#[test]
fn file_remote_shares_history_between_machines() {
    let t = tempfile::tempdir().unwrap();
    let url = format!("file://{}", t.path().join("r").display());
    two_machines_share_their_history(t.path(), &|s| {
        ok(s, &["remote", "add", "r", &url]);
    });
    // Every batch decodes.
    let v = json(&t.path().join("c"), &["verify", "r:", "--json"]);
    assert_eq!(
        (v["history_batches"].as_u64(), v["history_rows"].as_u64()),
        (Some(2), Some(2)),
        "{v}"
    );
}

#[cfg(feature = "s3")]
#[test]
fn s3_remote_shares_history_between_machines() {
    let moto = Moto::start(false);
    moto.create_bucket("rr-hist");
    let t = tempfile::tempdir().unwrap();
    let endpoint = moto.endpoint();
    two_machines_share_their_history(t.path(), &|s| {
        ok(
            s,
            &[
                "remote",
                "add",
                "r",
                "s3://rr-hist/x",
                "--endpoint",
                &endpoint,
                "--allow-http",
            ],
        );
    });
    assert_eq!(moto.keys("rr-hist", "x/history/").len(), 2);
}

/// The files of the file remote at `rdir` under `history/`.
fn batches(rdir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = tree(&rdir.join("history"))
        .into_keys()
        .map(|k| rdir.join("history").join(k))
        .collect();
    v.sort();
    v
}

#[test]
fn a_damaged_batch_costs_only_its_rows() {
    let f = file_remote(&["saxpy"]);
    let id = f.all[0].clone();
    ok_on("node-a", &f.a, &["replay", &id[..12]]);
    ok(&f.a, &["push", "r", "--all"]);
    let [batch] = &batches(&f.rdir)[..] else {
        panic!("one batch expected")
    };
    let mut b = std::fs::read(batch).unwrap();
    let n = b.len() / 2;
    b[n] ^= 0x40;
    std::fs::write(batch, &b).unwrap();
    ok(&f.b, &["remote", "add", "r", &f.url]);
    let o = run(&f.b, &["pull", "r", "--all", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: history batch history/") && err.contains("left out"),
        "{err}"
    );
    let q: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (q["recordings"].as_u64(), q["history_rows"].as_u64()),
        (Some(1), Some(0)),
        "{q}"
    );
    assert_eq!(ids(&f.b, None), f.all);
    let (code, err) = fails(&f.b, &["verify", "r:"]);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("history/") && err.contains("do not hash"),
        "{err}"
    );
}

#[test]
fn prune_drops_the_rows_of_removed_recordings() {
    let f = file_remote(&["saxpy", "globals"]);
    for id in &f.all {
        ok_on("node-a", &f.a, &["replay", &id[..12]]);
    }
    // Two pushes, two batches.
    ok(&f.a, &["push", "r", &f.all[0][..12]]);
    ok(&f.a, &["push", "r", &f.all[1][..12]]);
    assert_eq!(batches(&f.rdir).len(), 2);
    ok(&f.a, &["rm", &format!("r:{}", &f.all[0][..12])]);
    let p = json(&f.a, &["remote", "prune", "r", "--json"]);
    assert_eq!(
        (
            p["history_rows_kept"].as_u64(),
            p["history_rows_dropped"].as_u64(),
            p["history_batches_written"].as_u64(),
            p["history_batches_deleted"].as_u64()
        ),
        // The kept row's batch has the bytes, so the name, of the second
        // push's: written again, and only the first push's is deleted.
        (Some(1), Some(1), Some(1), Some(1)),
        "{p}"
    );
    assert_eq!(batches(&f.rdir).len(), 1);
    let rows = json(&f.a, &["history", "r:", "--json"]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["recording"], f.all[1].as_str());
    // Nothing left to compact: nothing written.
    let p = json(&f.a, &["remote", "prune", "r", "--json"]);
    assert_eq!(p["history_batches_written"], 0, "{p}");
    assert_eq!(batches(&f.rdir).len(), 1);
}

#[test]
fn a_layout_2_remote_shares_history_and_migration_keeps_it() {
    let f = file_remote(&["saxpy"]);
    let id = f.all[0].clone();
    ok_on("node-a", &f.a, &["replay", &id[..12]]);
    let mut c = rr(&f.a, &["push", "r", "--all", "--json"]);
    let o = c.env("RRSTORE_REMOTE_LAYOUT", "2").output().unwrap();
    assert!(o.status.success(), "{o:?}");
    let p: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (p["layout"].as_u64(), p["history_rows"].as_u64()),
        (Some(2), Some(1)),
        "{p}"
    );
    ok(&f.b, &["remote", "add", "r", &f.url]);
    let q = json(&f.b, &["pull", "r", "--all", "--json"]);
    assert_eq!(
        (q["layout"].as_u64(), q["history_rows"].as_u64()),
        (Some(2), Some(1)),
        "{q}"
    );
    let mine = machines_and_uids(&json(&f.a, &["history", "--json"]));
    assert_eq!(machines_and_uids(&json(&f.b, &["history", "--json"])), mine);
    ok(&f.a, &["remote", "migrate", "r"]);
    assert_eq!(
        machines_and_uids(&json(&f.b, &["history", "r:", "--json"])),
        mine
    );
    assert_eq!(mine[0].0, "node-a");
}
