//! Remote layout 3 (spec/REMOTE.md, "Version 3") through the real binary:
//! pack and index objects, the local index cache refreshed incrementally,
//! requests in proportion to the new data, damage that stays with the
//! recordings using it, `verify NAME: [--read-data]`, and layout 2 remotes
//! that stay readable until `remote migrate` converts them.

mod remote_common;

use std::path::Path;
use std::process::Output;

use remote_common::*;

/// `rrstore` with extra environment variables.
fn run_env(store: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = rr(store, args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn json_env(store: &Path, env: &[(&str, &str)], args: &[&str]) -> serde_json::Value {
    let o = run_env(store, env, args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn count(dir: &Path) -> usize {
    if dir.exists() {
        tree(dir).len()
    } else {
        0
    }
}

#[test]
fn layout_2_remotes_stay_readable_and_migrate_converts_them() {
    let t = tempfile::tempdir().unwrap();
    let (a, b, c) = (t.path().join("a"), t.path().join("b"), t.path().join("c"));
    let rdir = t.path().join("r");
    let url = format!("file://{}", rdir.display());
    import(&a, &["saxpy", "globals", "multi"]);
    let all = ids(&a, None);
    ok(&a, &["remote", "add", "r", &url]);
    // A layout 2 remote (as an older rrstore writes it)...
    let first = json_env(
        &a,
        &[("RRSTORE_REMOTE_LAYOUT", "2")],
        &["push", "r", &all[0][..8], "--json"],
    );
    assert_eq!(first["layout"], 2);
    // ...keeps layout 2 when pushed to again: older rrstores still read it.
    let rest = json(&a, &["push", "r", "--all", "--json"]);
    assert_eq!(
        (rest["layout"].as_u64(), rest["packs"].as_u64()),
        (Some(2), Some(0))
    );
    assert!(!rdir.join("rrstore-layout").exists());
    assert!(count(&rdir.join("chunks")) > 0);
    let manifests = |magic: &[u8]| {
        let files = tree(&rdir.join("recordings"));
        assert_eq!(files.len(), all.len());
        for (f, b) in &files {
            assert!(b.starts_with(magic), "{}", f.display());
        }
        files.values().map(|b| b.len() as u64).sum::<u64>()
    };
    let v2_bytes = manifests(b"RRM2");
    let first_v2 = rdir.join("recordings").join(&all[0]);
    let first_v2_body = std::fs::read(&first_v2).unwrap();
    ok(&b, &["remote", "add", "r", &url]);
    let pulled = json(&b, &["pull", "r", "--all", "--json"]);
    assert_eq!(pulled["recordings"].as_u64().unwrap() as usize, all.len());
    ok(&b, &["verify", "r:", "--read-data"]);

    // Migrate: packs and index, no layout 2 object left, same recordings.
    let m = json(&a, &["remote", "migrate", "r", "--json"]);
    assert_eq!(m["from"], 2);
    assert!(m["packs"].as_u64().unwrap() >= 1, "{m}");
    assert_eq!(m["manifests"].as_u64().unwrap() as usize, all.len());
    assert!(rdir.join("rrstore-layout").exists());
    for d in ["chunks", "lists", "parts"] {
        assert_eq!(count(&rdir.join(d)), 0, "{d}");
    }
    let o = ok(&a, &["verify", "r:", "--read-data"]);
    assert!(o.contains("(layout 3)") && o.contains("ok"), "{o}");
    // Layout 3 manifests use the fixed dictionary (spec/REMOTE.md
    // "Manifest dictionary"): well under the zstd-only size.
    let v3_bytes = manifests(b"RRM3");
    assert!(v3_bytes * 2 < v2_bytes, "{v3_bytes} vs {v2_bytes}");
    ok(&c, &["remote", "add", "r", &url]);
    let pulled = json(&c, &["pull", "r", "--all", "--json"]);
    assert_eq!(pulled["layout"], 3);
    assert_eq!(ids(&c, None), all);
    same_exports(&a, &c, &all, t.path());
    // Migrating again has nothing to do.
    assert!(ok(&a, &["remote", "migrate", "r"]).contains("already layout 3"));
    // A new recording pushed after the migration goes into a pack; b
    // (whose cache still knows nothing) pulls it.
    import(&a, &["reduction"]);
    let p = json(&a, &["push", "r", "--all", "--json"]);
    assert_eq!(
        (p["layout"].as_u64(), p["packs"].as_u64()),
        (Some(3), Some(1))
    );
    let again = json(&b, &["pull", "r", "--all", "--json"]);
    assert_eq!(again["recordings"], 1);
    ok(&b, &["verify", "--full"]);

    // An RRM2 manifest on a layout 3 remote (what rrstore wrote there
    // before RRM3) is read beside RRM3 ones.
    std::fs::write(&first_v2, &first_v2_body).unwrap();
    let d = t.path().join("d");
    ok(&d, &["remote", "add", "r", &url]);
    let pulled = json(&d, &["pull", "r", "--all", "--json"]);
    assert_eq!(
        pulled["recordings"].as_u64().unwrap() as usize,
        all.len() + 1
    );
    assert!(ids(&d, None).contains(&all[0]));
    ok(&d, &["verify", "--full"]);
    ok(&a, &["verify", "r:"]);
}

#[test]
fn pushes_cost_requests_in_proportion_to_the_new_data() {
    let t = tempfile::tempdir().unwrap();
    let (a, b, c) = (t.path().join("a"), t.path().join("b"), t.path().join("c"));
    let rdir = t.path().join("r");
    let url = format!("file://{}", rdir.display());
    // Small packs so that one push makes several.
    let small = [("RRSTORE_REMOTE_PACK_BYTES", "300000")];
    import(&a, &["saxpy", "globals", "multi"]);
    ok(&a, &["remote", "add", "r", &url]);
    let p = json_env(&a, &small, &["push", "r", "--all", "--json"]);
    let packs = p["packs"].as_u64().unwrap();
    assert!(packs >= 3, "{p}");
    assert_eq!(count(&rdir.join("packs")) as u64, packs);
    assert_eq!(count(&rdir.join("index")), 1);
    assert_eq!(count(&rdir.join("chunks")), 0);
    // A new remote: GET marker (none), LIST recordings/ (empty), PUT
    // marker; then the shared lock (PUT, LIST locks/, DELETE), LIST
    // index/, LIST recordings/, the packs, one index object, the
    // manifests: no listing of chunks, ever.
    let manifests = p["recordings"].as_u64().unwrap();
    assert_eq!(
        p["requests"].as_u64().unwrap(),
        8 + packs + 1 + manifests,
        "{p}"
    );
    // One more recording from the same store: its cache is up to date, so
    // the push costs GET marker, the lock (3), LIST index/, LIST
    // recordings/, the new data's packs, one index object, one manifest.
    import(&a, &["reduction"]);
    let q = json_env(&a, &small, &["push", "r", "--all", "--json"]);
    let (qp, qr) = (
        q["packs"].as_u64().unwrap(),
        q["recordings"].as_u64().unwrap(),
    );
    assert_eq!(q["requests"].as_u64().unwrap(), 6 + qp + 1 + qr, "{q}");
    assert_eq!(count(&rdir.join("index")), 2);
    // A store that has never seen the remote reads each index object once;
    // the next pull reads none again.
    ok(&b, &["remote", "add", "r", &url]);
    import(&b, &["saxpy"]);
    let r = json(&b, &["pull", "r", "--all", "--json"]);
    assert!(r["recordings"].as_u64().unwrap() > 0);
    ok(&b, &["verify", "--full"]);
    let again = json(&b, &["pull", "r", "--all", "--json"]);
    // GET marker, LIST index/, LIST recordings/, LIST history/ (new
    // replay history rows of the recordings present) and nothing else.
    assert_eq!(again["requests"], 4, "{again}");
    // Ranged GETs coalesce neighbouring blobs: fewer requests than chunks
    // for a pull into an empty store, manifests, part objects and tree
    // nodes included (one GET per blob would be well over).
    ok(&c, &["remote", "add", "r", &url]);
    let full = json(&c, &["pull", "r", "--all", "--json"]);
    let chunks = full["chunks"].as_u64().unwrap();
    assert!(full["requests"].as_u64().unwrap() < chunks, "{full}");
    assert_eq!(ids(&c, None), ids(&a, None));
    ok(&c, &["verify", "--full"]);
}

#[test]
fn a_damaged_pack_costs_only_the_recordings_that_use_it() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let rdir = t.path().join("r");
    let url = format!("file://{}", rdir.display());
    import(&a, &["saxpy"]);
    ok(&a, &["remote", "add", "r", &url]);
    ok(&a, &["push", "r", "--all"]);
    let first = tree(&rdir.join("packs"));
    // globals goes up in a pack of its own.
    import(&a, &["globals"]);
    let globals: Vec<String> = ids(&a, None)
        .into_iter()
        .filter(|id| !ids(&a, Some("r:")).contains(id))
        .collect();
    ok(&a, &["push", "r", "--all"]);
    let (key, body) = tree(&rdir.join("packs"))
        .into_iter()
        .find(|(k, _)| !first.contains_key(k))
        .unwrap();
    let mut bad = body.clone();
    let n = bad.len();
    bad[n / 3] ^= 0x20;
    std::fs::write(rdir.join("packs").join(&key), &bad).unwrap();

    // Structure is intact; every byte is not, and the pack is named.
    ok(&a, &["verify", "r:"]);
    let (code, err) = fails(&a, &["verify", "r:", "--read-data"]);
    assert_eq!(code, 5, "{err}");
    let name = key.file_name().unwrap().to_string_lossy().to_string();
    assert!(err.contains(&name) && err.contains("packs/"), "{err}");

    // pull --all brings every recording that does not need the pack.
    ok(&b, &["remote", "add", "r", &url]);
    let o = run(&b, &["pull", "r", "--all", "--json"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let damaged: Vec<String> = report["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !damaged.is_empty() && damaged.iter().all(|d| globals.contains(d)),
        "{report}"
    );
    let pulled = ids(&b, None);
    assert!(!pulled.is_empty(), "{report}");
    assert!(pulled.iter().all(|id| !damaged.contains(id)));
    ok(&b, &["verify", "--full"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("packs/") && err.contains("corrupt"), "{err}");
}

#[test]
fn an_interrupted_push_leaves_only_unindexed_packs() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let rdir = t.path().join("r");
    let url = format!("file://{}", rdir.display());
    import(&a, &["saxpy"]);
    ok(&a, &["remote", "add", "r", &url]);
    ok(&a, &["push", "r", "--all"]);
    // As if the push had stopped after its packs: no index, no manifest.
    std::fs::remove_dir_all(rdir.join("index")).unwrap();
    std::fs::remove_dir_all(rdir.join("recordings")).unwrap();
    let o = ok(&a, &["verify", "r:"]);
    assert!(
        o.contains("0 recording(s)") && o.contains("1 unindexed"),
        "{o}"
    );
    assert!(ids(&a, Some("r:")).is_empty());
    // The next push sends everything again (its cache dropped the index
    // object that is gone) and the remote is whole.
    let p = json(&a, &["push", "r", "--all", "--json"]);
    assert!(p["chunks"].as_u64().unwrap() > 0, "{p}");
    ok(&b, &["remote", "add", "r", &url]);
    ok(&b, &["pull", "r", "--all"]);
    ok(&b, &["verify", "--full"]);
    assert_eq!(ids(&b, None), ids(&a, None));
}

#[test]
fn rm_and_prune_free_what_no_manifest_needs_and_respect_locks() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let rdir = t.path().join("r");
    let url = format!("file://{}", rdir.display());
    import(&a, &["saxpy", "globals", "multi"]);
    ok(&a, &["remote", "add", "r", &url]);
    ok(&a, &["push", "r", "--all"]);
    let all = ids(&a, None);
    let size = |d: &Path| tree(d).values().map(|v| v.len()).sum::<usize>();
    let before = size(&rdir.join("packs"));
    // A push in progress on another machine holds a shared lock: prune
    // refuses (exit 14) and deletes nothing.
    let lock = rdir.join("locks/shared-elsewhere-77-0");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    std::fs::write(&lock, b"{}").unwrap();
    let (code, err) = fails(&a, &["remote", "prune", "r"]);
    assert_eq!(code, 14, "{err}");
    assert!(
        err.contains("busy") && err.contains("shared-elsewhere-77-0"),
        "{err}"
    );
    // One not refreshed for over 30 minutes is a dead process's: removed.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_modified(old)
        .unwrap();
    // Nothing removed yet: nothing to free.
    let j = json(&a, &["remote", "prune", "r", "--json"]);
    assert_eq!(
        (j["dead_blobs"].as_u64(), j["packs_deleted"].as_u64()),
        (Some(0), Some(0)),
        "{j}"
    );
    assert!(!lock.exists());
    // rm NAME:ID removes manifests; prune then frees their data and keeps
    // every other recording whole.
    let gone: Vec<&String> = all
        .iter()
        .filter(|i| !i.starts_with("d7e4"))
        .take(3)
        .collect();
    let specs: Vec<String> = gone.iter().map(|i| format!("r:{}", &i[..10])).collect();
    let mut args = vec!["rm"];
    args.extend(specs.iter().map(String::as_str));
    let o = ok(&a, &args);
    assert_eq!(
        o.lines().filter(|l| l.starts_with("removed r:")).count(),
        3,
        "{o}"
    );
    let left: Vec<String> = all.iter().filter(|i| !gone.contains(i)).cloned().collect();
    assert_eq!(ids(&a, Some("r:")), left);
    let j = json(&a, &["remote", "prune", "r", "--json"]);
    assert!(j["dead_blobs"].as_u64().unwrap() > 0, "{j}");
    assert!(size(&rdir.join("packs")) < before);
    assert_eq!(count(&rdir.join("index")), 1);
    ok(&a, &["verify", "r:", "--read-data"]);
    ok(&b, &["remote", "add", "r", &url]);
    ok(&b, &["pull", "r", "--all"]);
    assert_eq!(ids(&b, None), left);
    ok(&b, &["verify", "--full"]);
    // Pushed again, a removed recording comes back whole.
    let p = json(&a, &["push", "r", "--all", "--json"]);
    assert_eq!(p["recordings"], 3);
    ok(&a, &["verify", "r:", "--read-data"]);

    // A layout 2 remote cannot be pruned before it is migrated.
    let c = t.path().join("c");
    import(&c, &["saxpy"]);
    let url2 = format!("file://{}", t.path().join("r2").display());
    ok(&c, &["remote", "add", "r2", &url2]);
    let o = run_env(
        &c,
        &[("RRSTORE_REMOTE_LAYOUT", "2")],
        &["push", "r2", "--all"],
    );
    assert!(o.status.success());
    let (code, err) = fails(&c, &["remote", "prune", "r2"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("rrstore remote migrate r2"), "{err}");
}

#[test]
fn a_damaged_index_object_is_named_and_costs_only_what_it_lists() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let rdir = t.path().join("r");
    let url = format!("file://{}", rdir.display());
    import(&a, &["saxpy"]);
    ok(&a, &["remote", "add", "r", &url]);
    ok(&a, &["push", "r", "--all"]);
    let first: Vec<_> = tree(&rdir.join("index")).into_keys().collect();
    import(&a, &["globals"]);
    ok(&a, &["push", "r", "--all"]);
    // Damage the first push's index object (saxpy's blobs).
    let key = &first[0];
    let path = rdir.join("index").join(key);
    let mut body = std::fs::read(&path).unwrap();
    let n = body.len();
    body[n / 2] ^= 1;
    std::fs::write(&path, &body).unwrap();
    let (code, err) = fails(&a, &["verify", "r:"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains(&format!("index/{}", key.display())), "{err}");
    // A store that never saw the remote: warned, saxpy left out as
    // damaged, globals (in the other index object) pulled.
    ok(&b, &["remote", "add", "r", &url]);
    let o = run(&b, &["pull", "r", "--all", "--json"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: index object index/") && err.contains("left out"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report["recordings"].as_u64().unwrap() >= 1, "{report}");
    assert!(
        !report["damaged"].as_array().unwrap().is_empty(),
        "{report}"
    );
    ok(&b, &["verify", "--full"]);
}
