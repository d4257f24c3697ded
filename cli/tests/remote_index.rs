//! Index objects with a fanout (spec/REMOTE.md, "Index objects with a
//! fanout") and pull durability (spec/STORE.md, "Pull durability") through
//! the real binary on file:// remotes: a store that never saw the remote
//! pulls a small recording reading only pieces of the index object and
//! gets the right bytes; remotes holding older RRX3 index objects stay
//! readable; a damaged fanout is reported as a damaged index object; a
//! pull writes one local pack; a pull killed after committing recordings
//! leaves them visible and the store valid.

mod remote_common;

use std::io::BufRead;
use std::path::{Path, PathBuf};

use remote_common::*;

/// The remote's index objects (path, bytes).
fn index_objects(rdir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    tree(&rdir.join("index"))
        .into_iter()
        .map(|(p, b)| (rdir.join("index").join(p), b))
        .collect()
}

/// Store `a` with globals (its ID returned) and the rest of the eleven
/// fixtures, pushed to file remote `r`; `env` for the push.
fn pushed(env: &[(&str, &str)]) -> (FileRemote, String) {
    let f = file_remote(&["globals"]);
    let globals = ids(&f.a, None).remove(0);
    import(&f.a, &["saxpy", "reduction", "multi"]);
    let mut c = rr(&f.a, &["push", "r", "--all"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (f, globals)
}

#[test]
fn a_cold_pull_of_a_small_recording_reads_only_pieces_of_the_index() {
    let (f, globals) = pushed(&[]);
    let idx = index_objects(&f.rdir);
    assert_eq!(idx.len(), 1);
    assert!(idx[0].1.starts_with(b"RRX4"));
    let size = idx[0].1.len() as u64;
    // A store holding saxpy whose cache holds the index (it pushed):
    // the metadata of pulling globals without reading any index object.
    let w = f.t.path().join("w");
    import(&w, &["saxpy"]);
    ok(&w, &["remote", "add", "r", &f.url]);
    ok(&w, &["push", "r", "--all"]);
    let warm = json(&w, &["pull", "r", &globals[..12], "--json"]);
    assert_eq!(warm["recordings"], 1, "{warm}");
    // A store holding saxpy, which never saw the remote, pulls globals.
    import(&f.b, &["saxpy"]);
    ok(&f.b, &["remote", "add", "r", &f.url]);
    let r = json(&f.b, &["pull", "r", &globals[..12], "--json"]);
    assert_eq!(r["recordings"], 1, "{r}");
    assert_eq!(r["chunk_bytes"], warm["chunk_bytes"]);
    let read = r["metadata_bytes"].as_u64().unwrap() - warm["metadata_bytes"].as_u64().unwrap();
    assert!(
        read < size / 2,
        "{read} bytes of an index object of {size} read: {r} vs {warm}"
    );
    ok(&f.b, &["verify", "--full"]);
    same_exports(&f.a, &f.b, std::slice::from_ref(&globals), f.t.path());
    // The cache did not take the partly read object as cached: the next
    // pull (everything) still finds every blob.
    let all = json(&f.b, &["pull", "r", "--all", "--json"]);
    assert_eq!(
        all.get("damaged")
            .map_or(0, |d| d.as_array().unwrap().len()),
        0,
        "{all}"
    );
    assert_eq!(ids(&f.b, None), f.all_now());
    ok(&f.b, &["verify", "--full"]);
    // A pull writes one local pack, not one per recording.
    let c = f.t.path().join("c");
    ok(&c, &["remote", "add", "r", &f.url]);
    let r = json(&c, &["pull", "r", "--all", "--json"]);
    assert_eq!(r["recordings"], 11, "{r}");
    assert_eq!(tree(&c.join("packs")).len(), 1, "{r}");
}

#[test]
fn remotes_holding_rrx3_index_objects_stay_readable() {
    let f = file_remote(&["globals"]);
    let globals = ids(&f.a, None).remove(0);
    import(&f.a, &["saxpy"]);
    let o = rr(&f.a, &["push", "r", "--all"])
        .env("RRSTORE_REMOTE_INDEX_FORMAT", "3")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let idx = index_objects(&f.rdir);
    assert!(idx.iter().all(|(_, b)| b.starts_with(b"RRX3")));
    // A new push beside it writes RRX4: the remote holds both.
    import(&f.a, &["reduction", "multi"]);
    ok(&f.a, &["push", "r", "--all"]);
    let idx = index_objects(&f.rdir);
    assert!(idx.iter().any(|(_, b)| b.starts_with(b"RRX4")));
    assert!(idx.iter().any(|(_, b)| b.starts_with(b"RRX3")));
    ok(&f.b, &["remote", "add", "r", &f.url]);
    let one = json(&f.b, &["pull", "r", &globals[..12], "--json"]);
    assert_eq!(one["recordings"], 1, "{one}");
    let all = json(&f.b, &["pull", "r", "--all", "--json"]);
    assert_eq!(
        all.get("damaged")
            .map_or(0, |d| d.as_array().unwrap().len()),
        0,
        "{all}"
    );
    assert_eq!(ids(&f.b, None), f.all_now());
    ok(&f.b, &["verify", "--full"]);
    ok(&f.b, &["verify", "r:", "--read-data"]);
}

#[test]
fn a_damaged_fanout_is_a_damaged_index_object() {
    let (f, globals) = pushed(&[]);
    let (path, mut body) = index_objects(&f.rdir).remove(0);
    // Every inner fanout slot past the entry count (same size, so only
    // the fanout is wrong).
    let bits = u32::from_le_bytes(body[4..8].try_into().unwrap());
    for b in 1..(1usize << bits) {
        let at = 24 + 4 * b;
        body[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    }
    std::fs::write(&path, &body).unwrap();
    let key = format!("index/{}", path.file_name().unwrap().to_string_lossy());
    // A store holding chunks looks the blobs up by ranges: the fanout
    // slots it reads are found damaged.
    let w = f.t.path().join("w");
    import(&w, &["saxpy"]);
    ok(&w, &["remote", "add", "r", &f.url]);
    let o = run(&w, &["pull", "r", &globals[..12], "--json"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("index object {key} left out: damaged fanout")),
        "{err}"
    );
    ok(&w, &["verify", "--full"]);
    // A new store reads the object whole, and finds it damaged too.
    ok(&f.b, &["remote", "add", "r", &f.url]);
    let o = run(&f.b, &["pull", "r", &globals[..12], "--json"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("index object {key} left out: damaged fanout")),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["recordings"], 0, "{r}");
    assert_eq!(r["damaged"].as_array().unwrap().len(), 1, "{r}");
    ok(&f.b, &["verify", "--full"]);
    // Read whole, it does not hash to its name.
    let (code, err) = fails(&f.a, &["verify", "r:"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains(&key), "{err}");
}

#[test]
fn a_pull_killed_after_committing_recordings_leaves_them_and_a_valid_store() {
    let (f, _) = pushed(&[]);
    let all = f.all_now();
    // Stop (then SIGKILL) once 3 recordings are committed: their commits
    // were not synced one by one, and the kill must not lose them.
    let s = f.t.path().join("k");
    ok(&s, &["remote", "add", "r", &f.url]);
    let mut child = rr(&s, &["pull", "r", "--all", "--json"])
        .env("RRSTORE_PULL_BATCH_BYTES", "65536")
        .env("RRSTORE_PULL_PAUSE_AFTER_RECORDINGS", "3")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "pull ended before pausing"
        );
        if line.contains("committed recording 3;") {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let have = ids(&s, None);
    assert_eq!(have.len(), 3, "{have:?}");
    assert!(have.iter().all(|h| all.contains(h)));
    ok(&s, &["verify", "--full"]);
    let resumed = json(&s, &["pull", "r", "--all", "--json"]);
    assert_eq!(resumed["present"], 3, "{resumed}");
    // Every chunk came before the first commit (the prefetch), so the
    // resumed pull fetches none.
    assert_eq!(resumed["chunk_bytes"], 0, "{resumed}");
    assert_eq!(ids(&s, None), all);
    ok(&s, &["verify", "--full"]);
    same_exports(&f.a, &s, &all, f.t.path());
}

impl FileRemoteExt for FileRemote {
    fn all_now(&self) -> Vec<String> {
        ids(&self.a, None)
    }
}

trait FileRemoteExt {
    /// Store `a`'s IDs now.
    fn all_now(&self) -> Vec<String>;
}

#[test]
fn a_new_store_reads_the_index_whole_and_says_so_in_its_trace() {
    let (f, _) = pushed(&[]);
    let idx = index_objects(&f.rdir);
    let (path, body) = &idx[0];
    let key = format!("index/{}", path.file_name().unwrap().to_string_lossy());
    let c = f.t.path().join("c");
    ok(&c, &["remote", "add", "r", &f.url]);
    let o = rr(&c, &["pull", "r", "--all", "--json"])
        .env("RRSTORE_REMOTE_TRACE", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["recordings"], 11, "{r}");
    // One line per request: "rrstore-trace AT TOOK VERB KEY [RANGE] NB".
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<Vec<&str>> = err
        .lines()
        .filter(|l| l.starts_with("rrstore-trace "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines.len() as u64,
        r["requests"].as_u64().unwrap(),
        "every request traced: {err}"
    );
    // A store without chunks needs about every blob: the index object is
    // read whole (cached for later pulls), never piece by piece.
    let on_index: Vec<&Vec<&str>> = lines.iter().filter(|l| l[4] == key).collect();
    assert_eq!(on_index.len(), 1, "{err}");
    assert_eq!(on_index[0][5], format!("{}B", body.len()), "{err}");
    // (With the layout marker's few bytes.)
    let index = r["received"]["index"].as_u64().unwrap();
    assert!(
        (body.len() as u64..body.len() as u64 + 64).contains(&index),
        "{r}"
    );
    ok(&c, &["verify", "--full"]);
    same_exports(&f.a, &c, &f.all_now(), f.t.path());
    // The next pull finds it in the cache: no GET of the index object.
    let o = rr(&c, &["pull", "r", "--all"])
        .env("RRSTORE_REMOTE_TRACE", "1")
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains(&format!("GET {key}")), "{err}");
}

/// The header rrstore's writer gives an RRX4 object of `size` bytes with
/// the fewest packs (what a cold lookup guesses, spec/REMOTE.md).
fn guessed_packs(size: u64) -> Option<u64> {
    // Today's writer, and the one before (one bucket fewer per entry).
    let v1 = |n: u64| (0..24).find(|k| n >> k <= 1).unwrap_or(24);
    let writes = |n: u64, k: u32| (v1(n) + 1).min(24) == k || v1(n) == k;
    (0..4096u64).find(|p| {
        (0..=24u32).any(|k| {
            let fixed = 24 + 32 * p + 4 * ((1u64 << k) + 1);
            size >= fixed && (size - fixed).is_multiple_of(49) && writes((size - fixed) / 49, k)
        })
    })
}

#[test]
fn a_cold_lookup_in_an_index_of_many_packs_finds_every_blob() {
    // Tiny packs: the index object names more packs than its size alone
    // tells (the guessed header is wrong, the slots are read again) and
    // a pack-name table too large to read whole (a round of pack names).
    // Whether the size alone misleads depends on the entry and pack
    // counts: the first pack size of a few where it does.
    let (f, globals, body) = ["2048", "1800", "2300", "1600", "2600", "3000"]
        .iter()
        .find_map(|bytes| {
            let (f, globals) = pushed(&[("RRSTORE_REMOTE_PACK_BYTES", bytes)]);
            let (_, body) = index_objects(&f.rdir).remove(0);
            let n_packs = u64::from(u32::from_le_bytes(body[8..12].try_into().unwrap()));
            assert!(32 * n_packs > 1024, "{n_packs} packs");
            (guessed_packs(body.len() as u64) != Some(n_packs)).then_some((f, globals, body))
        })
        .expect("a pack size whose index object's size misleads the guess");
    import(&f.b, &["saxpy"]);
    ok(&f.b, &["remote", "add", "r", &f.url]);
    let r = json(&f.b, &["pull", "r", &globals[..12], "--json"]);
    assert_eq!(r["recordings"], 1, "{r}");
    let index = r["received"]["index"].as_u64().unwrap();
    assert!(
        index < body.len() as u64 / 2,
        "{index} of {}: {r}",
        body.len()
    );
    ok(&f.b, &["verify", "--full"]);
    same_exports(&f.a, &f.b, std::slice::from_ref(&globals), f.t.path());
}
