//! Zeroed slack after a host arena (issue 44, item 2), on a real program
//! compiled and recorded here (`rrstore_tests::offload`) and replayed by
//! the real binary: a kernel that reads (and writes) past its last buffer
//! but inside the recording's 64 MiB device arena read zeros while it was
//! recorded, as it does under LLVM's replay tool; rrstore maps only the
//! recorded bytes plus slack, so without the slack it crashed (exit 12).
//! What a kernel writes into the slack never reaches a later replay or
//! repetition, and a range taken inside the slack is left alone and named.
//! A relocated arena goes where its whole slack fits, and a pointer past
//! the recorded bytes but inside the recording's arena (an `end` pointer)
//! moves with it.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use rrstore_tests::offload::{record, recording_runtime, Source};
use rrstore_tests::output::json;

/// `in` and `out` are the whole recorded arena (512 bytes); each `i` reads
/// and then writes an int 1.2 MB past `in`, a place of its own, which the
/// recording's 64 MiB arena held as zeros: `out[i] == in[i]`. A replay
/// that finds anything but zeros there (the last repetition's 99s)
/// mismatches; one with nothing mapped there crashes.
const FAR_READER: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 64;
  int *in = (int *)malloc(n * sizeof(int));
  int *out = (int *)calloc(n, sizeof(int));
  for (int i = 0; i < n; i++) in[i] = i * 3 + 1;
#pragma omp target teams distribute parallel for map(to : in[0:n]) map(from : out[0:n])
  for (int i = 0; i < n; i++) {
    volatile int *far = in + n + 300000 + i * 16;
    out[i] = in[i] + *far;
    *far = 99;
  }
  printf("out[5]=%d\n", out[5]);
  fflush(stdout);
  _Exit(0);
}
"#;

/// Compile and record [`FAR_READER`] under `dir`; the recording's
/// descriptor.
fn recorded(dir: &Path) -> PathBuf {
    let src = Source::new(&dir.join("src"), "far.cpp", FAR_READER);
    let app = dir.join("app");
    src.build(&app, &[]);
    let rec = dir.join("rec");
    let runtime = recording_runtime(dir);
    let (o, found) = record(&app, &rec, &runtime, &[("OMP_NUM_THREADS", "2")]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

fn replay(store: &Path, rec: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = store_common::command();
    c.arg("--store")
        .arg(store)
        .args(["replay", "--confirm", "0", "--json"])
        .args(extra)
        .arg(rec)
        .env("OMP_NUM_THREADS", "2");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// The replay verified, with at least `slack` bytes of slack; its report.
fn verified(o: &Output, what: &str) -> serde_json::Value {
    let r = json(o);
    assert_eq!(
        (o.status.code(), r["verdict"].as_str()),
        (Some(0), Some("verified")),
        "{what}: {r}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    r
}

#[test]
fn a_kernel_reading_past_its_buffers_inside_the_device_arena_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorded(dir.path());
    let store = dir.path().join("store");
    let r = verified(&replay(&store, &rec, &[], &[]), "recorded placement");
    // The 512 recorded bytes are one page; the slack is the rest of the
    // 64 MiB from the base, to the page, all of it mapped.
    let p = &r["placement"];
    let base = p["address"].as_u64().unwrap();
    let pages_end = (base + 512 + 4095) & !4095;
    let end = (base + (64 << 20) + 4095) & !4095;
    assert_eq!(p["slack"].as_u64(), Some(end - pages_end), "{p}");
    assert!(p["slack_short"].is_null(), "{p}");
    // Relocated: the slack follows the arena to its new address.
    let r = verified(
        &replay(&store, &rec, &["--placement", "relocate"], &[]),
        "relocated",
    );
    assert_eq!(r["placement"]["mode"], "relocated", "{r}");
    assert!(r["placement"]["slack"].as_u64().unwrap() > 60 << 20, "{r}");
}

#[test]
fn slack_is_fresh_zeros_in_every_replay_and_repetition_and_never_displaces_a_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorded(dir.path());
    let store = dir.path().join("store");
    // The arena cache on: replays map a held slot that outlives them; the
    // 99s the first replay's kernel wrote into its slack must not be what
    // the second one reads.
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "arena_cache = \"64MiB\"\n").unwrap();
    let cache = PathBuf::from(format!(
        "/dev/shm/rrstore-slack-test-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&cache);
    let env = [
        ("RRSTORE_CONFIG", config.to_str().unwrap()),
        ("RRSTORE_ARENA_CACHE_DIR", cache.to_str().unwrap()),
    ];
    for run in 0..2 {
        let r = verified(&replay(&store, &rec, &[], &env), &format!("run {run}"));
        assert_eq!(r["timing"]["arena_memory"], "held", "{r}");
    }
    // Two launches in one runner: the second reads zeros again.
    verified(
        &replay(&store, &rec, &["--repetitions", "2"], &env),
        "repetitions",
    );
    let _ = std::fs::remove_dir_all(&cache);

    // Something already lies 32 MiB past the base, in every runner: the
    // slack stops before it (the kernel reads 1.2 MB past the base, so it
    // still verifies), and the report says what was there.
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(&rec).unwrap()).unwrap();
    let base = d["BumpAllocVAStart"].as_u64().unwrap();
    let taken = format!("{:#x}:4096", base + (32 << 20));
    let o = replay(
        &store,
        &rec,
        &["--placement", "recorded"],
        &[("RRSTORE_DEBUG_OCCUPY", &taken)],
    );
    let r = verified(&o, "occupied slack");
    let p = &r["placement"];
    let pages_end = (base + 512 + 4095) & !4095;
    assert_eq!(
        p["slack"].as_u64(),
        Some(((base + (32 << 20)) & !4095) - pages_end),
        "{p}"
    );
    assert!(
        p["slack_short"].as_str().unwrap_or("").contains("occupied"),
        "{p}"
    );
}

/// The first relocation candidate for an arena recorded at `base`
/// (`replay/src/placement`: `0x2000_0000_0000` plus the base's offset
/// within 2 MiB) and the next one, 8 TiB up.
fn candidates(base: u64) -> (u64, u64) {
    let first = 0x2000_0000_0000 + base % (2 << 20);
    (first, first + 0x0800_0000_0000)
}

#[test]
fn a_relocated_arena_goes_where_its_whole_slack_fits() {
    let dir = tempfile::tempdir().unwrap();
    let rec = recorded(dir.path());
    let store = dir.path().join("store");
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(&rec).unwrap()).unwrap();
    let base = d["BumpAllocVAStart"].as_u64().unwrap();
    let (first, second) = candidates(base);
    // Something lies 32 MiB past the first candidate in every runner: an
    // arena there would get half its slack. The relocation goes on to the
    // next candidate, where all of it fits.
    let taken = format!("{:#x}:4096", first + (32 << 20));
    let o = replay(
        &store,
        &rec,
        &["--placement", "relocate"],
        &[("RRSTORE_DEBUG_OCCUPY", &taken)],
    );
    let r = verified(&o, "relocated past a short slack");
    let p = &r["placement"];
    assert_eq!(p["mode"], "relocated", "{p}");
    assert_eq!(p["address"].as_u64(), Some(second), "{p}");
    let pages_end = (second + 512 + 4095) & !4095;
    let end = (second + (64 << 20) + 4095) & !4095;
    assert_eq!(p["slack"].as_u64(), Some(end - pages_end), "{p}");
    assert!(p["slack_short"].is_null(), "{p}");
}

/// `a` is the device memory the program allocates last, so the recorded
/// arena (`out`, then `a`: 512 bytes) ends where `a` does, and `end`, the
/// one-past-the-end pointer a kernel counts down from, is the address
/// just past the recorded bytes: memory of the recording's 64 MiB arena.
const END_POINTER: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <omp.h>
int main() {
  const int n = 64;
  int *out = (int *)calloc(n, sizeof(int));
#pragma omp target enter data map(alloc : out[0:n])
  int *a = (int *)omp_target_alloc(n * sizeof(int), omp_get_default_device());
  int *end = a + n;
#pragma omp target teams distribute parallel for is_device_ptr(end) map(from : out[0:n])
  for (int i = 0; i < n; i++) {
    end[-1 - i] = i * 3 + 1;
    out[i] = end[-1 - i] + i;
  }
#pragma omp target exit data map(from : out[0:n])
  printf("out[5]=%d\n", out[5]);
  fflush(stdout);
  _Exit(0);
}
"#;

#[test]
fn a_pointer_just_past_the_recorded_bytes_is_rebased_with_the_arena() {
    let dir = tempfile::tempdir().unwrap();
    let src = Source::new(&dir.path().join("src"), "end.cpp", END_POINTER);
    let app = dir.path().join("app");
    src.build(&app, &[]);
    let runtime = recording_runtime(dir.path());
    let (o, found) = record(
        &app,
        &dir.path().join("rec"),
        &runtime,
        &[("OMP_NUM_THREADS", "2")],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out[5]=21\n");
    assert_eq!(found.len(), 1, "{found:?}");
    let rec = &found[0];
    // The recording: `end` is the base plus the recorded size.
    let d: serde_json::Value = serde_json::from_slice(&std::fs::read(rec).unwrap()).unwrap();
    let base = d["BumpAllocVAStart"].as_u64().unwrap();
    let size = d["DeviceMemorySize"].as_u64().unwrap();
    let args: Vec<u64> = d["ArgPtrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_i64().unwrap() as u64)
        .collect();
    assert!(args.contains(&(base + size)), "{d}");
    let store = dir.path().join("store");
    verified(&replay(&store, rec, &[], &[]), "recorded placement");
    // Relocated: `end` moves with the arena (left alone, the kernel would
    // write where the replay has nothing: a crash), and so does `out`.
    let r = verified(
        &replay(&store, rec, &["--placement", "relocate"], &[]),
        "relocated",
    );
    let p = &r["placement"];
    assert_eq!(p["mode"], "relocated", "{p}");
    assert_eq!(p["rebased_args"].as_u64(), Some(2), "{p}");
    let new = p["address"].as_u64().unwrap();
    assert!(
        r["args"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_u64() == Some(new + size)),
        "{r}"
    );
}
