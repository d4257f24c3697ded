//! The tests' command builder (`store_common::command`) keeps the
//! configuration of whoever runs the tests out: a hostile configuration in
//! the home, `$XDG_CONFIG_HOME` and `$RRSTORE_CONFIG` of this process (what
//! every `rrstore` a test starts would inherit) changes nothing. Alone in
//! its test binary because it changes this process's environment.

mod store_common;

use store_common::*;

#[test]
fn a_hostile_user_configuration_does_not_reach_the_tests() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let cfg = home.join(".config/rrstore/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    // An unknown key fails every command (exit 4) when the file is read; a
    // kernel time limit of 1 ms and a store elsewhere would change results.
    let hostile =
        "store = \"/nonexistent/rrstore\"\ntimeout = 0.001\nsandbox = \"off\"\nhostile = 1\n";
    std::fs::write(&cfg, hostile).unwrap();
    let xdg = tmp.path().join("xdg");
    std::fs::create_dir_all(xdg.join("rrstore")).unwrap();
    std::fs::write(xdg.join("rrstore/config.toml"), hostile).unwrap();
    std::env::set_var("HOME", &home);
    std::env::set_var("XDG_CONFIG_HOME", &xdg);
    std::env::set_var("RRSTORE_CONFIG", &cfg);
    std::env::set_var("RRSTORE_DIR", tmp.path().join("elsewhere"));

    // The hostile configuration is live for a plain command...
    let o = std::process::Command::new(bin())
        .args(["stats"])
        .output()
        .unwrap();
    let (code, err) = expect_failure(o, &["stats"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("hostile"), "{err}");

    // ...and the builder's commands do not see it: they run, in their own
    // store, with the defaults.
    let store = tmp.path().join("store");
    ok(
        &store,
        &[
            "import",
            fixtures().join("llvm22-host/saxpy").to_str().unwrap(),
        ],
    );
    let ids = ls_ids(&store);
    assert_eq!(ids.len(), 1);
    let out = ok(&store, &["replay", &ids[0][..8], "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["verdict"], "verified", "{out}");
    assert!(!tmp.path().join("elsewhere").exists());
    let home_cfg = isolated_home().join("config/rrstore/config.toml");
    assert!(!home_cfg.exists());
}
