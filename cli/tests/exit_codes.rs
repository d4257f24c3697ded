//! The README "Exit codes" table is the contract: one test per row, each
//! triggering that code through the real `rrstore` binary on real
//! (copied, edited) recordings and archives, plus the closed-pipe exit.

mod store_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rrstore_format::archive::layout::{reseal_both, Index, Manifest, HEADER_LEN};
use store_common::*;

const SAXPY: &str = "llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json";
const GLOBALS: &str = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13.json";
const NATIVE: &str = "upstream-native/saxpy/15370218017841526287_9883226215827474840.json";

/// Copy the files of the recording `rel` (under tests/fixtures) into `dir`.
fn copy_recording(rel: &str, dir: &Path) -> PathBuf {
    rrstore_tests::copy_recording(&fixtures().join(rel), dir)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Exit code and stderr of a failing command; asserts the message is
/// printed once and is not a panic.
fn code_of(store: &Path, args: &[&str]) -> (i32, String) {
    let (code, err) = fails(store, args);
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(err.matches("error:").count(), 1, "{args:?}: {err}");
    (code, err)
}

/// The globals recording with its image replaced by a kernel whose C body
/// is `body` (compiled here with cc, as the recording's real image is).
fn kernel_with_body(dir: &Path, body: &str) -> PathBuf {
    rrstore_tests::recording_with_kernel(&fixtures().join(GLOBALS), dir, |name| {
        format!("void _exit(int);\nvoid {name}(long kle, long out) {{ {body} }}\n")
    })
}

/// `rrstore pack` of a fixture into `dir/name.rra`.
fn packed(store: &Path, rel: &str, dir: &Path, name: &str) -> (PathBuf, Vec<u8>) {
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join(format!("{name}.rra"));
    ok(store, &["pack", p(&fixtures().join(rel)), "-o", p(&out)]);
    let bytes = std::fs::read(&out).unwrap();
    (out, bytes)
}

fn scratch() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("store");
    (t, s)
}

#[test]
fn code_0_success() {
    let (_t, s) = scratch();
    ok(&s, &["import", p(&fixtures().join(SAXPY))]);
    let out = ok(&s, &["replay", p(&fixtures().join(SAXPY))]);
    assert!(out.contains("VERIFIED"), "{out}");
}

#[test]
fn code_1_output_differs() {
    let (t, s) = scratch();
    let j = copy_recording(SAXPY, &t.path().join("r"));
    let out = j.with_extension("original.output");
    let mut b = std::fs::read(&out).unwrap();
    b[64] ^= 1;
    std::fs::write(&out, b).unwrap();
    assert_eq!(run(&s, &["replay", p(&j)]).status.code(), Some(1));
}

#[test]
fn code_2_bad_command_line() {
    let (_t, s) = scratch();
    ok(&s, &["import", p(&fixtures().join(SAXPY))]);
    let id = &ls_ids(&s)[0][..12];
    let j = fixtures().join(SAXPY);
    // A malformed tag is a bad command line, as the README says.
    let (code, err) = code_of(&s, &["tag", id, "badtag"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("KEY=VALUE"), "{err}");
    let (code, err) = code_of(&s, &["replay", p(&j), "--timeout", "0"]);
    assert_eq!(code, 2, "{err}");
    let (code, err) = code_of(&s, &["check", "--timeout", "0"]);
    assert_eq!(code, 2, "{err}");
    // Below 1 ms a limit cannot be kept: refused, not silently unlimited.
    for short in ["0.0005", "1e-10"] {
        let (code, err) = code_of(&s, &["replay", p(&j), "--timeout", short]);
        assert_eq!(code, 2, "--timeout {short}: {err}");
        assert!(err.contains("1 ms"), "{err}");
    }
    for flag in ["--num-threads", "--num-teams"] {
        let (code, err) = fails(&s, &["replay", p(&j), flag, "0"]);
        assert_eq!(code, 2, "{flag} 0: {err}");
    }
    assert_eq!(fails(&s, &["ls", "--no-such-flag"]).0, 2);
    // `ls --tag` and `--since` take the same KEY=VALUE and date forms.
    let (code, err) = fails(&s, &["ls", "--tag", "badtag"]);
    assert_eq!(code, 2, "{err}");
    let (code, err) = fails(&s, &["ls", "--since", "yesterday"]);
    assert_eq!(code, 2, "{err}");
    // Nothing was tagged.
    assert_eq!(ok(&s, &["tag", id]).trim(), "");
}

#[test]
fn code_3_not_found() {
    let (_t, s) = scratch();
    ok(&s, &["import", p(&fixtures().join(SAXPY))]);
    let id = ls_ids(&s)[0].clone();
    let unknown = if id.starts_with("dead") {
        "beef"
    } else {
        "dead"
    };
    let (code, err) = code_of(&s, &["history", unknown]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(unknown), "{err}");
    // A stored recording that never ran: no rows, not an error.
    let out = ok(&s, &["history", &id[..8]]);
    assert!(out.contains("no replays recorded"), "{out}");
    // A glob that matches nothing must not pass CI.
    let (code, err) = code_of(&s, &["check", "--kernel", "*typo*"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("*typo*"), "{err}");
    assert_eq!(code_of(&s, &["replay", "no/such/file.json"]).0, 3);
}

#[test]
fn code_4_malformed_input() {
    let (t, s) = scratch();
    let dir = t.path().join("a");
    let (_, bytes) = packed(&s, GLOBALS, &dir, "g");
    // Manifest (and index, where parts change) edited, checksums and ID
    // recomputed: only the recording's consistency is wrong.
    let edited = |name: &str, edit: &dyn Fn(&mut Manifest, &mut Index)| {
        let path = dir.join(format!("{name}.rra"));
        std::fs::write(&path, reseal_both(&bytes, edit).unwrap()).unwrap();
        path
    };
    let input = rrstore_format::PartRole::Input;
    let cases = [
        edited("args", &|m, _| m.recording.args = vec![0; 100_000]),
        edited("noinput", &|m, i| {
            m.recording.parts.retain(|p| p.role != input);
            i.parts.retain(|p| p.role != input);
        }),
        edited("dup", &|m, i| {
            let last = m.recording.parts.last().unwrap().clone();
            m.recording.parts.push(last);
            let entry = i.parts.last().unwrap().clone();
            i.parts.push(entry);
        }),
        edited("global", &|m, _| {
            m.recording.globals[0].data_offset = 1 << 40;
        }),
        // The manifest contradicting its own descriptor (`unpack` would
        // write a .json saying 8 GiB beside a 64-byte .memory).
        edited("desc", &|m, _| {
            let d = String::from_utf8(m.recording.descriptor.clone()).unwrap();
            let d = d.replace("\"DeviceMemorySize\":64", "\"DeviceMemorySize\":8589934592");
            m.recording.descriptor = d.into_bytes();
        }),
        edited("huge", &|m, _| m.recording.arena.size = 1 << 40),
    ];
    for path in &cases {
        for args in [
            vec!["import", p(path)],
            vec!["replay", p(path)],
            vec!["unpack", p(path), "-o", p(&dir.join("out"))],
        ] {
            let (code, err) = code_of(&s, &args);
            assert_eq!(code, 4, "{args:?}: {err}");
            assert!(err.contains("inconsistent"), "{err}");
        }
    }
    // Nothing was imported or unpacked.
    assert!(ls_ids(&s).is_empty());
    assert!(!dir.join("out").exists() || std::fs::read_dir(dir.join("out")).unwrap().count() == 0);
    // An image that is no device image at all, with the backend picked
    // from it: malformed input (with --backend host: a target mismatch, 9).
    let j = copy_recording(SAXPY, &t.path().join("notelf"));
    std::fs::write(j.with_extension("image"), b"this is not an ELF image").unwrap();
    let (code, err) = code_of(&s, &["replay", p(&j)]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("not a device image"), "{err}");
}

#[test]
fn code_5_corrupt() {
    let (t, s) = scratch();
    let (path, mut bytes) = packed(&s, SAXPY, t.path(), "x");
    // A byte inside the first chunk's stored bytes: its hash (or frame) no
    // longer checks out.
    bytes[HEADER_LEN as usize + 40] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    for args in [
        vec!["replay", p(&path)],
        vec!["import", p(&path)],
        vec!["unpack", p(&path), "-o", p(&t.path().join("out"))],
    ] {
        // code_of also checks the message is printed once.
        let (code, err) = code_of(&s, &args);
        assert_eq!(code, 5, "{args:?}: {err}");
        assert!(err.contains("damaged"), "{err}");
    }
}

/// Two copies of the globals recording whose descriptors differ only in
/// trailing spaces, chosen so that their IDs share the first 4 hex digits.
fn two_with_a_shared_prefix(dir: &Path) -> (PathBuf, PathBuf, String) {
    let base = copy_recording(GLOBALS, &dir.join("base"));
    let rec = rrstore_format::llvm::load(&base).unwrap().recording;
    let mut seen = std::collections::HashMap::new();
    for n in 0..20_000usize {
        let mut r = rec.clone();
        r.descriptor.extend(std::iter::repeat_n(b' ', n));
        let prefix = r.id().to_hex()[..4].to_string();
        if let Some(&m) = seen.get(&prefix) {
            let write = |k: usize, name: &str| {
                let j = copy_recording(GLOBALS, &dir.join(name));
                let mut d = std::fs::read(&j).unwrap();
                d.extend(std::iter::repeat_n(b' ', k));
                std::fs::write(&j, d).unwrap();
                j
            };
            return (write(m, "a"), write(n, "b"), prefix);
        }
        seen.insert(prefix, n);
    }
    panic!("no shared 4-digit prefix in 20000 IDs");
}

#[test]
fn code_6_ambiguous_prefix() {
    let (t, s) = scratch();
    let (a, b, prefix) = two_with_a_shared_prefix(t.path());
    ok(&s, &["import", p(&a), p(&b)]);
    let (code, err) = code_of(&s, &["show", &prefix]);
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("ambiguous"), "{err}");
}

#[test]
fn code_7_store_unusable() {
    let (t, _) = scratch();
    let file = t.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let (code, err) = code_of(&file.join("store"), &["import", p(&fixtures().join(SAXPY))]);
    assert_eq!(code, 7, "{err}");
}

#[test]
fn code_8_backend_unusable() {
    let (t, s) = scratch();
    // An AMDGPU (gfx942) image: auto picks the hip backend, which has no
    // driver on the machines that run these tests.
    let j = copy_recording(SAXPY, &t.path().join("amd"));
    let elf = rrstore_tests::elf_header(rrstore_tests::elf::EM_AMDGPU, 0x04c, 0);
    std::fs::write(j.with_extension("image"), elf).unwrap();
    let (code, err) = code_of(&s, &["replay", p(&j)]);
    assert_eq!(code, 8, "{err}");
}

#[test]
fn code_9_target_mismatch() {
    let (t, s) = scratch();
    let j = copy_recording(SAXPY, &t.path().join("notelf"));
    std::fs::write(j.with_extension("image"), b"this is not an ELF image").unwrap();
    let (code, err) = code_of(&s, &["replay", p(&j), "--backend", "host"]);
    assert_eq!(code, 9, "{err}");
    // A host image forced onto the cuda backend: both targets in one
    // readable sentence.
    let (code, err) = code_of(
        &s,
        &["replay", p(&fixtures().join(SAXPY)), "--backend", "cuda"],
    );
    assert_eq!(code, 9, "{err}");
    assert!(
        err.contains(
            "does not match the device target cubin/PTX (an NVIDIA GPU) of the cuda backend"
        ),
        "{err}"
    );
}

#[test]
fn code_10_arena_unavailable() {
    let (t, s) = scratch();
    let j = copy_recording(GLOBALS, &t.path().join("far"));
    let text = std::fs::read_to_string(&j).unwrap();
    let base = rrstore_tests::descriptor_u64(&text, "BumpAllocVAStart").to_string();
    // Beyond any user address space; `--placement auto` (the default)
    // would relocate it (tests/relocation.rs), `recorded` may not.
    std::fs::write(&j, text.replace(&base, &(1u64 << 57).to_string())).unwrap();
    let (code, err) = code_of(&s, &["replay", p(&j), "--placement", "recorded"]);
    assert_eq!(code, 10, "{err}");
}

#[test]
fn code_11_kernel_symbol_missing() {
    let (t, s) = scratch();
    let j = copy_recording(SAXPY, &t.path().join("r"));
    let other = fixtures().join(GLOBALS).with_extension("image");
    std::fs::copy(other, j.with_extension("image")).unwrap();
    let (code, err) = code_of(&s, &["replay", p(&j)]);
    assert_eq!(code, 11, "{err}");
}

#[test]
fn code_12_kernel_crashed() {
    let (t, s) = scratch();
    let j = kernel_with_body(&t.path().join("trap"), "__builtin_trap();");
    let (code, _) = fails(&s, &["replay", p(&j)]);
    assert_eq!(code, 12);
    // A kernel that ends the process without a signal did not complete
    // either: the same code, not "backend unusable".
    let j = kernel_with_body(&t.path().join("exit"), "_exit(0);");
    let (code, err) = code_of(&s, &["replay", p(&j)]);
    assert_eq!(code, 12, "{err}");
    assert!(err.contains("called exit"), "{err}");
}

#[test]
fn code_13_timed_out() {
    let (t, s) = scratch();
    let j = kernel_with_body(&t.path().join("hang"), "volatile long n = 0; for (;;) n++;");
    let (code, _) = fails(&s, &["replay", p(&j), "--timeout", "0.3"]);
    assert_eq!(code, 13);
}

#[test]
fn code_14_remote_unreachable() {
    let (_t, s) = scratch();
    ok(&s, &["import", p(&fixtures().join(SAXPY))]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    ok(
        &s,
        &[
            "remote",
            "add",
            "down",
            "s3://rr-none",
            "--endpoint",
            &endpoint,
            "--allow-http",
        ],
    );
    let o = store_common::command()
        .arg("--store")
        .arg(&s)
        .args(["push", "down", "--all"])
        .env_remove("RRSTORE_DIR")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_PROFILE")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(14), "{err}");
}

#[test]
fn code_15_record_failed() {
    let (_t, s) = scratch();
    let (code, err) = code_of(&s, &["record", "--", "/nonexistent/program"]);
    assert_eq!(code, 15, "{err}");
}

#[test]
fn code_16_newer_version() {
    let (t, s) = scratch();
    let (path, mut bytes) = packed(&s, GLOBALS, t.path(), "future");
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let (code, err) = code_of(&s, &["import", p(&path)]);
    assert_eq!(code, 16, "{err}");
}

#[test]
fn code_17_global_differs() {
    let (t, s) = scratch();
    let j = copy_recording(GLOBALS, &t.path().join("g"));
    rrstore_tests::shrink_global(&j.with_extension("globals"), "g_counter", 2);
    let (code, err) = code_of(&s, &["replay", p(&j)]);
    assert_eq!(code, 17, "{err}");
}

#[test]
fn code_18_no_output_to_verify() {
    let (t, s) = scratch();
    let j = copy_recording(SAXPY, &t.path().join("r"));
    std::fs::remove_file(j.with_extension("original.output")).unwrap();
    let (code, err) = code_of(&s, &["replay", p(&j), "--verify"]);
    assert_eq!(code, 18, "{err}");
}

#[test]
fn code_19_not_replayable() {
    let (_t, s) = scratch();
    let legacy = fixtures().join("legacy/globals/__omp_offloading_fe00_9ae057_main_l13.json");
    let (code, err) = code_of(&s, &["replay", p(&legacy)]);
    assert_eq!(code, 19, "{err}");
}

#[test]
fn code_20_outside_launch_limits() {
    let (_t, s) = scratch();
    let j = fixtures().join(NATIVE);
    let (code, err) = code_of(&s, &["replay", p(&j), "--num-threads", "4"]);
    assert_eq!(code, 20, "{err}");
}

#[test]
fn code_21_not_signed_by_a_required_key() {
    let (t, s) = scratch();
    ok(&s, &["import", p(&fixtures().join(SAXPY))]);
    let url = format!("file://{}", t.path().join("remote").display());
    ok(&s, &["remote", "add", "r", &url]);
    ok(&s, &["push", "r", "--all"]);
    let key = t.path().join("k");
    let public = ok(&s, &["key", "generate", "--output", p(&key)]);
    // Pushed unsigned: a pull that requires the key's signature refuses it.
    let (code, err) = code_of(
        &s,
        &["pull", "r", "--all", "--require-signed-by", public.trim()],
    );
    assert_eq!(code, 21, "{err}");
}

/// 70 (internal error) is what an error no row names maps to: a bug. No
/// input triggers it on purpose (there is no test hook, and adding a
/// panic or a fake error path would be a bug of its own); the other tests
/// here show that each user-facing failure gets its own code instead. This
/// test keeps the README table and these tests in step.
#[test]
fn code_70_and_the_table_is_the_contract() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let table = readme
        .split("## Exit codes")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let codes: Vec<u32> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect();
    // 22 (a GPU driver that does not start in time) needs a GPU child
    // whose driver hangs: replay/tests/gpu_child.rs
    // (`a_driver_start_that_hangs_ends_with_its_own_error`) checks it.
    // 23 (nondeterministic) needs a kernel whose output varies:
    // cli/tests/nondeterminism.rs compiles and records one. 24 (an IR
    // image's compiler failed) and 25 (no toolchain for it):
    // cli/tests/ir_replay.rs
    // (`bad_ir_and_bad_toolchains_each_have_their_exit_code_...`) builds
    // the IR they need.
    let mut expected: Vec<u32> = (0..=25).collect();
    expected.extend([70, 141]);
    assert_eq!(codes, expected);
}

/// `rrstore ARGS | (closed)`: stdout is a pipe whose read end is closed
/// before the command starts, so its first write fails. Returns exit code
/// and stderr.
fn into_closed_pipe(store: &Path, args: &[&str]) -> (Option<i32>, String) {
    // The write end of a pipe whose only reader, `true`, has exited.
    let mut reader = Command::new("true").stdin(Stdio::piped()).spawn().unwrap();
    let write_end = reader.stdin.take().unwrap();
    reader.wait().unwrap();
    let o: Output = store_common::command()
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("RRSTORE_DIR")
        .stdout(write_end)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn code_141_stdout_closed_early_is_quiet() {
    let (_t, s) = scratch();
    ok(&s, &["import", p(&fixtures().join("llvm22-host"))]);
    let ids = ls_ids(&s);
    for _ in 0..3 {
        ok(&s, &["replay", &ids[0][..12]]);
    }
    for args in [
        vec!["history"],
        vec!["history", "--json"],
        vec!["ls"],
        vec!["show", &ids[0][..12]],
        vec!["import", p(&fixtures().join("llvm22-host"))],
    ] {
        let (code, err) = into_closed_pipe(&s, &args);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
        assert_eq!(code, Some(141), "{args:?}: {err}");
    }
}
