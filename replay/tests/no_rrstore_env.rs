//! The library crates (format, store, replay, report) read no `RRSTORE_*`
//! environment variable: every `RRSTORE_*` knob is an option the CLI fills
//! (`cli/src/flags/env.rs`). The only `RRSTORE_*` variables read in them
//! are the internal protocol between `rrstore` and its own runner
//! processes, `sandbox::env::FROM_PARENT` (docs/architecture.md).
//!
//! The check reads the crates' sources: a read is an `RRSTORE_` name
//! written out in code other than a constant's definition
//! (`var("RRSTORE_…")`, `env("RRSTORE_…")`), or `var(NAME)` /
//! `var_os(NAME)` of a constant whose value is an `RRSTORE_` name. Test code (a file's `#[cfg(test)]`
//! module onwards, and `tests.rs` files) is not the library's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rrstore_replay::sandbox::env::FROM_PARENT;

const CRATES: &[&str] = &["format", "store", "replay", "report"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs")
            && p.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
}

/// A file's library code: up to its `#[cfg(test)] mod` (a test-only item
/// elsewhere is still scanned).
fn library_code(text: &str) -> &str {
    match text.find("\n#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// The `RRSTORE_*` variables `root`'s library crates read outside the
/// runner protocol: "file:line: variable" each.
fn reads(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for c in CRATES {
        sources(&root.join(c).join("src"), &mut files);
    }
    assert!(
        files.len() > 50,
        "the crates' sources under {}",
        root.display()
    );
    let texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|f| {
            let t = std::fs::read_to_string(&f).unwrap();
            (f, t)
        })
        .collect();
    // Constants holding an `RRSTORE_` name, by name.
    let mut consts: HashMap<String, String> = HashMap::new();
    for (_, t) in &texts {
        for line in library_code(t).lines() {
            let Some((lhs, rhs)) = line.split_once(": &str = \"RRSTORE_") else {
                continue;
            };
            let Some(name) = lhs.split_whitespace().last() else {
                continue;
            };
            let value = rhs.split('"').next().unwrap_or_default();
            consts.insert(name.to_string(), format!("RRSTORE_{value}"));
        }
    }
    let mut found = Vec::new();
    for (file, t) in &texts {
        for (n, line) in library_code(t).lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let mut vars = Vec::new();
            // A name written out in code (not a constant's definition):
            // `var("RRSTORE_X")`, `env("RRSTORE_X")`, a list of names.
            if !line.contains(": &str = \"RRSTORE_") {
                for (at, _) in line.match_indices("\"RRSTORE_") {
                    let name = line[at + 1..].split('"').next().unwrap_or_default();
                    vars.push(name.to_string());
                }
            }
            // A constant's name read: `var(NAME)`, `var_os(path::NAME)`.
            for call in ["var(", "var_os("] {
                for (at, _) in line.match_indices(call) {
                    let ident: String = line[at + call.len()..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    let last = ident.rsplit("::").next().unwrap_or_default();
                    vars.extend(consts.get(last).cloned());
                }
            }
            for v in vars
                .into_iter()
                .filter(|v| !FROM_PARENT.contains(&v.as_str()))
            {
                found.push(format!("{}:{}: {v}", file.display(), n + 1));
            }
        }
    }
    found
}

#[test]
fn library_crates_read_no_rrstore_variable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let found = reads(&root);
    assert!(
        found.is_empty(),
        "library crates read RRSTORE_* variables (make them options the CLI fills, \
         cli/src/flags/env.rs):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_a_read() {
    // A read of each form in a crate's source is found.
    let t = tempfile::tempdir().unwrap();
    for c in CRATES {
        let src = t.path().join(c).join("src");
        std::fs::create_dir_all(&src).unwrap();
        for i in 0..20 {
            std::fs::write(src.join(format!("m{i}.rs")), "fn f() {}\n").unwrap();
        }
    }
    std::fs::write(
        t.path().join("store/src/knob.rs"),
        "const KNOB: &str = \"RRSTORE_KNOB\";\n\
         fn a() { std::env::var(\"RRSTORE_MACHINE\"); }\n\
         fn b() { std::env::var_os(self::KNOB); }\n\
         fn c() { std::env::var(\"RRSTORE_SANDBOX\"); }\n\
         fn e() { let env = |k: &str| k; env(\"RRSTORE_DIR\"); }\n\
         // std::env::var(\"RRSTORE_COMMENT\")\n\
         #[cfg(test)]\nfn g() { std::env::var(\"RRSTORE_HELPER\"); }\n\
         #[cfg(test)]\nmod tests { fn d() { std::env::var(\"RRSTORE_TEST\"); } }\n",
    )
    .unwrap();
    let found = reads(t.path());
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(
        found[0].ends_with("knob.rs:2: RRSTORE_MACHINE"),
        "{found:?}"
    );
    assert!(found[1].ends_with("knob.rs:3: RRSTORE_KNOB"), "{found:?}");
    assert!(found[2].ends_with("knob.rs:5: RRSTORE_DIR"), "{found:?}");
    assert!(found[3].ends_with("knob.rs:8: RRSTORE_HELPER"), "{found:?}");
}
