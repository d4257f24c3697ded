//! Lock objects of a process that died (spec/REMOTE.md, "Removal"): a real
//! `rrstore push` SIGKILLed while it holds its shared lock does not make
//! `remote prune` refuse, nor does a lock naming a dead process of this
//! host; a live holder still blocks, and a push that waits for a prune
//! says on stderr, once, which lock it waits for, its holder and age.

mod remote_common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use remote_common::*;

/// A pid of this host whose process has exited (and was reaped).
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// A live process of this host, to hold a lock.
fn live_process() -> Child {
    Command::new("sleep").arg("600").spawn().unwrap()
}

fn write_lock(rdir: &Path, name: &str, kind: &str, pid: u32) {
    let dir = rdir.join("locks");
    std::fs::create_dir_all(&dir).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    std::fs::write(
        dir.join(name),
        format!(
            "{{\"kind\":\"{kind}\",\"host\":\"{}\",\"pid\":{pid},\"time\":{now}}}\n",
            rrstore_tests::temp_name_host()
        ),
    )
    .unwrap();
}

/// Start `rrstore push r --all` paused once it holds its shared lock.
fn paused_push(store: &Path) -> Child {
    let mut c = rr(store, &["push", "r", "--all"])
        .env("RRSTORE_PUSH_PAUSE_AFTER_LOCK", "1")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(c.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("pausing") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the push ended");
    }
    c
}

#[test]
fn prune_goes_ahead_at_once_after_a_killed_push_and_waits_for_a_live_one() {
    let f = file_remote(&["saxpy"]);
    ok(&f.a, &["push", "r", "--all"]);
    import(&f.a, &["globals"]);
    // A real push SIGKILLed while it holds its shared lock.
    let mut push = paused_push(&f.a);
    let live = run(&f.a, &["remote", "prune", "r"]);
    assert_eq!(live.status.code(), Some(14), "a live push blocks the prune");
    let err = String::from_utf8_lossy(&live.stderr);
    assert!(
        err.contains(&format!("pid {}", push.id()))
            && err.contains(&rrstore_tests::temp_name_host()),
        "{err}"
    );
    push.kill().unwrap();
    push.wait().unwrap();
    let locks: Vec<_> = std::fs::read_dir(f.rdir.join("locks")).unwrap().collect();
    assert_eq!(locks.len(), 1, "the killed push left its lock");
    let t = Instant::now();
    ok(&f.a, &["remote", "prune", "r"]);
    assert!(t.elapsed() < Duration::from_secs(20));
    assert_eq!(std::fs::read_dir(f.rdir.join("locks")).unwrap().count(), 0);
    // A lock file naming a dead process of this host: the same.
    write_lock(
        &f.rdir,
        &format!(
            "shared-{}-{}-0",
            rrstore_tests::temp_name_host(),
            dead_pid()
        ),
        "push",
        0,
    );
    ok(&f.a, &["remote", "prune", "r"]);
    // A live holder's lock still blocks.
    let mut holder = live_process();
    write_lock(
        &f.rdir,
        &format!(
            "shared-{}-{}-0",
            rrstore_tests::temp_name_host(),
            holder.id()
        ),
        "push",
        holder.id(),
    );
    assert_eq!(fails(&f.a, &["remote", "prune", "r"]).0, 14);
    holder.kill().unwrap();
    holder.wait().unwrap();
    ok(&f.a, &["remote", "prune", "r"]);
}

#[test]
fn a_push_ignores_a_dead_prunes_lock_and_says_what_a_live_one_makes_it_wait_for() {
    let f = file_remote(&["saxpy"]);
    ok(&f.a, &["push", "r", "--all"]);
    import(&f.a, &["globals"]);
    // The exclusive lock of a prune that died on this host.
    write_lock(&f.rdir, "exclusive", "prune", dead_pid());
    let t = Instant::now();
    let out = ok(&f.a, &["push", "r", "--all", "--quiet"]);
    assert!(t.elapsed() < Duration::from_secs(20), "{out}");
    // A live holder: the push waits, saying so once, and goes ahead once
    // the holder is gone.
    std::fs::remove_file(f.rdir.join("locks/exclusive")).unwrap();
    import(&f.a, &["reduction"]);
    let mut holder = live_process();
    write_lock(&f.rdir, "exclusive", "prune", holder.id());
    let mut push = rr(&f.a, &["push", "r", "--all", "--quiet"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(push.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("note: waiting for a `remote prune`")
            && line.contains("locks/exclusive")
            && line.contains(&format!(
                "host {}, pid {}",
                rrstore_tests::temp_name_host(),
                holder.id()
            ))
            && line.contains("s ago"),
        "{line}"
    );
    std::thread::sleep(Duration::from_secs(2));
    holder.kill().unwrap();
    holder.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(push.wait().unwrap().success(), "{rest}");
    assert!(!rest.contains("waiting"), "said once: {rest}");
    assert_eq!(ids(&f.a, Some("r:")), ids(&f.a, None));
}
