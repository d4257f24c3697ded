//! Issue 44 item 3: a kernel given the address of a `declare target`
//! global (a program passing its global table to a kernel), directly and
//! through a pointer stored in the arena. Real programs built with
//! clang-22 and recorded here; `inspect`/`show` name the global, and the
//! replay rebases the addresses to its own copy of the global at the
//! recorded address, relocated, and with `--image` (another build, whose
//! global lies elsewhere), and verifies.

mod store_common;

use std::path::{Path, PathBuf};

use rrstore_tests::offload::{record_one, recording_runtime, Source};
use store_common::{command, expect_ok};

/// `{PAD}` is replaced by nothing, or by another global before the table
/// (the same lines: the kernel's name keeps its line number).
const TABLE: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <omp.h>
#pragma omp declare target
{PAD}double g_table[256];
#pragma omp end declare target
struct Ctx { double *tab; long n; };
int main() {
  const int n = 1024;
  double *x = (double *)malloc(n * sizeof(double));
  for (int i = 0; i < n; i++) x[i] = i * 0.5;
  for (int i = 0; i < 256; i++) g_table[i] = i * 2.0 + 1.0;
#pragma omp target update to(g_table)
  double *tab = (double *)omp_get_mapped_ptr(g_table, omp_get_default_device());
  Ctx *ctx = (Ctx *)malloc(sizeof(Ctx));
  ctx->tab = tab + 8;
  ctx->n = 256;
#pragma omp target teams distribute parallel for map(tofrom : x[0:n]) map(to : ctx[0:1]) is_device_ptr(tab)
  for (int i = 0; i < n; i++) x[i] = x[i] * ctx->tab[i % 128] + tab[0];
  printf("x[7]=%.2f\n", x[7]);
  fflush(stdout);
  _Exit(0);
}
"#;

/// Build `TABLE` (with `pad`) in `dir` and record it; the descriptor.
fn build_and_record(dir: &Path, src: &Source, pad: &str, name: &str) -> PathBuf {
    src.rewrite(&TABLE.replace("{PAD}", pad));
    let app = dir.join(name);
    src.build(&app, &[]);
    let runtime = recording_runtime(dir);
    let (o, found) = record_one(&app, &dir.join(format!("rec-{name}")), &runtime, &[]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "x[7]=109.50\n");
    found
}

fn rr(store: &Path, args: &[&str]) -> std::process::Output {
    command()
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_kernel_given_a_global_tables_address_replays_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let src = Source::new(&dir.path().join("src"), "table.cpp", "");
    let desc = build_and_record(dir.path(), &src, "", "table");
    let desc = desc.to_str().unwrap();
    let store = dir.path().join("store");

    // inspect names the global; JSON says which and where in it.
    let o = rr(&store, &["inspect", desc]);
    let text = expect_ok(o, &["inspect"]);
    assert!(text.contains("global g_table+0"), "{text}");
    let o = rr(&store, &["inspect", desc, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&expect_ok(o, &["inspect --json"])).unwrap();
    let globals: Vec<&serde_json::Value> = v["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "global")
        .collect();
    assert_eq!(globals.len(), 1, "{v}");
    assert_eq!(globals[0]["global"]["name"], "g_table");
    assert_eq!(globals[0]["global"]["offset"], 0);
    assert_eq!(globals[0]["display"], "global g_table+0");

    // Imported, `show` says the same.
    let o = rr(&store, &["import", desc]);
    expect_ok(o, &["import"]);
    let o = rr(&store, &["ls", "--json"]);
    let ls: serde_json::Value = serde_json::from_str(&expect_ok(o, &["ls"])).unwrap();
    let id = ls[0]["id"].as_str().unwrap().to_string();
    let o = rr(&store, &["show", &id[..12]]);
    assert!(expect_ok(o, &["show"]).contains("global g_table+0"));
    // The pointer stored in the arena (ctx->tab = tab + 8: 64 bytes in).
    let o = rr(&store, &["show", &id[..12], "--pointers", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&expect_ok(o, &["show --pointers"])).unwrap();
    let stored = v["pointers"]["globals"].as_array().unwrap();
    assert_eq!(stored.len(), 1, "{v}");
    assert_eq!(stored[0]["global"]["name"], "g_table");
    assert_eq!(stored[0]["global"]["offset"], 64);
    let o = rr(&store, &["show", &id[..12], "--pointers"]);
    assert!(expect_ok(o, &["show --pointers"]).contains("-> global g_table+64"));

    // Replayed at the recorded address and relocated: the argument and the
    // pointer stored in the arena (ctx->tab) move to the runner's copy.
    for placement in ["recorded", "relocate"] {
        let o = rr(
            &store,
            &["replay", &id[..12], "--placement", placement, "--json"],
        );
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{placement}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(r["verdict"], "verified", "{placement}: {out}");
        assert_eq!(r["placement"]["global_addresses"], 2, "{placement}: {out}");
    }
    let o = rr(&store, &["history", "--json"]);
    let h = expect_ok(o, &["history"]);
    assert_eq!(h.matches("2 global address(es) rebased").count(), 2, "{h}");

    // Another build whose table lies 8000 bytes further into the image:
    // the addresses follow the global by name.
    let other = build_and_record(dir.path(), &src, "double g_pad[1000]; ", "padded");
    let image = other.with_extension("image");
    let o = rr(
        &store,
        &["replay", &id[..12], "--image", image.to_str().unwrap()],
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("VERIFIED"), "{out}");
}
