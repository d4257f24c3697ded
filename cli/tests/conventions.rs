//! Command-line conventions through the real binary: `--version` names the
//! commit it was built from, `completions bash` completes subcommands in a
//! real bash, zsh and fish scripts are generated, and `man -o DIR` writes
//! a page per subcommand that `man` renders.

mod store_common;

use std::process::Command;

use store_common::*;

fn rrstore(args: &[&str]) -> std::process::Output {
    store_common::command().args(args).output().unwrap()
}

fn git(args: &[&str]) -> Option<String> {
    let o = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let o = rrstore(&["--version"]);
    assert!(o.status.success());
    let v = String::from_utf8(o.stdout).unwrap();
    // The build script's value (the tests are built with it too) ...
    let built = env!("RRSTORE_COMMIT");
    assert_eq!(
        v,
        format!("rrstore {} (commit {built})\n", env!("CARGO_PKG_VERSION"))
    );
    // ... is a commit of this repository, HEAD unless it moved since.
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        None => assert_eq!(built, "unknown"),
        Some(head) => {
            let c = built.trim_end_matches("-dirty");
            assert_eq!(c.len(), 12, "{built}");
            let full = git(&["rev-parse", "--verify", &format!("{c}^{{commit}}")]);
            assert!(full.is_some(), "{c} is not a commit here");
            let moved = git(&["rev-list", "--count", &format!("{c}..HEAD")]);
            if moved.as_deref() == Some("0") {
                assert_eq!(c, head);
            }
        }
    }
}

#[test]
fn bash_completes_subcommands_and_flags() {
    let script = String::from_utf8(rrstore(&["completions", "bash"]).stdout).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rrstore.bash");
    std::fs::write(&file, &script).unwrap();
    let complete = |words: &str, cword: usize| {
        let prog = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; _rrstore rrstore \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display()
        );
        let o = Command::new("bash").arg("-c").arg(prog).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let subs = complete("rrstore re", 1);
    let subs: Vec<&str> = subs.lines().collect();
    let mut subs = subs.to_vec();
    subs.sort_unstable();
    assert_eq!(
        subs,
        ["record", "remote", "repair", "replay", "report"],
        "`rrstore re<TAB>`"
    );
    let flags = complete("rrstore check --ju", 2);
    assert_eq!(flags.trim(), "--junit");

    let zsh = String::from_utf8(rrstore(&["completions", "zsh"]).stdout).unwrap();
    assert!(zsh.starts_with("#compdef rrstore") && zsh.contains("report"));
    let fish = String::from_utf8(rrstore(&["completions", "fish"]).stdout).unwrap();
    assert!(fish.contains("complete -c rrstore") && fish.contains("-l markdown"));
    let (code, err) = expect_failure(rrstore(&["completions", "tcsh"]), &["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn man_writes_a_page_per_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let o = rrstore(&["man", "-o", out.to_str().unwrap()]);
    let stdout = expect_ok(o, &["man"]);
    for page in [
        "rrstore.1",
        "rrstore-report.1",
        "rrstore-check.1",
        "rrstore-image-add.1",
    ] {
        let text = std::fs::read_to_string(out.join(page)).unwrap();
        assert!(
            text.starts_with(".ie \\n(.g .ds Aq") || text.contains(".TH"),
            "{page}"
        );
        assert!(text.contains(".TH "), "{page} has no title");
    }
    let n = std::fs::read_dir(&out).unwrap().count();
    assert!(stdout.starts_with(&format!("{n} man page(s)")), "{stdout}");
    let check = std::fs::read_to_string(out.join("rrstore-check.1")).unwrap();
    assert!(check.contains("junit") && check.contains("markdown"));
    // `man` (when installed) renders it.
    if let Ok(o) = Command::new("man")
        .arg("-l")
        .arg(out.join("rrstore-report.1"))
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
    {
        if o.status.success() {
            // Without the terminal's overstrike bold (`c\x08c`).
            let mut text = String::new();
            for c in String::from_utf8_lossy(&o.stdout).chars() {
                if c == '\x08' {
                    text.pop();
                } else {
                    text.push(c);
                }
            }
            assert!(
                text.contains("NAME") && text.contains("report - Write an HTML report with charts"),
                "{text}"
            );
        }
    }

    // A path under a regular file cannot be a directory: exit 3.
    let file = dir.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    let bad = file.join("man1");
    let (code, err) = expect_failure(rrstore(&["man", "-o", bad.to_str().unwrap()]), &["man"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("writing the man pages"), "{err}");
}
