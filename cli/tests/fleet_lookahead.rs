//! The fleet lookahead (issue 21, docs/fleet.md "Lookahead") through the
//! real binary and store: with every lane decoding its next recording's
//! input while the current kernel runs (`RRSTORE_LOOKAHEAD=all`, so that
//! the host lanes of this machine do it), `check` gives the verdicts of the
//! check without it, in the same order, for one lane and for two, and the
//! replays use what was decoded ahead; a damaged pack makes the same rows
//! fail in both (a failing preparation is the recording's own verdict, and
//! touches no other); and without `--devices` a host check does not look
//! ahead at all.

mod remote_common;

use std::path::Path;

use remote_common::*;

fn setup(s: &Path) {
    import(s, &["saxpy", "reduction", "globals", "multi"]);
}

/// Exit code, JSON and stderr of `check --json ARGS` with
/// `RRSTORE_LOOKAHEAD=mode` and the lookahead's counts printed.
fn check(s: &Path, mode: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut a = vec!["check", "--json"];
    a.extend_from_slice(args);
    let o = rr(s, &a)
        .env("RRSTORE_LOOKAHEAD", mode)
        .env("RRSTORE_GPU_STATS", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o.status.code().unwrap(), v, err)
}

/// (recording, verdict, regressed) of every row, in the printed order.
fn verdicts(v: &serde_json::Value) -> Vec<(String, String, bool)> {
    v["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    (
                        r["recording"].as_str().unwrap().to_string(),
                        r["run"]["verdict"].as_str().unwrap().to_string(),
                        r["regressed"].as_bool().unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The sums of each lane's `N replays used one` and `N inputs decoded
/// ahead` counts.
fn used(stderr: &str) -> (u64, u64) {
    let count = |l: &str, what: &str| -> u64 {
        l.split(", ")
            .find_map(|p| p.strip_suffix(what))
            .and_then(|n| n.trim().rsplit(' ').next()?.parse().ok())
            .unwrap_or(0)
    };
    stderr
        .lines()
        .filter(|l| l.contains("lookahead:"))
        .fold((0, 0), |(u, d), l| {
            (
                u + count(l, " replays used one"),
                d + count(l, " inputs decoded ahead"),
            )
        })
}

#[test]
fn the_lookahead_gives_the_verdicts_of_no_lookahead_in_the_same_order() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    setup(&s);
    let (c0, off, _) = check(&s, "0", &[]);
    assert_eq!(c0, 0, "{off:#}");
    let n = verdicts(&off).len();
    assert!(n >= 4, "{off:#}");
    for jobs in ["1", "2"] {
        let (c, on, err) = check(&s, "all", &["--jobs", jobs]);
        assert_eq!(c, 0, "{err}");
        assert_eq!(verdicts(&on), verdicts(&off), "--jobs {jobs}");
        let (used, decoded) = used(&err);
        // Recordings after each lane's first are decoded ahead, and their
        // replays (a slowdown's confirming replay too) use what was.
        assert!(decoded >= 1 && used >= decoded, "--jobs {jobs}: {err}");
        assert!(decoded < n as u64, "a lane's first is never ahead: {err}");
    }
}

#[test]
fn a_damaged_pack_fails_the_same_rows_with_and_without_the_lookahead() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    setup(&s);
    let (_, clean, _) = check(&s, "0", &[]);
    for fan in std::fs::read_dir(s.join("packs")).unwrap() {
        for p in std::fs::read_dir(fan.unwrap().path()).unwrap() {
            let p = p.unwrap().path();
            let mut bytes = std::fs::read(&p).unwrap();
            // One bit well inside the chunk data.
            let at = bytes.len() / 2;
            bytes[at] ^= 0x10;
            std::fs::write(&p, &bytes).unwrap();
        }
    }
    let (c0, off, e0) = check(&s, "0", &[]);
    let (c1, on, e1) = check(&s, "all", &[]);
    assert_eq!(c0, c1, "{e0}\n{e1}");
    assert_eq!(verdicts(&on), verdicts(&off), "{e0}\n{e1}");
    // The damage shows: not every row is still the clean check's.
    if !verdicts(&off).is_empty() {
        assert_ne!(verdicts(&off), verdicts(&clean), "{e0}");
    }
}

#[test]
fn a_host_check_does_not_look_ahead_unless_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s");
    setup(&s);
    for args in [&[][..], &["--jobs", "2"][..]] {
        let (c, _, err) = check(&s, "gpu", args);
        assert_eq!(c, 0, "{err}");
        assert!(!err.contains("lookahead:"), "{args:?}: {err}");
    }
}
