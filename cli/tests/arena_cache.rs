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

fn devices(config: &Path, dir: &Path, json: bool) -> Output {
    let mut c = store_common::command();
    c.arg("devices");
    if json {
        c.arg("--json");
    }
    c.env("RRSTORE_CONFIG", config)
        .env("RRSTORE_ARENA_CACHE_DIR", dir)
        .output()
        .unwrap()
}

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
    // `devices` says what the cache holds, in text and JSON.
    let out = text(&devices(&config, &dir, false));
    let want = format!("arena cache: up to 64 MiB, 1 slot(s) in {}", dir.display());
    assert!(out.contains(&want), "{out}");
    assert!(out.contains("(0 in use)"), "{out}");
    let v = json(&devices(&config, &dir, true));
    let host = &v[0]["arena_cache"];
    assert_eq!(host["limit_bytes"], 64 << 20, "{v}");
    assert_eq!(host["slots"], 1, "{v}");
    assert_eq!(host["error"], serde_json::Value::Null, "{v}");
    // Off: the next replay maps fresh memory and removes the slot.
    std::fs::write(&config, "arena_cache = 0\n").unwrap();
    let o = replay(&store, &config, &dir, SAXPY);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["timing"]["arena_memory"], "transparent");
    assert!(slots(&dir).is_empty(), "{:?}", slots(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directory other users could enter is refused: the replay uses fresh
/// memory and still verifies, and `devices` says why.
#[test]
fn a_directory_others_can_enter_means_fresh_memory_and_devices_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let config = tmp.path().join("config.toml");
    std::fs::write(&config, "arena_cache = \"64MiB\"\n").unwrap();
    let dir = PathBuf::from(format!("/dev/shm/rrstore-cli-open-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = replay(&store, &config, &dir, GLOBALS);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["verdict"], "verified", "{}", text(&o));
    assert_eq!(json(&o)["timing"]["arena_memory"], "transparent");
    assert!(slots(&dir).is_empty(), "{:?}", slots(&dir));
    let out = text(&devices(&config, &dir, false));
    assert!(
        out.contains("arena cache: up to 64 MiB, unusable ("),
        "{out}"
    );
    assert!(out.contains("mode 755"), "{out}");
    let v = json(&devices(&config, &dir, true));
    assert!(
        v[0]["arena_cache"]["error"]
            .as_str()
            .unwrap()
            .contains("RRSTORE_ARENA_CACHE_DIR"),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
