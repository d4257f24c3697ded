//! IR images replayed (issue 41, item 2): one source built twice, ahead of
//! time (recorded) and with `-fopenmp-target-jit` (its device image is
//! LLVM bitcode); rrstore compiles the IR with LLVM 22 and the replay of
//! the ahead-of-time recording verifies byte for byte. The compiled image
//! is cached by content and carries its provenance. Bad IR, a missing or
//! too old toolchain, a failing, hanging or flag-rejecting compiler each
//! end with their own exit code and no cache entry; and the compiler runs
//! confined: a "compiler" that tries to write outside its scratch
//! directory cannot.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::Output;

use rrstore_tests::offload::{recorded_with_ir, Source};

const SAXPY: &str = r#"
#include <cstdio>
#include <cstdlib>
int main() {
  const int n = 4096;
  float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) { x[i] = i * 0.25f; y[i] = 1.0f / (i + 1); }
#pragma omp target teams distribute parallel for map(to : x[0:n]) map(tofrom : y[0:n])
  for (int i = 0; i < n; i++) y[i] = 2.5f * x[i] + y[i];
  printf("y[7]=%.4f\n", y[7]);
  fflush(stdout);
  _Exit(0);
}
"#;

/// The recording of the ahead-of-time build and the IR of the JIT build of
/// the same source file, made once per test process.
struct Built {
    _dir: tempfile::TempDir,
    descriptor: PathBuf,
    ir: PathBuf,
    /// The same kernel's device IR as LLVM 19's clang emits it.
    ir19: PathBuf,
}

fn built() -> &'static Built {
    static B: std::sync::OnceLock<Built> = std::sync::OnceLock::new();
    B.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let src = Source::new(&dir.path().join("src"), "saxpy.cpp", SAXPY);
        let (descriptor, ir) = recorded_with_ir(dir.path(), &src, "saxpy");
        let ir19 = dir.path().join("saxpy-19.bc");
        src.device_ir("/usr/lib/llvm-19/bin/clang++", &ir19);
        Built {
            descriptor,
            ir,
            ir19,
            _dir: dir,
        }
    })
}

/// `rrstore --store STORE args...`.
use store_common::run as rrstore;

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn replay_ir(store: &Path, ir: &Path, extra: &[&str]) -> Output {
    let b = built();
    let mut args = vec![
        "replay",
        b.descriptor.to_str().unwrap(),
        "--image",
        ir.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    rrstore(store, &args)
}

/// The compile cache's entries (directories named by their key), and
/// anything else it holds but the remembered toolchains.
fn cache_entries(store: &Path) -> Vec<String> {
    std::fs::read_dir(store.join("compiled"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "toolchains")
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ir_from_a_jit_build_compiles_and_verifies_then_comes_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let b = built();
    let o = replay_ir(&store, &b.ir, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{v}");
    let c = &v["compiled"];
    assert_eq!(c["cached"], false, "{v}");
    assert_eq!(c["target"], "x86_64");
    assert_eq!(c["producer"].as_str().unwrap().get(..6), Some("LLVM22"));
    assert!(c["compiler_version"]
        .as_str()
        .unwrap()
        .contains("clang version 22"));
    let ir_hash = blake3::hash(&std::fs::read(&b.ir).unwrap())
        .to_hex()
        .to_string();
    assert_eq!(c["ir_blake3"], ir_hash.as_str());
    // The image run is the compiled one, as the history records it.
    assert_eq!(v["image_blake3"], c["image_blake3"], "{v}");
    assert_eq!(cache_entries(&store).len(), 1);

    // Same inputs: no compile, the same image.
    let o2 = replay_ir(&store, &b.ir, &[]);
    let v2: serde_json::Value = serde_json::from_slice(&o2.stdout).unwrap();
    assert_eq!(v2["verdict"], "verified", "{v2}");
    assert_eq!(v2["compiled"]["cached"], true, "{v2}");
    assert_eq!(v2["image_blake3"], v["image_blake3"]);
    // Other flags: another entry, still verified.
    let o3 = replay_ir(&store, &b.ir, &["--cflags", "-O0 -fno-unroll-loops"]);
    let v3: serde_json::Value = serde_json::from_slice(&o3.stdout).unwrap();
    assert_eq!(v3["verdict"], "verified", "{}", text(&o3));
    assert!(v3["compiled"]["flags"]
        .as_array()
        .unwrap()
        .contains(&"-fno-unroll-loops".into()));
    assert_eq!(cache_entries(&store).len(), 2);
    // The image library names both compiled images by their provenance.
    let ls = rrstore(&store, &["image", "ls", "--json"]);
    let images: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
    let compiled: Vec<&serde_json::Value> = images
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["label"].as_str().unwrap().starts_with("compiled IR "))
        .collect();
    assert_eq!(compiled.len(), 2, "{images}");
    assert!(compiled.iter().any(|i| i["hash"] == v["image_blake3"]));
    assert!(compiled.iter().any(|i| i["label"]
        .as_str()
        .unwrap()
        .ends_with("-O0 -fno-unroll-loops")));
    assert!(compiled
        .iter()
        .all(|i| i["label"].as_str().unwrap().contains("(LLVM22.")));
    // So does the JUnit report of a replay.
    let junit = dir.path().join("replay.xml");
    let o = rrstore(
        &store,
        &[
            "replay",
            b.descriptor.to_str().unwrap(),
            "--image",
            b.ir.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("name=\"compiled_from_ir\"") && xml.contains("clang version 22"),
        "{xml}"
    );
    // The human output names the compile.
    let o4 = rrstore(
        &store,
        &[
            "replay",
            b.descriptor.to_str().unwrap(),
            "--image",
            b.ir.to_str().unwrap(),
        ],
    );
    assert!(
        text(&o4).contains("compiled IR") && text(&o4).contains("cached"),
        "{}",
        text(&o4)
    );
}

/// A shell script standing in for clang: `--version` says `version`, any
/// other call runs `body`.
fn fake_clang(dir: &Path, version: &str, body: &str) -> PathBuf {
    let p = dir.join("clang");
    rrstore_tests::write_script(
        &p,
        &format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'clang version {version} (fake)'; exit 0; fi\n{body}\n"
        ),
    );
    p
}

#[test]
fn bad_ir_and_bad_toolchains_each_have_their_exit_code_and_leave_no_cache_entry() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let b = built();
    let ir = std::fs::read(&b.ir).unwrap();
    let cases_dir = dir.path().join("cases");
    std::fs::create_dir_all(&cases_dir).unwrap();

    // Truncated bitcode: invalid input.
    let truncated = cases_dir.join("truncated.bc");
    std::fs::write(&truncated, &ir[..ir.len() / 3]).unwrap();
    let o = replay_ir(&store, &truncated, &[]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(text(&o).contains("IR image"), "{}", text(&o));

    // IR of another target (amdgcn) for a host recording.
    let k = cases_dir.join("k.c");
    std::fs::write(&k, "void f(int *p) { *p = 1; }\n").unwrap();
    let amd = cases_dir.join("amd.bc");
    let st = std::process::Command::new("/usr/lib/llvm-22/bin/clang")
        .args(["--target=amdgcn-amd-amdhsa", "-mcpu=gfx942", "-nogpulib"])
        .args(["-emit-llvm", "-c"])
        .arg(&k)
        .arg("-o")
        .arg(&amd)
        .status()
        .unwrap();
    assert!(st.success());
    let o = replay_ir(&store, &amd, &[]);
    // amdgcn IR has no host kernel either; the kernel check comes first.
    assert!(
        matches!(o.status.code(), Some(9) | Some(11)),
        "{}",
        text(&o)
    );

    // Host IR without the recording's kernel: symbol error.
    let other = cases_dir.join("other.bc");
    let st = std::process::Command::new("/usr/lib/llvm-22/bin/clang")
        .args(["-emit-llvm", "-c"])
        .arg(&k)
        .arg("-o")
        .arg(&other)
        .status()
        .unwrap();
    assert!(st.success());
    let o = replay_ir(&store, &other, &[]);
    assert_eq!(o.status.code(), Some(11), "{}", text(&o));
    assert!(
        text(&o).contains("does not define the kernel"),
        "{}",
        text(&o)
    );

    // A toolchain that is not there.
    let o = replay_ir(&store, &b.ir, &["--toolchain", "/nonexistent/bin/clang"]);
    assert_eq!(o.status.code(), Some(25), "{}", text(&o));
    assert!(text(&o).contains("--toolchain"), "{}", text(&o));

    // One older than the IR's producer (LLVM 22).
    let old = cases_dir.join("old");
    std::fs::create_dir_all(&old).unwrap();
    let clang = fake_clang(&old, "17.0.6", "exit 0");
    let o = replay_ir(&store, &b.ir, &["--toolchain", clang.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(25), "{}", text(&o));
    assert!(
        text(&o).contains("older than the IR's producer"),
        "{}",
        text(&o)
    );

    // One that crashes.
    let crash = cases_dir.join("crash");
    std::fs::create_dir_all(&crash).unwrap();
    let clang = fake_clang(&crash, "22.1.0", "echo 'fatal: boom' >&2; kill -SEGV $$");
    let o = replay_ir(&store, &b.ir, &["--toolchain", clang.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(24), "{}", text(&o));
    assert!(text(&o).contains("fatal: boom"), "{}", text(&o));

    // One that hangs: killed at --timeout.
    let hang = cases_dir.join("hang");
    std::fs::create_dir_all(&hang).unwrap();
    let clang = fake_clang(&hang, "22.1.0", "sleep 60");
    let t = std::time::Instant::now();
    let o = replay_ir(
        &store,
        &b.ir,
        &["--toolchain", clang.to_str().unwrap(), "--timeout", "1"],
    );
    assert_eq!(o.status.code(), Some(13), "{}", text(&o));
    assert!(t.elapsed().as_secs() < 30);

    // Flags the real compiler rejects.
    let o = replay_ir(&store, &b.ir, &["--cflags", "--no-such-flag-at-all"]);
    assert_eq!(o.status.code(), Some(24), "{}", text(&o));
    assert!(text(&o).contains("rejected the flags"), "{}", text(&o));

    // Nothing was cached by any of them, nothing half-written is left.
    assert_eq!(cache_entries(&store), Vec::<String>::new());
}

#[test]
fn the_compiler_cannot_write_outside_its_scratch_directory() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let b = built();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.join("planted");
    let evil = dir.path().join("evil");
    std::fs::create_dir_all(&evil).unwrap();
    // A compiler taken over by its input: it tries to plant a file outside
    // its scratch directory, then compiles honestly.
    let clang = fake_clang(
        &evil,
        "22.1.0",
        &format!(
            "echo pwned > {} 2>/dev/null; exec /usr/lib/llvm-22/bin/clang \"$@\"",
            target.display()
        ),
    );
    let o = replay_ir(&store, &b.ir, &["--toolchain", clang.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!target.exists(), "the compiler wrote {}", target.display());
    // With the sandbox off (debugging) the same compiler can: the defence
    // above is the confinement, not the script failing.
    let o = replay_ir(
        &store,
        &b.ir,
        &[
            "--toolchain",
            clang.to_str().unwrap(),
            "--sandbox",
            "off",
            "--cflags",
            "-O1",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(target.exists());
}

#[test]
fn a_recording_whose_image_is_ir_or_that_has_a_bc_part_replays_compiled() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let b = built();
    let stem = b
        .descriptor
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();

    // A recording with a `.bc` part beside its native image (LLVM 23+).
    let with_bc = rrstore_tests::copy_recording(&b.descriptor, &dir.path().join("with-bc"));
    std::fs::copy(&b.ir, with_bc.with_file_name(format!("{stem}.bc"))).unwrap();
    let plain = rrstore(&store, &["replay", with_bc.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{}", text(&plain));
    assert_eq!(v["compiled"], serde_json::Value::Null, "{v}");
    let o = rrstore(
        &store,
        &[
            "replay",
            with_bc.to_str().unwrap(),
            "--from-bitcode",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{}", text(&o));
    assert_eq!(v["compiled"]["target"], "x86_64", "{v}");
    // Without a `.bc` part, --from-bitcode says so.
    let o = rrstore(
        &store,
        &["replay", b.descriptor.to_str().unwrap(), "--from-bitcode"],
    );
    assert_eq!(o.status.code(), Some(19), "{}", text(&o));

    // A recording whose only image is IR (what a JIT build records), also
    // once imported into the store.
    let ir_only = rrstore_tests::copy_recording(&b.descriptor, &dir.path().join("ir-only"));
    std::fs::copy(&b.ir, ir_only.with_extension("image")).unwrap();
    let o = rrstore(&store, &["replay", ir_only.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{}", text(&o));
    assert_eq!(v["compiled"]["cached"], true, "{v}");
    let o = rrstore(
        &store,
        &["import", ir_only.parent().unwrap().to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = rrstore(&store, &["ls", "--target", "llvm-ir", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = listed[0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{listed}"));
    let o = rrstore(&store, &["replay", &id[..12], "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{}", text(&o));
}

#[test]
fn ir_of_llvm_19_compiles_with_19_and_22_and_22_ir_is_refused_by_19() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let b = built();
    // By default the LLVM matching the producer: 19.
    let o = replay_ir(&store, &b.ir19, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{v}");
    assert_eq!(
        v["compiled"]["producer"].as_str().unwrap().get(..6),
        Some("LLVM19")
    );
    assert!(v["compiled"]["compiler_version"]
        .as_str()
        .unwrap()
        .contains("clang version 19"));
    // A newer LLVM reads older bitcode.
    let o = replay_ir(&store, &b.ir19, &["--toolchain", "clang-22"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "verified", "{}", text(&o));
    assert!(v["compiled"]["compiler_version"]
        .as_str()
        .unwrap()
        .contains("clang version 22"));
    // An older one cannot: exit 25, naming both versions.
    let o = replay_ir(&store, &b.ir, &["--toolchain", "19"]);
    assert_eq!(o.status.code(), Some(25), "{}", text(&o));
    assert!(
        text(&o).contains("LLVM 19") && text(&o).contains("LLVM22"),
        "{}",
        text(&o)
    );
}
