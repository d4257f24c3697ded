//! Every `--json` output checked against its schema in `docs/json/`
//! (documented field by field in `docs/json.md`), on real fixtures and a
//! real store.
//!
//! The checker and the subset of JSON Schema it enforces are in
//! `schema_common`; the outputs of replays of IR compiled by rrstore
//! (non-null `compiled`) are checked in json_schema_compiled.rs. Every
//! object key a schema lists must also be documented in `docs/json.md`.

mod remote_common;
mod schema_common;

use std::path::{Path, PathBuf};

use remote_common::{fixtures, ok, run};
use schema_common::{errors, repo, schema, validate};
use serde_json::Value;

/// The checker refuses what a schema excludes (so a passing check means
/// something): wrong type, missing or unknown key, non-hex ID, and byte
/// arrays unless they are accepted as the legacy form.
#[test]
fn the_checker_refuses_what_a_schema_excludes() {
    let root = schema("image-ls");
    let good = serde_json::json!([{"hash": "ab01", "len": 1, "target": "x86_64",
        "label": "", "source": "f", "added_at": 0}]);
    assert_eq!(errors(&root, &good, false), Vec::<String>::new());
    let bad = |f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut v = good.clone();
        f(v[0].as_object_mut().unwrap());
        v
    };
    let cases = [
        bad(&|o| {
            o.insert("len".into(), "1".into());
        }),
        bad(&|o| {
            o.remove("label");
        }),
        bad(&|o| {
            o.insert("extra".into(), 1.into());
        }),
        bad(&|o| {
            o.insert("hash".into(), "AB01".into());
        }),
        bad(&|o| {
            o.insert("hash".into(), serde_json::json!([1, 2]));
        }),
    ];
    for v in &cases {
        assert!(!errors(&root, v, false).is_empty(), "accepted {v}");
    }
    assert!(errors(&root, &cases[4], true).is_empty());
}

/// `rrstore --store S args` must succeed; its stdout checked against `name`.
fn json_of(store: &Path, name: &str, args: &[&str]) -> Value {
    validate(name, &ok(store, args))
}

fn image_of(dir: &str) -> PathBuf {
    std::fs::read_dir(fixtures().join(dir))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "image"))
        .unwrap()
}

#[test]
fn every_json_output_matches_its_schema() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("store");
    let saxpy = fixtures().join("saxpy");
    let saxpy = saxpy.to_str().unwrap();
    let all = fixtures();
    let all = all.to_str().unwrap();

    // Archives and LLVM descriptors.
    let rra = t.path().join("saxpy.rra");
    ok(&s, &["pack", saxpy, "-o", rra.to_str().unwrap()]);
    json_of(&s, "inspect", &["inspect", rra.to_str().unwrap(), "--json"]);
    json_of(&s, "inspect", &["inspect", saxpy, "--json"]);

    // The store.
    let imported = json_of(&s, "import", &["import", all, "--label", "run1", "--json"]);
    let ids: Vec<String> = imported["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let (a, b) = (ids[0].as_str(), ids[1].as_str());
    json_of(&s, "import", &["import", saxpy, "--json"]);
    json_of(&s, "tag", &["tag", a, "app=saxpy", "--json"]);
    let ls = json_of(&s, "ls", &["ls", "--json"]);
    assert_eq!(ls.as_array().unwrap().len(), ids.len());
    let shown = json_of(&s, "show", &["show", a, "--json"]);
    assert_eq!(shown["id"], a);
    json_of(&s, "stats", &["stats", "--json"]);
    json_of(&s, "verify", &["verify", "--json"]);
    json_of(&s, "verify", &["verify", "--full", a, "--json"]);

    // Replay and regressions.
    json_of(&s, "devices", &["devices", "--json"]);
    json_of(&s, "replay", &["replay", a, "--json"]);
    json_of(&s, "replay", &["replay", a, "--repetitions", "2", "--json"]);
    json_of(&s, "history", &["history", "--json"]);
    json_of(&s, "history", &["history", a, "--json"]);
    let img = image_of("saxpy");
    let other = image_of("reduction");
    ok(
        &s,
        &["image", "add", img.to_str().unwrap(), "--label", "img-a"],
    );
    ok(
        &s,
        &["image", "add", other.to_str().unwrap(), "--label", "img-b"],
    );
    json_of(&s, "image-ls", &["image", "ls", "--json"]);
    let o = run(&s, &["check", "--label", "run1", "--json"]);
    let checked = validate("check", &String::from_utf8_lossy(&o.stdout));
    // `a` was replayed before: its row has a time comparison to check.
    assert!(
        checked["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["time"].is_object()),
        "no check row with a time comparison"
    );
    // Fleet: two shards' results written to a directory, collected.
    let results = t.path().join("results");
    let dest = results.to_str().unwrap();
    for shard in ["0/2", "1/2"] {
        let a = [
            "check",
            "--label",
            "run1",
            "--shard",
            shard,
            "--run",
            "j",
            "--results",
            dest,
        ];
        let o = run(&s, &a);
        assert!(o.status.code().is_some_and(|c| c <= 1), "{a:?}");
    }
    let o = run(&s, &["check", "--collect", dest, "--run", "j", "--json"]);
    validate("check-collect", &String::from_utf8_lossy(&o.stdout));
    let o = run(&s, &["diff", a, b, "--json"]);
    let d = validate("diff", &String::from_utf8_lossy(&o.stdout));
    assert!(!d["arena"]["mismatch"]["largest"]
        .as_array()
        .unwrap()
        .is_empty());
    let o = run(&s, &["diff", "h:1", "h:2", "--json"]);
    validate("diff", &String::from_utf8_lossy(&o.stdout));
    let saxpy_id = ls
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kernel"] == img.file_stem().unwrap().to_str().unwrap())
        .map(|r| r["id"].as_str().unwrap().to_string())
        .unwrap();
    json_of(
        &s,
        "bisect",
        &[
            "bisect", &saxpy_id, "--images", "img-a", "img-a", "img-b", "--json",
        ],
    );
    let tuned = json_of(
        &s,
        "tune",
        &[
            "tune",
            &saxpy_id,
            "--threads",
            "1,2",
            "--repetitions",
            "4",
            "--json",
        ],
    );
    assert!(tuned["recordings"][0]["best"].is_object(), "{tuned}");
    // Completed replays with different outputs (a replay with another
    // kernel's image failed: no output, not a change): the reduction,
    // recorded with two threads, adds in another order on one.
    let reduction = fixtures().join("reduction");
    let imported = json_of(
        &s,
        "import",
        &["import", reduction.to_str().unwrap(), "--json"],
    );
    let red = imported["recordings"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for (threads, code) in [("2", 0), ("1", 1)] {
        let o = remote_common::rr(&s, &["replay", &red])
            .env("OMP_NUM_THREADS", threads)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(code), "OMP_NUM_THREADS={threads}");
    }
    let changes = json_of(&s, "history-changes", &["history", "--changes", "--json"]);
    assert!(!changes.as_array().unwrap().is_empty());

    // Sharing.
    let remote = format!("file://{}", t.path().join("remote").display());
    ok(&s, &["remote", "add", "lab", &remote]);
    json_of(&s, "remote-ls", &["remote", "ls", "--json"]);
    json_of(&s, "transfer", &["push", "lab", a, "--json"]);
    json_of(&s, "transfer", &["push", "lab", "--all", "--json"]);
    json_of(&s, "ls", &["ls", "lab:", "--json"]);
    ok(&s, &["rm", a]);
    let plan = json_of(
        &s,
        "gc",
        &["gc", "--dry-run", "--max-unused", "0", "--json"],
    );
    assert_eq!(plan["dry_run"], true);
    json_of(&s, "gc", &["gc", "--json"]);
    json_of(&s, "transfer", &["pull", "lab", a, "--json"]);

    // The index lost: repair rebuilds it from the packs.
    std::fs::write(s.join("index.sqlite"), b"").unwrap();
    let repaired = json_of(&s, "repair", &["repair", "--json"]);
    assert!(repaired["recordings"].as_u64().unwrap() > 0);

    // A replay of an LLVM descriptor, outside any store.
    let desc = std::fs::read_dir(fixtures().join("saxpy"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    json_of(&s, "replay", &["replay", desc.to_str().unwrap(), "--json"]);
    // ... and one whose recorded output was changed: a mismatch.
    let m = t.path().join("mismatch");
    std::fs::create_dir(&m).unwrap();
    for e in std::fs::read_dir(fixtures().join("saxpy"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(e.path(), m.join(e.file_name())).unwrap();
    }
    let out = std::fs::read_dir(&m)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".original.output"))
        .unwrap();
    let mut bytes = std::fs::read(&out).unwrap();
    bytes[1_048_576 + 64] ^= 0x40;
    std::fs::write(&out, &bytes).unwrap();
    let o = run(&s, &["replay", m.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let r = validate("replay", &String::from_utf8_lossy(&o.stdout));
    assert_eq!(r["mismatch"]["largest"][0]["span"], 1, "{r:#}");

    // verify with problems: a flipped bit in a store of its own.
    let c = t.path().join("corrupt");
    ok(&c, &["import", saxpy]);
    let fan = std::fs::read_dir(c.join("packs"))
        .unwrap()
        .flatten()
        .next()
        .unwrap();
    let pack = std::fs::read_dir(fan.path())
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&pack).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(&pack, &bytes).unwrap();
    let o = run(&c, &["verify", "--full", "--json"]);
    assert_eq!(o.status.code(), Some(5));
    let v = validate("verify", &String::from_utf8_lossy(&o.stdout));
    assert!(!v["problems"].as_array().unwrap().is_empty());
}

/// Every key a schema names is documented in docs/json.md's section for it.
/// The outputs of issue 22's `record --json` and `image rm --json`, and
/// `history` with its filters.
#[test]
fn record_image_rm_and_filtered_history_json_match_their_schemas() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("store");
    let app = t.path().join("app");
    let saxpy = fixtures().join("saxpy");
    std::fs::write(&app, format!("#!/bin/sh\ncp {}/* .\n", saxpy.display())).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&app)
        .status()
        .unwrap();
    let rec = json_of(
        &s,
        "record",
        &["record", "--json", "--", app.to_str().unwrap()],
    );
    assert_eq!(rec["exit_code"], 0);
    let id = rec["recordings"][0]["id"].as_str().unwrap().to_string();
    ok(&s, &["replay", &id]);
    let rows = json_of(
        &s,
        "history",
        &[
            "history", "--kernel", "*main*", "--label", "app", "--since", "1d", "--limit", "1",
            "--json",
        ],
    );
    assert_eq!(rows.as_array().unwrap().len(), 1);
    let img = image_of("reduction");
    ok(
        &s,
        &["image", "add", img.to_str().unwrap(), "--label", "img-b"],
    );
    let removed = json_of(&s, "image-rm", &["image", "rm", "img-b", "--json"]);
    assert_eq!(removed["removed"][0]["label"], "img-b");
}

#[test]
fn every_schema_key_is_documented() {
    let md = std::fs::read_to_string(repo().join("docs/json.md")).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(repo().join("docs/json"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".schema.json")
                .map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 15, "only {} schemas", names.len());
    let mut missing = Vec::new();
    for name in &names {
        let file = format!("docs/json/{name}.schema.json");
        let section = md
            .split("\n## ")
            .find(|s| s.contains(&file))
            .unwrap_or_else(|| panic!("docs/json.md has no section naming {file}"));
        let root = schema(name);
        let mut keys = Vec::new();
        collect_keys(&root, &root, "", &mut keys, 0);
        for k in keys {
            if !section.contains(&format!("`{k}`")) {
                missing.push(format!("{name}: `{k}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "keys not documented in docs/json.md:\n  {}",
        missing.join("\n  ")
    );
}

/// Dotted paths of every property (`launch.num_teams`, `args[].kind`).
fn collect_keys(root: &Value, s: &Value, prefix: &str, out: &mut Vec<String>, depth: usize) {
    if depth > 8 {
        return;
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        if let Some(t) = r
            .strip_prefix("#/$defs/")
            .and_then(|n| root["$defs"].get(n))
        {
            collect_keys(root, t, prefix, out, depth + 1);
        }
        return;
    }
    if let Some(p) = s.get("properties").and_then(Value::as_object) {
        for (k, sub) in p {
            let path = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            out.push(path.clone());
            collect_keys(root, sub, &path, out, depth + 1);
        }
    }
    if let Some(items) = s.get("items") {
        collect_keys(root, items, &format!("{prefix}[]"), out, depth + 1);
    }
    if let Some(e @ Value::Object(_)) = s.get("additionalProperties") {
        let path = if prefix.is_empty() {
            "*".to_string()
        } else {
            format!("{prefix}.*")
        };
        collect_keys(root, e, &path, out, depth + 1);
    }
}
