//! Colour in human output through the real binary: off when piped, on with
//! `--color always`, on a real terminal (a pseudo-terminal from util-linux
//! `script`) unless `NO_COLOR` is set or `TERM=dumb`, off with `--color
//! never`, and never in JSON.

mod store_common;

use std::process::Command;

use store_common::*;

const ESC: &str = "\x1b[";

/// Run `rrstore --store STORE args` on a pseudo-terminal; its output.
fn on_terminal(store: &std::path::Path, args: &str, env: &[(&str, &str)]) -> String {
    let line = format!("{} --store {} {args}", bin(), store.display());
    let mut c = Command::new("script");
    c.args(["-qec", &line, "/dev/null"]).env("TERM", "xterm");
    c.env_remove("NO_COLOR").env_remove("RRSTORE_DIR");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn verdicts_are_coloured_on_a_terminal_unless_no_color() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let saxpy = fixtures().join("llvm22-host/saxpy");
    ok(&s, &["import", saxpy.to_str().unwrap()]);
    let id = ls_ids(&s).remove(0);

    let piped = ok(&s, &["replay", &id]);
    assert!(!piped.contains(ESC), "{piped:?}");
    let forced = ok(&s, &["replay", &id, "--color", "always"]);
    assert!(
        forced.contains("\x1b[1;32mVERIFIED (byte-identical to the recorded output)\x1b[0m"),
        "{forced:?}"
    );
    let json = ok(&s, &["replay", &id, "--json", "--color", "always"]);
    assert!(!json.contains(ESC));
    serde_json::from_str::<serde_json::Value>(&json).unwrap();

    let tty = on_terminal(&s, &format!("replay {id}"), &[]);
    assert!(tty.contains("\x1b[1;32mVERIFIED"), "{tty:?}");
    let no_color = on_terminal(&s, &format!("replay {id}"), &[("NO_COLOR", "1")]);
    assert!(!no_color.contains(ESC), "{no_color:?}");
    assert!(no_color.contains("VERIFIED"));
    // An empty NO_COLOR does not count (no-color.org).
    let empty = on_terminal(&s, &format!("replay {id}"), &[("NO_COLOR", "")]);
    assert!(empty.contains(ESC), "{empty:?}");
    let dumb = on_terminal(&s, &format!("replay {id}"), &[("TERM", "dumb")]);
    assert!(!dumb.contains(ESC), "{dumb:?}");
    let never = on_terminal(&s, &format!("replay {id} --color never"), &[]);
    assert!(!never.contains(ESC), "{never:?}");
    let forced = on_terminal(
        &s,
        &format!("replay {id} --color always"),
        &[("NO_COLOR", "1")],
    );
    assert!(
        forced.contains(ESC),
        "an explicit --color always wins: {forced:?}"
    );

    let (code, err) = fails(&s, &["replay", &id, "--color", "sometimes"]);
    assert_eq!(code, 2, "{err}");
}
