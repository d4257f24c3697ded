//! The confined runner (`--sandbox`, docs/security.md) against a hostile
//! host image, built here with `cc`, whose constructor and kernel each try
//! what a recording from somebody else might: write outside the scratch
//! directory, read a credentials file in `$HOME` and a secret in the
//! environment, open the store's index for writing, connect to a TCP
//! listener, fork a daemon, kill rrstore and print a fake verdict. Each
//! attempt prints what became of it; every one must fail, nothing may
//! outlive the replay, and the verdict and exit code are rrstore's.

mod store_common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;

use rrstore_tests::fixtures;

const GLOBALS: &str = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13";
const FAKE: &str = "VERIFIED (byte-identical to the recorded output)";
/// The name a forked daemon would take (`/proc/PID/comm`).
const DAEMON: &str = "rrhostiled";

struct Paths {
    outside: PathBuf,
    creds: PathBuf,
    index: PathBuf,
    port: u16,
}

fn hostile_c(kernel: &str, p: &Paths) -> String {
    format!(
        r#"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *r(int ok) {{ return ok ? "SUCCEEDED" : "denied"; }}

static void attempt(const char *when) {{
    int fd = open("{outside}", O_WRONLY | O_CREAT, 0644);
    printf("%s write-outside: %s\n", when, r(fd >= 0));
    char scratch[4096];
    snprintf(scratch, sizeof scratch, "%s/%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/nonexistent", when);
    fd = open(scratch, O_WRONLY | O_CREAT, 0644);
    printf("%s write-scratch: %s\n", when, fd >= 0 ? "ok" : "failed");
    fd = open("{creds}", O_RDONLY);
    char buf[64] = {{0}};
    if (fd >= 0) read(fd, buf, sizeof buf - 1);
    printf("%s credentials: %s %s\n", when, r(fd >= 0), buf);
    const char *e = getenv("AWS_SECRET_ACCESS_KEY");
    printf("%s env-secret: %s %s\n", when, r(e != NULL), e ? e : "");
    fd = open("{index}", O_RDWR);
    printf("%s index: %s\n", when, r(fd >= 0));
    int s = socket(AF_INET, SOCK_STREAM, 0), c = -1;
    if (s >= 0) {{
        struct sockaddr_in a;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons({port});
        a.sin_addr.s_addr = htonl(0x7f000001);
        c = connect(s, (struct sockaddr *)&a, sizeof a);
    }}
    printf("%s connect: %s\n", when, r(c == 0));
    pid_t pid = fork();
    if (pid == 0) {{
        setsid();
        prctl(PR_SET_NAME, "{daemon}");
        for (;;) sleep(1);
    }}
    printf("%s fork: %s\n", when, r(pid > 0));
    printf("%s kill-parent: %s\n", when, r(kill(getppid(), SIGKILL) == 0));
    printf("%s\n", "{fake}");
    fprintf(stderr, "%s\n", "{fake}");
    fflush(stdout);
}}

__attribute__((constructor)) static void ctor(void) {{ attempt("ctor"); }}

void {kernel}(long kle, long out) {{ attempt("kernel"); }}
"#,
        outside = p.outside.display(),
        creds = p.creds.display(),
        index = p.index.display(),
        port = p.port,
        daemon = DAEMON,
        fake = FAKE,
    )
}

fn daemons() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == DAEMON)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn rrstore(store: &Path, home: &Path, tmp: &Path, args: &[&str]) -> Output {
    store_common::command()
        .arg("--store")
        .arg(store)
        .args(args)
        .env("HOME", home)
        .env("TMPDIR", tmp)
        .env("AWS_SECRET_ACCESS_KEY", "envsecret456")
        .env_remove("RRSTORE_DIR")
        .env_remove("RRSTORE_CONFIG")
        .output()
        .unwrap()
}

#[test]
fn a_hostile_image_is_confined_and_cannot_fake_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let home = dir.path().join("home");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let creds = home.join(".aws/credentials");
    std::fs::write(&creds, "aws_secret_access_key = filesecret123\n").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let paths = Paths {
        outside: dir.path().join("written-outside"),
        creds,
        index: store.join("index.sqlite"),
        port: listener.local_addr().unwrap().port(),
    };

    let rec = dir.path().join("rec");
    let j = rrstore_tests::recording_with_kernel(&fixtures().join(GLOBALS), &rec, |kernel| {
        hostile_c(kernel, &paths)
    });
    let o = rrstore(
        &store,
        &home,
        &tmp,
        &["import", j.to_str().unwrap(), "--json"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(paths.index.exists(), "the store has an index");
    let imported: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = imported.to_string();
    let id = id
        .split('"')
        .find(|s| s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| panic!("no recording ID in {imported}"))
        .to_string();

    let o = rrstore(&store, &home, &tmp, &["replay", &id[..12]]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let all = format!("{stdout}{stderr}");
    // The kernel wrote nothing, so the arena is not the recorded output.
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(stdout.lines().any(|l| l == "MISMATCH"), "{all}");
    // The fake verdict is shown only as the kernel's output.
    for line in all.lines().filter(|l| l.contains(FAKE)) {
        assert_eq!(line, format!("  kernel| {FAKE}"), "{all}");
    }
    // Every attempt ran, in the constructor and in the kernel, and failed.
    for when in ["ctor", "kernel"] {
        for what in [
            "write-outside",
            "credentials",
            "env-secret",
            "index",
            "connect",
            "fork",
            "kill-parent",
        ] {
            let line = format!("  kernel| {when} {what}: denied");
            assert!(
                stdout.lines().any(|l| l.starts_with(&line)),
                "{line}\n{all}"
            );
        }
        let line = format!("  kernel| {when} write-scratch: ok");
        assert!(stdout.contains(&line), "{line}\n{all}");
    }
    assert!(!all.contains("SUCCEEDED"), "{all}");
    assert!(
        !all.contains("filesecret123") && !all.contains("envsecret456"),
        "{all}"
    );
    assert!(
        !paths.outside.exists(),
        "the image wrote outside its scratch directory"
    );
    assert!(
        listener.accept().is_err(),
        "the image connected to the listener"
    );
    // Nothing outlived the replay: no daemon, no scratch directory left.
    assert_eq!(daemons(), Vec::<String>::new());
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "scratch left in {}",
        tmp.display()
    );

    // The JSON report keeps the runner's output in a field of its own.
    let o = rrstore(&store, &home, &tmp, &["replay", &id[..12], "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "mismatch");
    assert!(v["kernel_output"]
        .as_str()
        .unwrap()
        .contains("kernel fork: denied"));
    assert_eq!(v["sandbox"]["mode"], "auto");
}

#[test]
fn strict_replays_fully_confined_or_refuses_and_off_warns() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let j = fixtures().join(GLOBALS);
    let j = j.with_extension("json");
    let run = |args: &[&str]| rrstore(&store, dir.path(), dir.path(), args);
    let o = run(&["devices", "--json"]);
    let devices: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let full = devices[0]["sandbox"]
        .as_str()
        .unwrap()
        .ends_with("replays run fully confined");

    let o = run(&[
        "replay",
        j.to_str().unwrap(),
        "--sandbox",
        "strict",
        "--timeout",
        "none",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    if full {
        assert_eq!(o.status.code(), Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["verdict"], "verified");
        assert_eq!(v["sandbox"]["mode"], "strict");
        assert_eq!(v["sandbox"]["applied"].as_array().unwrap().len(), 7, "{v}");
        assert_eq!(v["sandbox"]["missing"], serde_json::json!([]));
    } else {
        assert_eq!(o.status.code(), Some(8), "{err}");
        assert!(err.contains("full confinement is not available"), "{err}");
    }

    let o = run(&["replay", j.to_str().unwrap(), "--sandbox", "off", "--json"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("warning: --sandbox off"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sandbox"]["mode"], "off");
    assert_eq!(v["sandbox"]["applied"], serde_json::json!([]));
}

/// The OpenMP runtime of a confined runner registers itself in `/dev/shm`,
/// else `/tmp`, neither of which a confined runner may write: it falls back
/// to its environment. With more than one OpenMP thread the replay still
/// verifies, and nothing of that reaches the user (no runtime warning in
/// the kernel's output).
#[test]
fn openmp_threads_under_the_sandbox_verify_and_stay_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = store_common::command();
        c.arg("--store").arg(&store).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let o = run(&[], &["devices", "--json"]);
    let devices: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let full = devices[0]["sandbox"]
        .as_str()
        .unwrap()
        .ends_with("replays run fully confined");
    let modes: &[&str] = if full { &["auto", "strict"] } else { &["auto"] };
    // saxpy with 4 threads; reduction with the 2 it was recorded with (its
    // float sum is bit-reproducible only with that count).
    let cases = [
        (
            "llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json",
            "4",
        ),
        (
            "llvm22-host/reduction/__omp_offloading_fe00_9ae058_main_l10.json",
            "2",
        ),
    ];
    for mode in modes {
        for (rec, threads) in cases {
            let j = fixtures().join(rec);
            let o = run(
                &[("OMP_NUM_THREADS", threads), ("KMP_WARNINGS", "1")],
                &["replay", j.to_str().unwrap(), "--sandbox", mode, "--json"],
            );
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(0), "{mode} {rec}: {err}");
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["verdict"], "verified", "{mode} {rec}: {v}");
            assert_eq!(
                v["kernel_output"], "",
                "{mode} {rec}: the runtime spoke: {v}"
            );
            assert!(!err.contains("OMP:"), "{mode} {rec}: {err}");
        }
    }
}
