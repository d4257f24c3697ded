//! The configuration file through the real binary: `store` is the default
//! store after `--store` and `$RRSTORE_DIR`, `timeout` the default
//! `--timeout` of replay/check/bisect, `sandbox` the default `--sandbox`,
//! an unknown key or bad value fails
//! with the file named (exit 4), and `$RRSTORE_CONFIG` names another file.

mod store_common;

use std::path::Path;
use std::process::{Command, Output};

use store_common::*;

/// `rrstore args` with HOME and XDG_CONFIG_HOME in `home` (no --store).
fn rr(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    rr_cmd(home, env, args).output().unwrap()
}

fn rr_cmd(home: &Path, env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut c = store_common::command();
    c.args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("XDG_DATA_HOME")
        .env_remove("RRSTORE_DIR")
        .env_remove("RRSTORE_CONFIG");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn write_config(home: &Path, text: &str) -> std::path::PathBuf {
    let p = home.join("config/rrstore/config.toml");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_config_file_sets_the_default_store_and_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let cfg_store = home.join("cfg-store");
    write_config(
        home,
        &format!("store = {:?}\n", cfg_store.to_str().unwrap()),
    );
    let saxpy = fixtures().join("llvm22-host/saxpy");
    let saxpy = saxpy.to_str().unwrap();
    expect_ok(rr(home, &[], &["import", saxpy]), &["import"]);
    assert_eq!(
        ls_ids(&cfg_store).len(),
        1,
        "imported into the configured store"
    );
    let id = ls_ids(&cfg_store).remove(0);

    // $RRSTORE_DIR and --store come first.
    let env_store = home.join("env-store");
    let env = [("RRSTORE_DIR", env_store.to_str().unwrap())];
    expect_ok(rr(home, &env, &["import", saxpy]), &["import"]);
    assert_eq!(ls_ids(&env_store).len(), 1);
    let flag_store = home.join("flag-store");
    let args = ["--store", flag_store.to_str().unwrap(), "import", saxpy];
    expect_ok(rr(home, &[], &args), &args);
    assert_eq!(ls_ids(&flag_store).len(), 1);

    // A kernel that never returns: the configured timeout kills it (exit
    // 13); without it the replay would wait forever (the guard below).
    write_config(
        home,
        &format!("store = {:?}\ntimeout = 0.3\n", cfg_store.to_str().unwrap()),
    );
    let hang = hanging_recording(home);
    let o = guarded(rr_cmd(home, &[], &["replay", hang.to_str().unwrap()]));
    assert_eq!(
        o.status.code(),
        Some(13),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // An explicit --timeout still wins over the configured one.
    let o = rr(home, &[], &["replay", &id, "--timeout", "60"]);
    assert!(expect_ok(o, &["replay"]).contains("VERIFIED"));
}

/// A copy of the globals fixture whose kernel spins forever (descriptor).
fn hanging_recording(dir: &Path) -> std::path::PathBuf {
    let src = fixtures().join("llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13");
    rrstore_tests::recording_with_kernel(&src, dir, |stem| {
        format!("void {stem}(long a, long b) {{ volatile long n = 0; for (;;) n++; }}\n")
    })
}

/// Run, killing it if it has not finished after a minute (a guard against
/// a hang when the timeout is not applied, not a measurement).
fn guarded(mut c: Command) -> Output {
    let mut child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the replay was not stopped by the configured timeout");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_bad_config_file_is_named_and_exits_4() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let p = write_config(home, "stor = \"/tmp/x\"\n");
    let (code, err) = expect_failure(rr(home, &[], &["stats"]), &["stats"]);
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains(p.to_str().unwrap()) && err.contains("stor"),
        "{err}"
    );
    write_config(home, "timeout = -1\n");
    let (code, err) = expect_failure(rr(home, &[], &["stats"]), &["stats"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("at least 0.001"), "{err}");
    // Shorter than a replay can keep: refused, not silently unlimited.
    write_config(home, "timeout = 0.0004\n");
    let (code, err) = expect_failure(rr(home, &[], &["stats"]), &["stats"]);
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains("timeout = 0.0004") && err.contains("1 ms"),
        "{err}"
    );

    // A configuration file that is there but unreadable: exit 3, named.
    // (As root every file is readable, so only for other users.)
    let unreadable = home.join("unreadable.toml");
    std::fs::write(&unreadable, "timeout = 1\n").unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o000);
    std::fs::set_permissions(&unreadable, mode).unwrap();
    if std::fs::read(&unreadable).is_err() {
        let env = [("RRSTORE_CONFIG", unreadable.to_str().unwrap())];
        let (code, err) = expect_failure(rr(home, &env, &["stats"]), &["stats"]);
        assert_eq!(code, 3, "{err}");
        assert!(err.contains("unreadable.toml"), "{err}");
    }

    // $RRSTORE_CONFIG names another file, which is then the one read.
    let other = home.join("other.toml");
    let store = home.join("other-store");
    std::fs::write(&other, format!("store = {:?}\n", store.to_str().unwrap())).unwrap();
    let env = [("RRSTORE_CONFIG", other.to_str().unwrap())];
    // A store the configuration names is named explicitly, like --store:
    // a command that only reads does not create it, one that writes does.
    let (code, err) = expect_failure(rr(home, &env, &["stats"]), &["stats"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not an rrstore store"), "{err}");
    let saxpy = fixtures().join("llvm22-host/saxpy");
    expect_ok(
        rr(home, &env, &["import", saxpy.to_str().unwrap()]),
        &["import"],
    );
    assert!(store.join("index.sqlite").exists());
    expect_ok(rr(home, &env, &["stats"]), &["stats"]);
}

#[test]
fn the_config_file_sets_the_default_sandbox_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let store = home.join("store");
    let saxpy = fixtures().join("llvm22-host/saxpy");
    write_config(home, &format!("store = {:?}\n", store.to_str().unwrap()));
    expect_ok(
        rr(home, &[], &["import", saxpy.to_str().unwrap()]),
        &["import"],
    );
    let id = ls_ids(&store).remove(0);
    let warned = |o: &Output| String::from_utf8_lossy(&o.stderr).contains("--sandbox off");
    // Without a `sandbox` key: confined, no warning.
    let o = rr(home, &[], &["replay", &id]);
    assert!(!warned(&o), "{}", String::from_utf8_lossy(&o.stderr));
    // `sandbox = "off"` is the default then, with its warning ...
    write_config(
        home,
        &format!("store = {:?}\nsandbox = \"off\"\n", store.to_str().unwrap()),
    );
    let o = rr(home, &[], &["replay", &id]);
    assert!(warned(&o), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(expect_ok(o, &["replay"]).contains("VERIFIED"));
    // ... and the command line still wins.
    let o = rr(home, &[], &["replay", &id, "--sandbox", "auto"]);
    assert!(!warned(&o), "{}", String::from_utf8_lossy(&o.stderr));
    // A mode that does not exist is a bad configuration (exit 4).
    write_config(home, "sandbox = \"maybe\"\n");
    let (code, err) = expect_failure(rr(home, &[], &["stats"]), &["stats"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("sandbox"), "{err}");
}

/// A timeout past what a `Duration` holds (2^64 s) is a sentence and a
/// documented exit code, never a panic (exit 101): on the command line a
/// bad command line (2), in the configuration file a bad configuration (4).
#[test]
fn a_timeout_too_long_to_keep_is_refused_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let store = home.join("store");
    write_config(home, &format!("store = {:?}\n", store.to_str().unwrap()));
    let saxpy = fixtures().join("llvm22-host/saxpy");
    expect_ok(
        rr(home, &[], &["import", saxpy.to_str().unwrap()]),
        &["import"],
    );
    let id = ls_ids(&store).remove(0);
    for t in ["1e300", "18446744073709551616", "1.8446744073709552e19"] {
        let args = ["replay", id.as_str(), "--timeout", t];
        let (code, err) = expect_failure(rr(home, &[], &args), &args);
        assert_eq!(code, 2, "{t}: {err}");
        assert!(err.contains("longer than the longest limit"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    for t in ["1e300", "1.8446744073709552e19"] {
        let p = write_config(
            home,
            &format!("store = {:?}\ntimeout = {t}\n", store.to_str().unwrap()),
        );
        let args = ["replay", id.as_str()];
        let (code, err) = expect_failure(rr(home, &[], &args), &args);
        assert_eq!(code, 4, "{t}: {err}");
        assert!(
            err.contains(p.to_str().unwrap()) && err.contains("below 2^64"),
            "{err}"
        );
    }
}
