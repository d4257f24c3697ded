//! Crash safety and concurrency with real processes: SIGKILL `import` and
//! `gc` at random moments, four concurrent importers while gc runs, and a
//! flipped bit in a pack file.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use rrstore_format::llvm;
use store_common::*;

use rrstore_tests::XorShift;

fn spawn(store: &Path, args: &[&str]) -> Child {
    store_common::command()
        .arg("--store")
        .arg(store)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Kill with SIGKILL after `delay` unless it already exited; true if killed.
fn kill_after(mut child: Child, delay: Duration) -> bool {
    let deadline = Instant::now() + delay;
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let killed = child.try_wait().unwrap().is_none();
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    killed
}

/// IDs of every fixture recording.
fn fixture_ids() -> Vec<String> {
    let mut ids: Vec<String> = llvm::find_recordings(&fixtures())
        .unwrap()
        .iter()
        .map(|d| llvm::load(d).unwrap().recording.id().to_hex())
        .collect();
    ids.sort();
    ids
}

fn verify_full(s: &Path) {
    // An import killed before it created the store (a slow start on a
    // loaded machine) leaves nothing, which is as it should be.
    if !s.exists() {
        return;
    }
    let o = run(s, &["verify", "--full"]);
    assert!(
        o.status.success(),
        "verify --full after a kill: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn sigkill_import_and_gc_at_random_moments() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let all = fixture_ids();
    let fx = fixtures();
    let sets: Vec<PathBuf> = vec![
        fx.clone(),
        fx.join("llvm22-host"),
        fx.join("upstream-native"),
        fx.join("llvm22-host/multi"),
    ];
    let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15);
    let budget = Instant::now() + Duration::from_secs(60);
    let mut iterations = 0;
    let (mut kills, mut gc_kills) = (0u32, 0u32);
    while iterations < 30 && Instant::now() < budget {
        iterations += 1;
        let set = &sets[rng.below(sets.len() as u64) as usize];
        let child = spawn(&s, &["import", set.to_str().unwrap()]);
        kills += kill_after(child, Duration::from_millis(rng.below(90))) as u32;
        if !s.exists() {
            // Killed before it created the store: nothing to check yet.
            continue;
        }
        verify_full(&s);
        let ids = ls_ids(&s);
        assert!(
            ids.iter().all(|id| all.contains(id)),
            "unknown recording appeared"
        );
        if iterations % 3 == 0 && !ids.is_empty() {
            // Remove some recordings, then kill a gc.
            let mut args = vec!["rm".to_string()];
            for id in ids.iter().filter(|_| rng.below(2) == 0) {
                args.push(id[..16].to_string());
            }
            if args.len() > 1 {
                let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
                ok(&s, &a);
            }
            let child = spawn(&s, &["gc"]);
            gc_kills += kill_after(child, Duration::from_millis(rng.below(12))) as u32;
            verify_full(&s);
        }
    }
    eprintln!("{iterations} iterations, {kills} imports and {gc_kills} gcs killed mid-run");
    assert!(iterations >= 10, "only {iterations} iterations");
    assert!(kills >= 5, "only {kills} imports were killed mid-run");
    // After all that: a clean gc and a full import give a complete store.
    ok(&s, &["gc"]);
    ok(&s, &["import", fx.to_str().unwrap()]);
    verify_full(&s);
    assert_eq!(ls_ids(&s), all);
    // Garbage is bounded: one more gc leaves nothing to sweep.
    let gc: serde_json::Value = serde_json::from_str(&ok(&s, &["gc", "--json"])).unwrap();
    assert_eq!(gc["orphans_deleted"], 0, "{gc}");
}

#[test]
fn four_concurrent_importers_while_gc_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let fx = fixtures();
    // Seed the store and remove part of it so gc has work to do.
    ok(&s, &["import", fx.join("llvm22-host").to_str().unwrap()]);
    let seeded = ls_ids(&s);
    let mut rm = vec!["rm".to_string()];
    rm.extend(seeded.iter().step_by(2).map(|id| id[..16].to_string()));
    ok(&s, &rm.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    let sets = [
        fx.join("llvm22-host"),
        fx.join("upstream-native"),
        fx.join("llvm22-host/multi"),
        fx.clone(),
    ];
    let importers: Vec<Child> = sets
        .iter()
        .map(|p| spawn(&s, &["import", p.to_str().unwrap()]))
        .collect();
    let gc_done = std::thread::spawn({
        let s = s.clone();
        move || {
            for _ in 0..5 {
                let o = run(&s, &["gc"]);
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            }
        }
    });
    for c in importers {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    gc_done.join().unwrap();
    ok(&s, &["gc"]);
    verify_full(&s);
    assert_eq!(ls_ids(&s), fixture_ids());
}

#[test]
fn a_flipped_bit_in_a_pack_is_found_and_never_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let saxpy = fixtures().join("llvm22-host/saxpy");
    ok(&s, &["import", saxpy.to_str().unwrap()]);
    let id = ls_ids(&s)[0].clone();
    let mut packs = Vec::new();
    for fan in std::fs::read_dir(s.join("packs")).unwrap() {
        for p in std::fs::read_dir(fan.unwrap().path()).unwrap() {
            packs.push(p.unwrap().path());
        }
    }
    assert_eq!(packs.len(), 1);
    let mut bytes = std::fs::read(&packs[0]).unwrap();
    // Flip one bit well inside the chunk data (past the first entry header).
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&packs[0], &bytes).unwrap();
    // Quick verify checks headers only; --full finds it.
    let o = run(&s, &["verify", "--full"]);
    assert_eq!(o.status.code(), Some(5));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&id) && err.contains("part") && err.contains("bytes"),
        "{err}"
    );
    // Exporting fails with CORRUPT and names the range; no wrong bytes.
    let out = tmp.path().join("out");
    let (code, err) = fails(&s, &["export", &id[..8], "-o", out.to_str().unwrap()]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("bytes"), "{err}");
    // A flipped bit in an entry header is found by the quick verify too.
    let mut bytes = std::fs::read(&packs[0]).unwrap();
    bytes[at] ^= 0x10;
    bytes[32 + 20] ^= 0x01;
    std::fs::write(&packs[0], &bytes).unwrap();
    assert_eq!(run(&s, &["verify"]).status.code(), Some(5));
}
