//! The trust boundary (docs/security.md): the process that runs a
//! recording's image never reports the result. A hostile image, built here
//! with `cc`, is given the best case an attacker could hope for: it knows
//! the recorded output's blake3 (compiled in). Its kernel takes over the
//! runner's control socket and answers what rrstore's earlier protocol
//! asked a runner after a launch (the launch's reply with a kernel time of
//! 1 ns, then the arena's hash: the recorded one), never computing
//! anything; it also looks for the recorded hash in its own memory (where
//! a runner forked from rrstore found it in the manifest) and for
//! rrstore's secrets in `/proc/self/environ` (the original environment a
//! forked runner's stack still held). Each must fail: the verdict is a
//! mismatch, computed by rrstore from the stopped runner's memory, and the
//! kernel time is rrstore's measurement around the launch.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use rrstore_tests::fixtures;

const GLOBALS: &str = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13";
const SECRET: &str = "envsecret456";
/// How long the hostile kernel waits before it forges its reply.
const STALL_MS: u64 = 300;

fn hostile_c(kernel: &str, hash: &[u8; 32]) -> String {
    // Stored inverted, so that the image's own copy is not what its scan
    // finds.
    let inverted: Vec<String> = hash.iter().map(|b| format!("{}", !b)).collect();
    format!(
        r#"
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char inverted[32] = {{ {inverted} }};
static unsigned char hash[32];

/* Whether `needle` occurs in any readable mapping of this process. */
static int in_memory(const unsigned char *needle, size_t n) {{
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, maps)) {{
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
        if (perms[0] != 'r' || strstr(line, "[vvar") || strstr(line, "[vsyscall")) continue;
        for (unsigned long p = lo; p + n <= hi; p++) {{
            if (*(const unsigned char *)p == needle[0] && memcmp((const void *)p, needle, n) == 0
                && (const unsigned char *)p != needle) {{
                found = 1;
                break;
            }}
        }}
    }}
    fclose(maps);
    return found;
}}

static void send_msg(int fd, const unsigned char *body, uint32_t len) {{
    unsigned char buf[64];
    memcpy(buf, &len, 4);
    memcpy(buf + 4, body, len);
    write(fd, buf, 4 + len);
}}

void {kernel}(long kle, long out) {{
    for (int i = 0; i < 32; i++) hash[i] = (unsigned char)~inverted[i];
    printf("hash-in-memory: %s\n", in_memory(hash, 32) ? "SUCCEEDED" : "denied");
    char env[1 << 16];
    int e = open("/proc/self/environ", O_RDONLY);
    ssize_t n = e >= 0 ? read(e, env, sizeof env - 1) : -1;
    if (n < 0) n = 0;
    env[n] = 0;
    int leaked = 0;
    for (ssize_t i = 0; i < n; i += strlen(env + i) + 1)
        if (strstr(env + i, "{secret}")) leaked = 1;
    printf("environ-secret: %s\n", leaked ? "SUCCEEDED" : "denied");
    fflush(stdout);
    usleep({stall} * 1000);
    /* The control socket: the one socket among the descriptors. */
    int sock = -1;
    for (int fd = 3; fd < 1024 && sock < 0; fd++) {{
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) sock = fd;
    }}
    printf("socket: %s\n", sock >= 0 ? "found" : "none");
    fflush(stdout);
    if (sock < 0) return;
    /* The launch's reply: ok, "1 ns". */
    unsigned char launch[9] = {{0, 1, 0, 0, 0, 0, 0, 0, 0}};
    send_msg(sock, launch, sizeof launch);
    /* Whatever is asked next (the arena's hash, once), answered with the
       recorded hash; then never return, so no honest reply follows. */
    for (;;) {{
        unsigned char req[4096];
        if (read(sock, req, sizeof req) <= 0) for (;;) pause();
        unsigned char reply[33];
        reply[0] = 0;
        memcpy(reply + 1, hash, 32);
        send_msg(sock, reply, sizeof reply);
    }}
}}
"#,
        inverted = inverted.join(", "),
        secret = SECRET,
        stall = STALL_MS,
    )
}

fn rrstore(store: &Path, tmp: &Path, args: &[&str]) -> Output {
    store_common::command()
        .arg("--store")
        .arg(store)
        .args(args)
        .env("TMPDIR", tmp)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env_remove("RRSTORE_DIR")
        .env_remove("RRSTORE_CONFIG")
        .output()
        .unwrap()
}

/// A scratch directory with the store's path and an empty `TMPDIR`.
fn scratch() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    (dir, store, tmp)
}

/// The globals fixture copied into `dir` with its kernel replaced by
/// `c_code(kernel symbol)`.
fn hostile_recording(dir: &Path, c_code: impl FnOnce(&str) -> String) -> PathBuf {
    rrstore_tests::recording_with_kernel(&fixtures().join(GLOBALS), &dir.join("rec"), c_code)
}

#[test]
fn a_hostile_image_that_answers_for_the_runner_gets_no_verified_verdict() {
    let (dir, store, tmp) = scratch();
    let fixture = fixtures().join(GLOBALS);
    let output = std::fs::read(fixture.with_extension("original.output")).unwrap();
    let recorded = *blake3::hash(&output).as_bytes();
    let j = hostile_recording(dir.path(), |kernel| hostile_c(kernel, &recorded));
    let o = rrstore(&store, &tmp, &["import", j.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let imported = String::from_utf8_lossy(&o.stdout).to_string();
    let id = imported
        .split('"')
        .find(|s| s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| panic!("no recording ID in {imported}"))
        .to_string();

    // Straight from the recording's files and from the store, confined
    // and not: a mismatch, with rrstore's own time.
    let j = j.to_str().unwrap();
    for (source, sandbox) in [(j, "auto"), (&id[..12], "auto"), (&id[..12], "off")] {
        let args = ["replay", source, "--json", "--sandbox", sandbox];
        let o = rrstore(&store, &tmp, &args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {stderr}"));
        assert_eq!(v["verdict"], "mismatch", "{args:?}: {v}");
        assert_ne!(
            v["output_blake3"].as_str(),
            Some(blake3::Hash::from(recorded).to_hex().as_str()),
            "{args:?}"
        );
        let kernel_ns = v["timing"]["kernel_ns"][0].as_u64().unwrap();
        assert!(
            kernel_ns >= STALL_MS * 1_000_000,
            "{args:?}: the kernel time is the image's: {kernel_ns} ns"
        );
        let out = v["kernel_output"].as_str().unwrap();
        assert!(out.contains("socket: found"), "{args:?}: {out}");
        assert!(out.contains("hash-in-memory: denied"), "{args:?}: {out}");
        if sandbox != "off" {
            // `--sandbox off` keeps the user's environment on purpose.
            assert!(out.contains("environ-secret: denied"), "{args:?}: {out}");
        }
    }

    // The regression check reports it as what it is, not a pass.
    let junit = dir.path().join("junit.xml");
    let o = rrstore(
        &store,
        &tmp,
        &[
            "check",
            "--repetitions",
            "1",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    // Its earlier replays in this store differed the same way: check calls
    // it a known difference from the recording (exit 0, JUnit skipped),
    // never a pass.
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("differs from recording (known)"),
        "{stdout}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<skipped"), "{xml}");
    assert!(
        !stdout.contains("VERIFIED") && !stdout.contains("passed "),
        "{stdout}"
    );
}

/// Issue 39 item 5: a runner that filled its arena from the store's pack
/// files could read them again once confined, and a pack holds other
/// recordings' data. Two recordings imported together share a pack; the
/// hostile one's image is told the pack paths (through an `OMP_*`
/// variable, which the runner's scrubbed environment keeps) and tries to
/// read them: it gets nothing, and its input still came from the pack.
#[test]
fn a_hostile_image_cannot_read_the_packs_its_input_came_from() {
    let (dir, store, tmp) = scratch();
    let saxpy = fixtures().join("llvm22-host/saxpy");
    let mut kernel = String::new();
    let j = hostile_recording(dir.path(), |k| {
        kernel = k.to_string();
        format!(
            r#"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
void {kernel}(long kle, long out) {{
    const char *list = getenv("OMP_RRSTORE_TEST_PACKS");
    char paths[8192];
    snprintf(paths, sizeof paths, "%s", list ? list : "");
    int tried = 0;
    for (char *p = strtok(paths, ":"); p; p = strtok(NULL, ":")) {{
        char buf[64];
        int fd = open(p, O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
        printf("pack-read %s: %s\n", p, n > 0 ? "SUCCEEDED" : "denied");
        tried++;
    }}
    printf("packs tried: %d\n", tried);
    fflush(stdout);
}}
"#
        )
    });
    let o = rrstore(
        &store,
        &tmp,
        &[
            "import",
            j.to_str().unwrap(),
            saxpy.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut packs = Vec::new();
    let mut dirs = vec![store.join("packs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                packs.push(e.path().to_string_lossy().into_owned());
            }
        }
    }
    assert!(!packs.is_empty(), "no pack in {}", store.display());
    let id = rrstore(&store, &tmp, &["ls", "--kernel", &kernel, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&id.stdout).unwrap();
    let id = v[0]["id"].as_str().unwrap().to_string();
    let o = store_common::command()
        .arg("--store")
        .arg(&store)
        .args(["replay", &id[..12], "--json"])
        .env("TMPDIR", &tmp)
        .env("OMP_RRSTORE_TEST_PACKS", packs.join(":"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    // The input reached the arena from the pack, before the image loaded.
    assert_eq!(v["timing"]["rehydrate_path"], "files", "{v}");
    let out = v["kernel_output"].as_str().unwrap();
    assert!(
        out.contains(&format!("packs tried: {}", packs.len())),
        "{out}"
    );
    assert!(!out.contains("SUCCEEDED"), "{out}");
}

/// A runner that answers the launch itself and then ends gets no verdict
/// on bytes nobody read. Two honest outcomes race: rrstore stops the
/// runner before its `_exit` (it then reads the arena itself and finds
/// the kernel wrote nothing: MISMATCH, exit 1), or the runner is gone
/// first (the replay reports how the process ended, exit 12). Never
/// VERIFIED, and never a hash rrstore did not compute.
#[test]
fn a_runner_that_ends_after_forging_the_launch_reply_gets_no_verdict() {
    let (dir, store, tmp) = scratch();
    let j = hostile_recording(dir.path(), |kernel| {
        format!(
            r#"
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
void {kernel}(long kle, long out) {{
    for (int fd = 3; fd < 1024; fd++) {{
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {{
            unsigned char msg[5] = {{1, 0, 0, 0, 0}};
            write(fd, msg, sizeof msg);
            break;
        }}
    }}
    _exit(0);
}}
"#
        )
    });
    let o = rrstore(&store, &tmp, &["replay", j.to_str().unwrap(), "--json"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    match o.status.code() {
        // Stopped in time: rrstore read the untouched output itself.
        Some(1) => {
            assert_eq!(v["verdict"], "mismatch", "{v}");
            assert!(
                v["mismatch"]["differing_bytes"].as_u64().unwrap() > 0,
                "{v}"
            );
        }
        // Gone first: as any runner that exits before its kernel returned.
        Some(12) => {
            assert_eq!(v["verdict"], "error", "{v}");
            assert_eq!(v["output_blake3"], serde_json::Value::Null, "{v}");
            assert!(
                v["error"]
                    .as_str()
                    .unwrap()
                    .contains("ended the replay process"),
                "{v}"
            );
        }
        other => panic!("exit {other:?}: {stderr}\n{v}"),
    }
}
