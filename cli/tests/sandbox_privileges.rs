//! The confined runner (docs/security.md, "The confined runner") against a
//! hostile host image, built here with `cc`, that tries to act on other
//! processes and to use root's capabilities: set `RLIMIT_FSIZE` to 0 on
//! rrstore and on an unrelated process (which would kill rrstore with
//! SIGXFSZ before its verdict), renice, reschedule, re-pin and lower the
//! I/O priority of both, and use what a capability allows: set the host
//! name, make a block and a character device in its scratch directory,
//! read the kernel log, pass `reboot`'s capability check (with
//! `LINUX_REBOOT_CMD_CAD_OFF`, a command that changes nothing that
//! matters but still needs `CAP_SYS_BOOT`) and hold any capability at
//! all. Each attempt, in the image's constructor and in its kernel,
//! prints what became of it; every one must fail, the unrelated process
//! must be as it was, and the verdict and exit code are rrstore's.
//!
//! As root (CI) the capability attempts are meaningful; as another user
//! they fail either way, and the test still holds.

mod store_common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output};

use rrstore_tests::fixtures;

const GLOBALS: &str = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13";

fn hostile_c(kernel: &str, other: u32) -> String {
    format!(
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <linux/capability.h>
#include <linux/reboot.h>
#include <unistd.h>

#define OTHER {other}

static void say(const char *when, const char *what, int ok) {{
    int e = errno;
    printf("%s %s: %s (%s)\n", when, what, ok ? "SUCCEEDED" : "denied", ok ? "-" : strerror(e));
}}

static void limits(const char *when, const char *what, pid_t pid) {{
    struct rlimit zero = {{0, 0}};
    errno = 0;
    say(when, what, prlimit(pid, RLIMIT_FSIZE, &zero, NULL) == 0);
}}

static void attempt(const char *when) {{
    pid_t parent = getppid();
    limits(when, "prlimit-rrstore", parent);
    limits(when, "prlimit-other", OTHER);
    errno = 0;
    say(when, "setpriority-rrstore", setpriority(PRIO_PROCESS, parent, 19) == 0);
    errno = 0;
    say(when, "setpriority-other", setpriority(PRIO_PROCESS, OTHER, 19) == 0);
    errno = 0;
    say(when, "setpriority-group", setpriority(PRIO_PGRP, OTHER, 19) == 0);
    struct sched_param sp = {{0}};
    errno = 0;
    say(when, "sched-other", sched_setscheduler(OTHER, SCHED_IDLE, &sp) == 0);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    errno = 0;
    say(when, "affinity-other", sched_setaffinity(OTHER, sizeof one, &one) == 0);
    errno = 0;
    /* IOPRIO_WHO_PROCESS, the idle class. */
    say(when, "ioprio-other", syscall(SYS_ioprio_set, 1, OTHER, 3 << 13) == 0);

    /* The same name again: harmless had it worked. */
    char host[256] = {{0}};
    gethostname(host, sizeof host - 1);
    errno = 0;
    say(when, "sethostname", sethostname(host, strlen(host)) == 0);
    char node[4096];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(node, sizeof node, "%s/block-%s", tmp, when);
    errno = 0;
    say(when, "mknod-block", mknod(node, S_IFBLK | 0600, makedev(7, 0)) == 0);
    snprintf(node, sizeof node, "%s/char-%s", tmp, when);
    errno = 0;
    say(when, "mknod-char", mknod(node, S_IFCHR | 0600, makedev(1, 1)) == 0);
    char log[256];
    errno = 0;
    say(when, "syslog", klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, sizeof log) >= 0);
    /* Anything but EPERM passed the capability check (EINVAL in a PID
       namespace; 0 outside one). */
    errno = 0;
    long rb = syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2,
                      LINUX_REBOOT_CMD_CAD_OFF, NULL);
    say(when, "reboot", !(rb < 0 && errno == EPERM));

    struct __user_cap_header_struct h = {{_LINUX_CAPABILITY_VERSION_3, 0}};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    errno = 0;
    int held = syscall(SYS_capget, &h, d) != 0
        || (d[0].effective | d[0].permitted | d[0].inheritable
            | d[1].effective | d[1].permitted | d[1].inheritable) != 0;
    say(when, "capabilities", held);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "CapAmb:", 7) || !strncmp(line, "CapBnd:", 7))
            printf("%s %s", when, line);
    if (f) fclose(f);
    printf("%s securebits: %d\n", when, prctl(PR_GET_SECUREBITS));
    fflush(stdout);
}}

__attribute__((constructor)) static void ctor(void) {{ attempt("ctor"); }}

void {kernel}(long kle, long out) {{ attempt("kernel"); }}
"#
    )
}

/// An unrelated process (in a process group of its own), killed on drop.
struct Other(Child);

impl Drop for Other {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the attacks would change of process `pid`: its file size limit
/// (`/proc/PID/limits`), nice value and scheduling policy (fields 19 and
/// 41 of `/proc/PID/stat`), CPUs (`/proc/PID/status`) and I/O priority.
fn state(pid: u32) -> Vec<String> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let fsize = limits
        .lines()
        .find(|l| l.starts_with("Max file size"))
        .unwrap()
        .to_string();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces), from field 3.
    let after: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let cpus = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list"))
        .unwrap()
        .to_string();
    // util-linux's, in every Debian image.
    let ioprio = Command::new("ionice")
        .arg("-p")
        .arg(pid.to_string())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    vec![
        fsize,
        format!("nice {}", after[19 - 3]),
        format!("policy {}", after[41 - 3]),
        cpus,
        format!("ioprio {}", ioprio.trim()),
    ]
}

/// Whether this test runs with `CAP_SETPCAP` (root): then the runner can
/// and must empty its bounding set and lock its securebits.
fn privileged() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap()
        .trim();
    const CAP_SETPCAP: u32 = 8;
    u64::from_str_radix(eff, 16).unwrap() & (1 << CAP_SETPCAP) != 0
}

fn rrstore(tmp: &Path, args: &[&str]) -> Output {
    store_common::command()
        .args(args)
        .env("TMPDIR", tmp)
        .output()
        .unwrap()
}

#[test]
fn a_hostile_image_cannot_act_on_other_processes_or_use_capabilities() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let other = Other(
        Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    let pid = other.0.id();
    let before = state(pid);

    let rec = dir.path().join("rec");
    let j = rrstore_tests::recording_with_kernel(&fixtures().join(GLOBALS), &rec, |kernel| {
        hostile_c(kernel, pid)
    });
    let j = j.to_str().unwrap();

    let o = rrstore(&tmp, &["replay", j, "--timeout", "60"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let all = format!("{stdout}{}", String::from_utf8_lossy(&o.stderr));
    // rrstore lived to give its own verdict (the kernel wrote nothing).
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(stdout.lines().any(|l| l == "MISMATCH"), "{all}");
    assert!(!all.contains("SUCCEEDED"), "{all}");
    let root = privileged();
    for when in ["ctor", "kernel"] {
        for what in [
            "prlimit-rrstore",
            "prlimit-other",
            "setpriority-rrstore",
            "setpriority-other",
            "setpriority-group",
            "sched-other",
            "affinity-other",
            "ioprio-other",
            "sethostname",
            "mknod-block",
            "mknod-char",
            "syslog",
            "reboot",
            "capabilities",
        ] {
            let line = format!("  kernel| {when} {what}: denied");
            assert!(
                stdout.lines().any(|l| l.starts_with(&line)),
                "{line}\n{all}"
            );
        }
        let amb = format!("  kernel| {when} CapAmb:\t0000000000000000");
        assert!(stdout.lines().any(|l| l == amb), "{amb}\n{all}");
        if root {
            // Nothing an exec could regain, and the rules locked.
            let bnd = format!("  kernel| {when} CapBnd:\t0000000000000000");
            assert!(stdout.lines().any(|l| l == bnd), "{bnd}\n{all}");
            // SECBIT_NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, each
            // with its lock, and KEEP_CAPS locked off.
            let bits = format!("  kernel| {when} securebits: {}", 0xef);
            assert!(stdout.lines().any(|l| l == bits), "{bits}\n{all}");
        }
    }
    assert_eq!(state(pid), before, "the unrelated process was changed");
    // No device node left behind (the scratch directory is gone).
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);

    // The report names the new mechanism.
    let o = rrstore(&tmp, &["replay", j, "--timeout", "60", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let applied = v["sandbox"]["applied"].as_array().unwrap();
    assert!(
        applied.iter().any(|m| m == "no_capabilities"),
        "{}",
        v["sandbox"]
    );
    assert_eq!(state(pid), before, "the unrelated process was changed");
}
