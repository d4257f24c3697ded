//! The arena cache (`arena_cache` in the configuration) through the real
//! binary: a replay's arena is a held slot on tmpfs, bytes an earlier
//! replay left there never reach the next one, and the limit 0 removes the
//! slots.

mod store_common;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use rrstore_tests::fixtures;
use rrstore_tests::output::{json, text};

const GLOBALS: &str = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13";
const SAXPY: &str = "llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13";

fn replay(store: &Path, config: &Path, dir: &Path, rec: &str) -> Output {
    let d = fixtures().join(format!("{rec}.json"));
    store_common::command()
        .arg("--store")
        .arg(store)
        .args(["replay", d.to_str().unwrap(), "--json"])
        .env("OMP_NUM_THREADS", "2")
        .env("RRSTORE_CONFIG", config)
        .env("RRSTORE_ARENA_CACHE_DIR", dir)
        .env_remove("RRSTORE_DIR")
        .output()
        .unwrap()
}

fn slots(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn replays_use_a_held_slot_and_never_see_what_the_last_one_left() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let config = tmp.path().join("config.toml");
    std::fs::write(&config, "arena_cache = \"64MiB\"\n").unwrap();
    let dir = PathBuf::from(format!("/dev/shm/rrstore-cli-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    for rec in [GLOBALS, SAXPY, GLOBALS] {
        let o = replay(&store, &config, &dir, rec);
        assert_eq!(o.status.code(), Some(0), "{rec}: {}", text(&o));
        let v = json(&o);
        assert_eq!(v["verdict"], "verified", "{rec}: {}", text(&o));
        assert_eq!(v["timing"]["arena_memory"], "held", "{rec}: {v}");
        let s = slots(&dir);
        assert_eq!(s.len(), 1, "one slot serves consecutive replays: {s:?}");
        // What a hostile or merely earlier kernel could leave behind.
        let len = std::fs::metadata(&s[0]).unwrap().len() as usize;
        std::fs::write(&s[0], vec![0xffu8; len]).unwrap();
    }
    // Off: the next replay maps fresh memory and removes the slot.
    std::fs::write(&config, "arena_cache = 0\n").unwrap();
    let o = replay(&store, &config, &dir, SAXPY);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["timing"]["arena_memory"], "transparent");
    assert!(slots(&dir).is_empty(), "{:?}", slots(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}
