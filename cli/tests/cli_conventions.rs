//! Issue 22's remaining conventions through the real binary: `--quiet` on
//! import/push/pull, `history` filters, `image rm`, `--json` on `record`
//! and `image rm`, the configured default remote, demangled kernel names.

mod store_common;

use std::path::Path;

use store_common::*;

fn saxpy() -> String {
    fixtures().join("llvm22-host/saxpy").display().to_string()
}

fn add_file_remote(store: &Path, name: &str, dir: &Path) {
    ok(
        store,
        &["remote", "add", name, &format!("file://{}", dir.display())],
    );
}

#[test]
fn quiet_import_push_pull_print_only_the_summary_line() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    let out = ok(&s, &["import", "--quiet", &saxpy()]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("imported 1 recording(s)"), "{out}");
    add_file_remote(&s, "r", &t.path().join("r"));
    let out = ok(&s, &["push", "-q", "r", "--all"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("pushed 1 recording(s)"), "{out}");
    let s2 = t.path().join("s2");
    add_file_remote(&s2, "r", &t.path().join("r"));
    let out = ok(&s2, &["pull", "--quiet", "r", "--all"]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("pulled 1 recording(s)"), "{out}");
    // Without --quiet the per-recording line comes first.
    let out = ok(&s2, &["import", &saxpy()]);
    assert_eq!(out.lines().count(), 2, "{out}");
}

/// Rows of `history --json` with `args`: (recording ID, row ID).
fn history_rows(store: &Path, args: &[&str]) -> Vec<(String, i64)> {
    let mut all = vec!["history", "--json"];
    all.extend_from_slice(args);
    let v: serde_json::Value = serde_json::from_str(&ok(store, &all)).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["recording"].as_str().unwrap().to_string(),
                r["id"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn history_filters_by_kernel_label_time_and_count() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    let host = fixtures().join("llvm22-host");
    let red = host.join("reduction").display().to_string();
    ok(&s, &["import", "--label", "a-run", &saxpy()]);
    ok(&s, &["import", "--label", "b-run", &red]);
    let ids = ls_ids(&s);
    for id in ids.iter().chain(ids.iter()) {
        ok(&s, &["replay", &id[..12]]);
    }
    assert_eq!(history_rows(&s, &[]).len(), 4);
    let saxpy_id = &history_rows(&s, &["--kernel", "*9ae056*"]);
    assert_eq!(saxpy_id.len(), 2);
    let by_label = history_rows(&s, &["--label", "a-*"]);
    assert_eq!(&by_label, saxpy_id);
    assert!(history_rows(&s, &["--label", "nothing*"]).is_empty());
    let all = history_rows(&s, &[]);
    assert_eq!(history_rows(&s, &["--limit", "3"]), all[1..].to_vec());
    let b = history_rows(&s, &["--label", "b-run"]);
    assert_eq!(b.len(), 2);
    assert_eq!(
        history_rows(&s, &["--label", "b-run", "--limit", "1"]),
        b[1..].to_vec()
    );
    assert_eq!(history_rows(&s, &["--since", "1d"]), all);
    assert!(history_rows(&s, &["--since", "2999-01-01"]).is_empty());
    let out = ok(&s, &["history", "--kernel", "*9ae056*"]);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert_eq!(fails(&s, &["history", "--since", "soon"]).0, 2);
}

fn image_ls(store: &Path) -> Vec<String> {
    let v: serde_json::Value =
        serde_json::from_str(&ok(store, &["image", "ls", "--json"])).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|i| i["label"].as_str().unwrap().to_string())
        .collect()
}

/// The `.image` file of fixture recording `dir`.
fn fixture_image(dir: &str) -> String {
    std::fs::read_dir(fixtures().join("llvm22-host").join(dir))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "image"))
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn image_rm_drops_the_row_and_gc_frees_the_bytes() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    ok(&s, &["import", &saxpy()]);
    // An image no recording shares (reduction's), and saxpy's own.
    ok(
        &s,
        &[
            "image",
            "add",
            &fixture_image("reduction"),
            "--label",
            "red",
        ],
    );
    ok(
        &s,
        &["image", "add", &fixture_image("saxpy"), "--label", "sax"],
    );
    ok(&s, &["replay", "d7e4", "--image", "sax"]);
    // A name that resolves to nothing: exit 3, nothing removed.
    let (code, err) = fails(&s, &["image", "rm", "red", "no-such-image"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no-such-image"), "{err}");
    assert_eq!(image_ls(&s), ["red", "sax"]);
    let out = ok(&s, &["image", "rm", "red", "sax"]);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.starts_with("removed image "), "{out}");
    assert!(image_ls(&s).is_empty());
    // The history row still names the image; the recording still replays.
    let h: serde_json::Value = serde_json::from_str(&ok(&s, &["history", "--json"])).unwrap();
    assert_eq!(h.as_array().unwrap().len(), 1);
    let gc = ok(&s, &["gc"]);
    assert!(!gc.starts_with("removed 0 chunk(s)"), "{gc}");
    ok(&s, &["verify", "--full"]);
    ok(&s, &["replay", "d7e4"]);
    assert_eq!(fails(&s, &["image", "rm", "sax"]).0, 3);
}

#[test]
fn record_json_is_the_import_summary_and_the_exit_status() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    let app = t.path().join("app");
    std::fs::write(
        &app,
        format!(
            "#!/bin/sh\necho program output\ncp {}/* .\nexit 3\n",
            saxpy()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&app)
        .status()
        .unwrap();
    let o = run(&s, &["record", "--json", "--", app.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["imported"], 1);
    assert_eq!(v["exit_code"], 3);
    assert!(v["signal"].is_null());
    assert_eq!(
        v["recordings"][0]["kernel"],
        "__omp_offloading_fe00_9ae056_main_l13"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("program output"));
}

/// `rrstore --store STORE args...` with configuration file `config`.
fn with_config(config: &Path, store: &Path, args: &[&str]) -> std::process::Output {
    store_common::command()
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("RRSTORE_DIR")
        .env("RRSTORE_CONFIG", config)
        .output()
        .unwrap()
}

fn remote_ids(store: &Path, remote: &str) -> Vec<String> {
    let out = ok(store, &["ls", &format!("{remote}:"), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_configured_remote_is_the_default_of_push_pull_and_ls() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    let config = t.path().join("config.toml");
    std::fs::write(&config, "remote = \"lab\"\n").unwrap();
    let host = fixtures().join("llvm22-host");
    ok(
        &s,
        &["import", &saxpy(), host.join("reduction").to_str().unwrap()],
    );
    add_file_remote(&s, "lab", &t.path().join("lab"));
    add_file_remote(&s, "other", &t.path().join("other"));
    // No remote named, none configured: a usage error, nothing sent.
    assert_eq!(fails(&s, &["push", "--all"]).0, 2);
    // A first word that is no remote is an ID, sent to the default.
    expect_ok(with_config(&config, &s, &["push", "d7e4"]), &["push"]);
    assert_eq!(remote_ids(&s, "lab").len(), 1);
    assert!(remote_ids(&s, "lab")[0].starts_with("d7e4"));
    // A remote named wins over the default.
    expect_ok(
        with_config(&config, &s, &["push", "other", "--all"]),
        &["push"],
    );
    assert_eq!(remote_ids(&s, "other").len(), 2);
    assert_eq!(remote_ids(&s, "lab").len(), 1);
    expect_ok(with_config(&config, &s, &["push", "--all"]), &["push"]);
    let listed = expect_ok(with_config(&config, &s, &["ls", ":", "--json"]), &["ls"]);
    let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    assert_eq!(fails(&s, &["ls", ":"]).0, 2);
    // Pull from the default into another store.
    let s2 = t.path().join("s2");
    add_file_remote(&s2, "lab", &t.path().join("lab"));
    let out = expect_ok(
        with_config(&config, &s2, &["pull", "-q", "--all"]),
        &["pull"],
    );
    assert!(out.starts_with("pulled 2 recording(s)"), "{out}");
    // Only the remote named, nothing selected: a usage error.
    let o = with_config(&config, &s2, &["pull", "lab"]);
    assert_eq!(o.status.code(), Some(2));
}

const STEP_RAW: &str = "__omp_offloading_fe00_9ae059__ZL4stepPfS_i_l7";
const STEP_SHOWN: &str = "__omp_offloading_fe00_9ae059_step(float*, float*, int)_l7";

#[test]
fn human_ls_show_check_and_history_changes_show_cpp_kernels_demangled() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    let multi = fixtures().join("llvm22-host/multi");
    ok(&s, &["import", "--label", "multi", multi.to_str().unwrap()]);
    let ls = ok(&s, &["ls"]);
    assert!(ls.contains(STEP_SHOWN), "{ls}");
    assert!(!ls.contains(STEP_RAW), "{ls}");
    // Columns stay aligned: every line's TARGET column starts at one place.
    let col = ls.lines().next().unwrap().find("TARGET").unwrap();
    for l in ls.lines().skip(1) {
        assert_eq!(&l[col..col + 6], "x86_64", "{ls}");
    }
    // JSON keeps the raw name.
    let json = ok(&s, &["ls", "--json"]);
    assert!(json.contains(STEP_RAW) && !json.contains("step(float"));
    let step = json_id_of(&json, STEP_RAW);
    let show = ok(&s, &["show", &step[..12]]);
    assert!(
        show.contains(&format!("{STEP_SHOWN} (raw: {STEP_RAW})")),
        "{show}"
    );
    let check = ok(&s, &["check", "--kernel", "*stepPfS*"]);
    assert!(check.contains(STEP_SHOWN), "{check}");
    assert!(!check.contains(STEP_RAW), "{check}");
    // history --changes names kernels: two runs with different team counts
    // of the step kernel give different outputs only if the kernel is
    // launch-dependent, so only check what it prints when it lists one.
    ok(&s, &["replay", &step[..12]]);
    ok(&s, &["replay", &step[..12], "--num-threads", "1"]);
    let changes = ok(&s, &["history", "--changes"]);
    assert!(!changes.contains(STEP_RAW), "{changes}");
}

fn json_id_of(json: &str, kernel: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .find(|r| r["kernel"] == kernel)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}
